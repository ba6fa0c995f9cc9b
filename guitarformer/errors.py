"""User-facing errors: one clear line naming the problem and the fix; the CLI prints them without a traceback."""


class GuitarformerError(Exception):
    """An error caused by user input (paths, configs, data) rather than a bug."""

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(problem if not fix else f"{problem} — {fix}")


class SkipFile(Exception):
    """Raised by a reader for a file that is readable but not usable (not guitar, unsupported format)."""
