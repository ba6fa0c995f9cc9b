"""The tables the tab-token benches write into docs/results/TAB_TOKENS.md: each between its own pair of marks, so a bench
run replaces its table and leaves the prose around it alone.

    <!-- table:NAME -->
    ...
    <!-- /table:NAME -->
"""

from __future__ import annotations

from pathlib import Path


def write_section(doc: Path, name: str, text: str) -> None:
    """Put `text` between the marks of table `name` in `doc` (appended at the end, marks and all, if absent)."""
    start, end = f"<!-- table:{name} -->", f"<!-- /table:{name} -->"
    page = doc.read_text() if doc.is_file() else ""
    block = f"{start}\n{text.strip()}\n{end}"
    if start in page and end in page:
        head, rest = page.split(start, 1)
        page = head + block + rest.split(end, 1)[1]
    else:
        page = page.rstrip() + "\n\n" + block + "\n"
    doc.write_text(page)
