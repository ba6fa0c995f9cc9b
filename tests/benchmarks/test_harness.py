"""benchmarks/harness.py: a benchmark's section of a results page is replaced whole, the rest of the page kept; its
tables and its interleaved comparison."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from harness import comparison_table, interleaved, ratios, table, write_section  # noqa: E402


def test_a_section_is_appended_then_replaced_and_the_page_around_it_kept(tmp_path):
    page = tmp_path / "EVAL.md"
    page.write_text("# Results\n\nhand-written text\n")
    write_section(page, "style", "first table")
    write_section(page, "riffs", "other table", by="python benchmarks/bench_eval_riffs.py")
    write_section(page, "style", "second table\nrow")
    text = page.read_text()
    assert text.startswith("# Results\n\nhand-written text\n")
    assert "second table\nrow" in text and "first table" not in text and "other table" in text
    assert text.index("second table") < text.index("other table")
    assert "<!-- riffs:begin (written by `python benchmarks/bench_eval_riffs.py`; edits" in text
    assert text.count("<!-- style:begin") == 1 and text.count("<!-- style:end -->") == 1
    write_section(tmp_path / "new.md", "style", "x")
    assert "x" in (tmp_path / "new.md").read_text()


def test_table_and_comparison():
    assert table(["a", "b"], [[1, "x"]]) == "| a | b |\n| --- | ---: |\n| 1 | x |"
    calls = []
    times = interleaved({"old": lambda: calls.append("old"), "new": lambda: calls.append("new")}, rounds=2)
    assert calls == ["old", "new", "new", "old"] and all(len(ts) == 2 for ts in times.values())
    assert ratios({"a": [2.0, 2.0], "b": [1.0, 1.0]}, "a") == {"a": 1.0, "b": 0.5}
    assert "0.50x" in comparison_table({"a": [2.0, 2.0], "b": [1.0, 1.0]}, "a")
