"""What the benchmarks share: a timer, an interleaved A/B comparison that quotes ratios, a markdown table, and the one
writer of a results page's measured sections.

A measured section of a page under docs/results/ sits between two marks; the script that measures it replaces it
whole and leaves the prose around it alone, so one page can hold several scripts' tables:

    <!-- NAME:begin (written by `COMMAND`; edits here are overwritten) -->
    ...
    <!-- NAME:end -->

A benchmark imports it as `harness` (its own folder is on sys.path when it runs as a script)."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class Timer:
    """Wall seconds of a `with` block: `with Timer() as t: ...`, then `t.seconds`."""

    def __enter__(self) -> Timer:
        self.start, self.seconds = time.perf_counter(), 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def timed(fn: Callable[[], object], repeat: int = 1) -> list[float]:
    """Wall seconds of each of `repeat` calls of `fn`."""
    out = []
    for _ in range(repeat):
        with Timer() as t:
            fn()
        out.append(t.seconds)
    return out


def interleaved(ways: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Each round calls every way once, in turn, the order rotated from round to round so that no way always goes
    first; a machine that slows down or speeds up meanwhile weighs on every way alike. Seconds per way and round."""
    names, times = list(ways), {name: [] for name in ways}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].extend(timed(ways[name]))
    return times


def ratios(times: dict[str, list[float]], base: str) -> dict[str, float]:
    """Each way's median over `base`'s median (1.0 for `base` itself)."""
    ref = statistics.median(times[base])
    return {name: statistics.median(ts) / ref if ref else float("nan") for name, ts in times.items()}


def comparison_table(times: dict[str, list[float]], base: str, unit: str = "s") -> str:
    """An interleaved comparison as a markdown table: median and best of each way, and its ratio to `base`."""
    rel = ratios(times, base)
    rows = [[f"`{name}`", f"{statistics.median(ts):.3f}", f"{min(ts):.3f}", f"{rel[name]:.2f}x"]
            for name, ts in times.items()]
    return table([f"way ({len(next(iter(times.values())))} rounds)", f"median {unit}", f"best {unit}",
                  f"vs `{base}`"], rows, align="lrrr")


def table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str = "") -> str:
    """A markdown table; `align` has one letter a column, `l` or `r` (default: the first left, the rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = [header, rule, *([str(c) for c in row] for row in rows)]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def markers(name: str, by: str = "") -> tuple[str, str]:
    """The begin and end marks of section `name` (`by`: the command that writes it)."""
    who = f"written by `{by}`" if by else "written by a benchmark"
    return f"<!-- {name}:begin ({who}; edits here are overwritten) -->", f"<!-- {name}:end -->"


def write_section(path: Path, name: str, text: str, by: str = "") -> str:
    """Replace section `name` of the markdown page at `path` with `text`, marks and all (appended at the end where
    the page has no such section yet; the page is created if missing). Returns the section as written."""
    begin, end = markers(name, by)
    block = f"{begin}\n{text.strip()}\n{end}"
    page = path.read_text() if path.is_file() else ""
    found = re.compile(rf"<!-- {re.escape(name)}:begin\b[^\n]*?-->.*?<!-- {re.escape(name)}:end -->", re.S)
    if found.search(page):
        page = found.sub(lambda _: block, page, count=1)
    else:
        page = page.rstrip("\n") + ("\n\n" if page else "") + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return block
