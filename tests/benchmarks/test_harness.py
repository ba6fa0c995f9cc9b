"""evaluation/docs.py: a script's section of a results page is replaced whole, the rest of the page kept."""

from __future__ import annotations

from guitarformer.evaluation.docs import write_section


def test_a_section_is_appended_then_replaced_and_the_page_around_it_kept(tmp_path):
    page = tmp_path / "EVAL.md"
    page.write_text("# Results\n\nhand-written text\n")
    write_section(page, "style", ["first table"])
    write_section(page, "riffs", ["other table"])
    write_section(page, "style", ["second table", "row"])
    text = page.read_text()
    assert text.startswith("# Results\n\nhand-written text\n")
    assert "second table\nrow" in text and "first table" not in text and "other table" in text
    assert text.index("second table") < text.index("other table")
    write_section(tmp_path / "new.md", "style", ["x"])
    assert "x" in (tmp_path / "new.md").read_text()
