"""The layers of the one Django app (docs/architecture.md), checked: the import-linter contracts of
pyproject.toml (each subpackage imports only from the layers below it; no modules import each other in a
loop), the dashboard's views leave queries to the modules below them, and hand-written SQL lives only in
sessions/db/."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "sessions"
QUERY_METHODS = {"objects", "filter", "exclude", "order_by", "select_related", "prefetch_related", "annotate",
                 "values_list", "aggregate"}


def test_the_import_contracts_are_kept():
    """`lint-imports` as `make lint` runs it: a cycle or an import from a lower layer up fails here."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout, result.stdout


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_dashboard_does_not_import_the_http_api():
    for path in (SESSIONS / "dashboard").glob("*.py"):
        imported = imported_modules(path)
        assert not any(name == "sessions.http" or name.startswith("sessions.http.") for name in imported), path


@pytest.mark.parametrize("views", ["views.py", "review_views.py"])
def test_the_views_write_no_queries_of_their_own(views):
    tree = ast.parse((SESSIONS / "dashboard" / views).read_text())
    calls = sorted({
        node.attr for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in QUERY_METHODS
    })
    assert calls == [], f"sessions/dashboard/{views} uses {calls}: put the query in a module below it"


# Hand-written SQL: a cursor, a statement executed, RawSQL, raw() or extra(), a Func's own SQL template,
# or a string that starts as a statement does. Migrations write the schema and stay where Django has them.
SQL_TEXT = re.compile(r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|WITH|PRAGMA|COPY|CREATE|DROP|ALTER)\b")
SQL_CALLS = {"cursor", "execute", "executemany", "raw", "extra", "RawSQL"}
# Named, with the reason: SQL that is configuration, not a statement of the product's.
SQL_ALLOWED = {
    # The SQLite connection's own settings (WAL, synchronous=FULL), run by Django on every new connection.
    ("ctxweb/settings.py", "SQL text"),
}


def sql_outside_db() -> list[str]:
    found = []
    paths = [*(ROOT / "sessions").rglob("*.py"), *(ROOT / "ctxweb").rglob("*.py")]
    for path in sorted(paths):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("sessions/db/", "sessions/migrations/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            what = None
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if name in SQL_CALLS:
                    what = f"{name}()"
                elif any(keyword.arg == "template" for keyword in node.keywords):
                    what = "a SQL template"
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_TEXT.match(node.value):
                what = "SQL text"
            elif isinstance(node, ast.JoinedStr):
                first = next((v.value for v in node.values if isinstance(v, ast.Constant)), "")
                if SQL_TEXT.match(first):
                    what = "SQL text"
            if what and (rel, what) not in SQL_ALLOWED:
                found.append(f"{rel}:{node.lineno}: {what}")
    return found


def test_hand_written_sql_lives_only_in_sessions_db():
    assert sql_outside_db() == [], "move these statements into sessions/db/, one module per table"


def test_the_sql_check_finds_what_it_looks_for(tmp_path):
    """The check above can fail: the shapes it looks for are found in a module written to find them."""
    module = ROOT / "sessions" / "_sql_probe_for_test.py"
    module.write_text('from django.db import connection\n\n\ndef probe():\n'
                      '    with connection.cursor() as cursor:\n        cursor.execute(f"SELECT {1}")\n')
    try:
        found = [line.split(": ", 1)[1] for line in sql_outside_db() if "_sql_probe_for_test" in line]
    finally:
        module.unlink()
    assert set(found) == {"SQL text", "cursor()", "execute()"}
