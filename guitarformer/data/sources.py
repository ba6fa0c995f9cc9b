"""What `prepare` reads: its inputs expanded to files (symlinks followed only inside an input folder), each file's
content hash, its style folder, and the manifest line of a file passed over."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable

from guitarformer.vocab.controls import style_of
from guitarformer.errors import GuitarformerError
from guitarformer.readers.formats import detect_format, readable_types, unsupported_reason

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def manifest_line(path: Path, sha: str | None, fmt: str | None, status: str, reason: str | None, **kw: Any) -> dict:
    """One manifest.jsonl record: a file, what it was, what became of it and why."""
    d = {"path": str(path), "sha256": sha, "format": fmt, "status": status, "reason": reason,
         "tracks": 0, "n_tokens": 0, "split": None, "piece": None}
    d.update(kw)
    return d


def collect_files(inputs: Iterable[str | Path]) -> tuple[list[Path], list[dict]]:
    """Expand files and folders (recursively). Returns candidate files and manifest lines for what was passed over.

    A symlink under an input folder is followed only when it points inside that folder: one pointing out of it
    (to /etc/passwd, to another user's files) is passed over with a manifest line saying where it points."""
    files: list[Path] = []
    passed: list[dict] = []
    for inp in inputs:
        p = Path(inp).expanduser()
        if not p.exists():
            raise GuitarformerError(f"input {p} does not exist", f"pass files or folders of music ({readable_types()})")
        if p.is_file():
            files.append(p)
            continue
        root = p.resolve()
        for q in sorted(p.rglob("*")):
            if any(part.startswith(".") for part in q.relative_to(p).parts):
                continue
            if q.is_symlink() and not _inside(q, root):
                passed.append(manifest_line(q, None, detect_format(q), "skipped", f"a symlink to {_target(q)}, outside "
                                            f"the input folder {p}: not followed (copy the file in to prepare it)"))
                continue
            if not q.is_file():
                continue
            if detect_format(q) is None:
                passed.append(manifest_line(q, None, "unsupported", "skipped", unsupported_reason(q)))
            else:
                files.append(q)
    seen: set[Path] = set()
    unique = [f for f in files if not (f.resolve() in seen or seen.add(f.resolve()))]
    return unique, passed


def _inside(link: Path, root: Path) -> bool:
    try:
        link.resolve().relative_to(root)
        return True
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return False


def _target(link: Path) -> str:
    try:
        return str(link.readlink())
    except OSError:
        return "an unreadable target"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_style(path: str | Path, roots: Iterable[str | Path]) -> str | None:
    """The style control of a file: the folder below the first input folder (`roots`) that holds it
    (my-tabs/metal/x.gp5 -> "metal"); None for a file directly in a root or passed by name."""
    for root in roots:
        try:
            Path(path).resolve().relative_to(Path(root).resolve())
        except ValueError:
            continue
        return style_of(path, root)
    return None
