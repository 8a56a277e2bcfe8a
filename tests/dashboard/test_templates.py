"""Template comments: Django's {# #} comment ends on its own line; one that goes on to the next line is
printed on the page as text (it was, in every message of the raw log). Longer comments use
{% comment %}."""

from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_every_one_line_comment_ends_on_its_line():
    open_comments = [f"{path.relative_to(TEMPLATES)}:{number}"
                     for path in sorted(TEMPLATES.rglob("*.html"))
                     for number, line in enumerate(path.read_text().splitlines(), start=1)
                     if line.count("{#") > line.count("#}")]
    assert open_comments == []
