import pytest
from django.db import connection

from sessions.append import append_messages
from sessions.models import Project
from tests.openai_stub import OpenAIStub


@pytest.fixture(autouse=True, scope="session")
def import_dir_for_the_run(tmp_path_factory):
    """Uploaded transcripts wait for the worker in a temporary folder, not in the checkout's var/."""
    from django.conf import settings

    settings.CTXWEB_IMPORT_DIR = tmp_path_factory.mktemp("imports")


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# A brute-force limit low enough for tests to reach (sessions/throttle.py).
AUTH_FAILURE_LIMIT = 3
AUTH_FAILURE_WINDOW = 300


@pytest.fixture
def low_auth_failure_limit(settings):
    settings.CTXWEB_AUTH_FAILURE_LIMIT = AUTH_FAILURE_LIMIT
    settings.CTXWEB_AUTH_FAILURE_WINDOW = AUTH_FAILURE_WINDOW


@pytest.fixture
def project(db):
    return Project.objects.get_or_create(name="default")[0]


@pytest.fixture
def other_project(db):
    return Project.objects.get_or_create(name="other")[0]


@pytest.fixture
def append(project):
    """append("key", [messages]) through the domain function; returns the AppendResult."""

    def _append(key, messages, actor="test"):
        return append_messages(project, key, messages, actor)

    return _append


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"


def pytest_collection_modifyitems(config, items):
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://... (SQLite has no row locks)")
    for item in items:
        if "postgres_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def openai_stub(settings):
    """An OpenAI-compatible endpoint on 127.0.0.1 that the `openai` summarizer is pointed at."""
    stub = OpenAIStub()
    stub.start()
    settings.CTXWEB_OPENAI_BASE_URL = stub.base_url
    settings.CTXWEB_OPENAI_API_KEY = "sk-test"
    settings.CTXWEB_OPENAI_MODEL = "stub-model"
    settings.CTXWEB_OPENAI_TIMEOUT = 5.0
    yield stub
    stub.stop()
