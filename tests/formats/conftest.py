from pathlib import Path

import pytest
from django.utils.text import slugify

from sessions.importers import import_file
from sessions.models import Project
from tests.conftest import seeded_for_module

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl"))


@pytest.fixture(scope="module")
def imported_files(django_db_setup, django_db_blocker) -> dict[Path, tuple]:
    """Every transcript file of FILES imported once for the module by the real importers, each into a
    project of its own: path -> (project, import report). tau-bench's 200 runs take seconds to import;
    the tests here read what was imported, or change it inside their own (rolled back) transaction."""
    with seeded_for_module(django_db_blocker):
        imported = {}
        for path in FILES:
            project = Project.objects.create(name=slugify(path.name)[:100])
            imported[path] = (project, import_file(project, path))
        yield imported
