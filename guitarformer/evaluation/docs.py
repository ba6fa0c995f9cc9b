"""Measured sections of the project's result pages: a script writes its section whole between two markers, so a
page can hold several scripts' tables and none is merged by hand."""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: begin (written by a script; edits here are overwritten) -->", f"<!-- {name}: end -->"


def write_section(path: Path, name: str, lines: list[str]) -> None:
    """Replace the section `name` of the markdown file at `path` with `lines` (appended at the end, markers and
    all, where the page has no such section yet; the file is created if missing)."""
    begin, end = markers(name)
    text = path.read_text() if path.is_file() else ""
    body = "\n".join([begin, *lines, end])
    if begin in text and end in text.split(begin, 1)[1]:
        head, rest = text.split(begin, 1)
        text = head + body + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + body + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
