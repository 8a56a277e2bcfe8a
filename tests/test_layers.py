"""Layers read downward: the dashboard's views use the domain modules, never the API module, and leave
queries to the domain (plain functions named for what they find)."""

import ast
from pathlib import Path

import pytest

SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
DASHBOARD = ["views.py", "import_views.py", "login_views.py", "forms.py", "urls.py"]
QUERY_METHODS = {"objects", "filter", "exclude", "order_by", "select_related", "prefetch_related", "annotate",
                 "values_list", "aggregate"}


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names.update(f"{base}.{alias.name}" if node.module else f"{base}{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("module", DASHBOARD)
def test_the_dashboard_does_not_import_the_api_module(module):
    imported = imported_modules(SESSIONS / module)
    assert not imported & {".api", "sessions.api", "..api"}, imported


def test_the_views_write_no_queries_of_their_own():
    tree = ast.parse((SESSIONS / "views.py").read_text())
    calls = sorted({
        node.attr for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in QUERY_METHODS
    })
    assert calls == [], f"sessions/views.py uses {calls}: put the query in a domain module"
