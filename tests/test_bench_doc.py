"""`make bench` writes its dated table into docs/performance.md, between the bench:table markers, and
leaves the rest of the document as it was; `make bench-quick` writes nothing."""

import io
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.report import Report
from bench.run import DOC, TABLE_END, TABLE_START, DocMarkersError, write_doc

ROOT = Path(__file__).resolve().parents[1]
FAKE_REPORT = """ctxweb benchmark  cores: 2  database: SQLite 3.40.1
sizes  sessions=10

measurement               median           min           max             n  unit
------------------------------------------------------------------------------------
append, batches of 100     4,160         3,900         4,300             5  msg/s

correctness checks: 3 of 3 passed
run took 12.3 s"""


def split(text: str) -> tuple[str, str, str]:
    before, rest = text.split(TABLE_START)
    between, after = rest.split(TABLE_END)
    return before, between, after


@pytest.fixture
def doc(tmp_path) -> Path:
    copy = tmp_path / "performance.md"
    shutil.copy(DOC, copy)
    return copy


def test_the_performance_doc_holds_the_markers_under_its_heading():
    text = DOC.read_text()
    assert text.count(TABLE_START) == text.count(TABLE_END) == 1
    heading = text.index("## Latest run of `make bench`")
    assert heading < text.index(TABLE_START) < text.index(TABLE_END)
    assert text.index(TABLE_END) < text.index("\n## ", heading + 1)  # inside that section


def test_the_text_between_the_markers_is_replaced_and_the_rest_kept(doc):
    original = doc.read_text()
    when = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    write_doc(doc, FAKE_REPORT, database="SQLite 3.40.1", cpus=2, command="make bench", when=when)

    before, between, after = split(doc.read_text())
    old_before, old_between, old_after = split(original)
    assert (before, after) == (old_before, old_after)
    assert between != old_between
    lines = between.strip("\n").splitlines()
    assert lines[0] == "2026-03-04 05:06 UTC, SQLite 3.40.1, 2 CPUs: `make bench`"
    assert lines[2] == "```text" and lines[-1] == "```"
    assert "\n".join(lines[3:-1]) == FAKE_REPORT


def test_a_second_run_replaces_the_first_runs_table(doc):
    write_doc(doc, FAKE_REPORT, database="SQLite 3.40.1", cpus=2, command="make bench")
    once = doc.read_text()
    write_doc(doc, FAKE_REPORT.replace("4,160", "5,000"), database="PostgreSQL 15.8", cpus=1,
              command="DATABASE_URL=postgres://... make bench")
    before, between, after = split(doc.read_text())
    assert (before, after) == (split(once)[0], split(once)[2])
    assert "5,000" in between and "4,160" not in between
    assert re.match(r"\n\d{4}-\d\d-\d\d \d\d:\d\d UTC, PostgreSQL 15\.8, 1 CPU: `DATABASE_URL=postgres://\.\.\. make bench`",
                    between)


def test_a_doc_without_the_markers_is_a_clear_error_and_stays_as_it_was(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nNo place for the table here.\n")
    with pytest.raises(DocMarkersError, match=re.escape(TABLE_START)):
        write_doc(doc, FAKE_REPORT, database="SQLite 3.40.1", cpus=2, command="make bench")
    assert doc.read_text() == "# Performance\n\nNo place for the table here.\n"


def test_markers_out_of_order_are_refused(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\n{TABLE_END}\nold\n{TABLE_START}\n")
    with pytest.raises(DocMarkersError, match="once"):
        write_doc(doc, FAKE_REPORT, database="SQLite 3.40.1", cpus=2, command="make bench")


def test_the_report_returns_the_table_it_printed():
    report = Report(machine={"cores": 2, "database": "SQLite 3.40.1"}, sizes={"sessions": 10})
    report.figure("append", "msg/s", [1.0, 2.0, 3.0])
    report.check("nothing lost", True)
    out = io.StringIO()
    text = report.print(out)
    printed = out.getvalue().splitlines()
    assert "\n".join(printed[1:-1]) == text  # a blank line first, the line of JSON last
    assert text.startswith("ctxweb benchmark  cores: 2") and "append" in text


def test_make_bench_writes_the_doc_and_bench_quick_does_not():
    makefile = (ROOT / "Makefile").read_text()
    recipes = dict(re.findall(r"^(bench|bench-quick): install\n\t(.*)$", makefile, re.MULTILINE))
    assert recipes["bench"].split() == ["$(BIN)/python", "-m", "bench.run", "--write-doc"]
    assert "--write-doc" not in recipes["bench-quick"]
