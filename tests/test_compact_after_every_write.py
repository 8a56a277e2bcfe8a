"""The rule "compact automatically after a write" lives in the domain and runs after every write path
(issue 38, item 3): an API append, an import (a file read whole, a large file read as a stream), a request
built, and recorded requests (OpenTelemetry, request logs), where it never compacts because the
application builds its own context. Tests run background tasks at once (tests/conftest.py), so an
enqueued run has finished when the write returns."""

import ast
import json
from pathlib import Path

import pytest

from sessions.ingest.append import append_messages
from sessions.ingest.importers import import_data
from sessions.models import CompactionRun, Session
from tests.recorded_sessions import rebuilt_session

ROOT = Path(__file__).resolve().parent.parent
WORDS = "the order left the warehouse on Monday and should arrive by Thursday afternoon " * 6


def conversation(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are a support agent."}]
    for n in range(turns):
        messages += [{"role": "user", "content": f"Question {n}: {WORDS}"},
                     {"role": "assistant", "content": f"Answer {n}: {WORDS}"}]
    return messages


@pytest.fixture
def small_project(project):
    """A project whose sessions compact automatically past 600 tokens, keeping the last 200."""
    project.max_tokens, project.keep_recent_tokens, project.auto_compact = 600, 200, True
    project.save()
    return project


def auto_runs(session: Session) -> list[CompactionRun]:
    return list(CompactionRun.objects.filter(session=session, trigger="auto").order_by("pk"))


def test_an_imported_session_over_max_tokens_is_compacted_like_an_appended_one(small_project):
    report = import_data(small_project, "support.json", json.dumps({"messages": conversation(12)}).encode(),
                         fmt="openai", key_prefix="imported-")
    assert report.error is None and report.messages == 25, report
    session = Session.objects.get(project=small_project, key__startswith="imported-")
    runs = auto_runs(session)
    assert runs and runs[0].state == "completed", runs
    assert session.checkpoint_count >= 1
    assert session.input_tokens == runs[-1].outcome["tokens_after"] < runs[0].outcome["tokens_before"]


def test_an_import_with_automatic_compaction_off_enqueues_nothing(small_project):
    small_project.auto_compact = False
    small_project.save()
    import_data(small_project, "support.json", json.dumps({"messages": conversation(12)}).encode(), fmt="openai")
    assert not CompactionRun.objects.exists()
    assert Session.objects.get(project=small_project).checkpoint_count == 0


def test_the_chunks_of_an_import_are_not_compacted_before_the_session_is_whole(small_project, settings):
    """A file stored a chunk per transaction gets one rule applied, once its session is whole and shown."""
    settings.CTXWEB_IMPORT_CHUNK_BYTES = 2_000  # several chunks for this session
    import_data(small_project, "support.json", json.dumps({"messages": conversation(12)}).encode(), fmt="openai")
    session = Session.objects.get(project=small_project)
    runs = auto_runs(session)
    assert runs, "no automatic run after the import"
    assert runs[0].options.get("at_seq") == session.message_count  # asked for with every message stored


def test_an_api_append_reports_the_run_its_write_enqueued(small_project):
    result = append_messages(small_project, "appended", conversation(12)[1:], "test")
    assert result.compaction is not None and result.compaction.state == "completed"
    assert auto_runs(result.session) == [result.compaction]


def test_recorded_requests_are_never_compacted_by_ctxweb(small_project):
    session = rebuilt_session(small_project)
    assert session.input_tokens > 0 and session.request_count > 0
    small_project.max_tokens = 50  # far over: the application's own context still is not compacted
    small_project.save()
    session = rebuilt_session(small_project, key="rebuilt-again")
    assert not CompactionRun.objects.filter(session__in=[session]).exists()
    assert session.checkpoint_count == 0


def test_the_faces_leave_the_rule_to_the_domain():
    """Neither the API nor the dashboard decides when to compact after a write."""
    offenders = []
    for folder in ("http", "dashboard"):
        for path in (ROOT / "sessions" / folder).glob("*.py"):
            names = {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
            if names & {"compact_if_needed", "compact_after_write"}:
                offenders.append(path.name)
    assert offenders == []
