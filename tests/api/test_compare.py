"""GET /api/v1/compare?a=KEY&b=KEY: two conversations aligned turn by turn (sessions/context/compare.py),
on two real tau-bench runs of one task from tests/data (task 6: run 6 earned reward 1, run 56 reward 0)."""

import json
from pathlib import Path

import pytest

from sessions.context.compare import align, compare_sessions
from sessions.ingest.append import append_messages
from sessions.ingest.importers import import_file
from sessions.models import Message, Session
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

TAU_BENCH = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "openai-chat" / "tau-bench-gpt-4o-airline.json"
GOOD, BAD = "tau-bench-gpt-4o-airline:6", "tau-bench-gpt-4o-airline:56"


@pytest.fixture
def runs(project):
    report = import_file(project, TAU_BENCH)
    assert report.error is None
    return Session.objects.get(project=project, key=GOOD), Session.objects.get(project=project, key=BAD)


@pytest.fixture
def keys(project):
    """Two small sessions under the keys of the two runs, for the errors (importing the runs takes 5 s)."""
    for key in (GOOD, BAD):
        append_messages(project, key, [{"role": "user", "content": f"Run {key}"}], "test")


def test_two_runs_of_one_task_line_up_until_they_diverge(api, runs):
    good, bad = runs
    body = api.get("/compare", query={"a": GOOD, "b": BAD}).json()

    runs_json = json.loads(TAU_BENCH.read_text())
    assert (runs_json[6]["task_id"], runs_json[56]["task_id"]) == (6, 6)
    assert body["a"]["key"] == GOOD and body["b"]["key"] == BAD
    assert body["a"]["metadata"]["reward"] == 1.0 and body["b"]["metadata"]["reward"] == 0.0
    assert body["a"]["messages"] == good.message_count and body["b"]["messages"] == bad.message_count
    rows = body["rows"]
    # Every message of each side is on exactly one row, in order.
    assert [r["a"]["seq"] for r in rows if r["a"]] == list(range(1, good.message_count + 1))
    assert [r["b"]["seq"] for r in rows if r["b"]] == list(range(1, bad.message_count + 1))
    first = body["diverged_at"]
    assert first is not None and first > 0
    # The rows before the divergence are the same messages on both sides: the system prompt, the task.
    for row in rows[:first]:
        assert row["same"] and row["a"]["role"] == row["b"]["role"] and row["a"]["text"] == row["b"]["text"]
    assert rows[0]["a"]["role"] == "system"
    assert not rows[first]["same"]
    assert any(row["same"] for row in rows[first + 1:]) or len(rows) == first + 1


def test_words_that_differ_are_marked_in_a_changed_pair():
    a = Message(seq=1, role="assistant", text="Your flight HAT069 leaves at 09:00.", tool_calls=[])
    b = Message(seq=1, role="assistant", text="Your flight HAT121 leaves at 13:30.", tool_calls=[])
    same = Message(seq=2, role="user", text="Thanks.", tool_calls=[])
    rows = align([a, same], [b, same])
    assert [r.same for r in rows] == [False, True]
    changed = rows[0]
    assert [a.text[s:e] for s, e in changed.a_marks] == ["HAT069", "09:00"]
    assert [b.text[s:e] for s, e in changed.b_marks] == ["HAT121", "13:30"]


def test_a_tool_call_only_one_side_made_stands_alone():
    user = Message(seq=1, role="user", text="Book it.", tool_calls=[])
    call = Message(seq=2, role="assistant", text="", tool_calls=[{"id": "c1", "name": "book", "arguments": '{"f": 1}'}])
    done = Message(seq=3, role="assistant", text="Done.", tool_calls=[])
    done_there = Message(seq=2, role="assistant", text="Done.", tool_calls=[])
    rows = align([user, call, done], [user, done_there])
    assert [(r.a.seq if r.a else None, r.b.seq if r.b else None, r.same) for r in rows] == [
        (1, 1, True), (2, None, False), (3, 2, True)]


def test_a_session_compared_with_itself_is_the_same_throughout(api, runs):
    body = api.get("/compare", query={"a": GOOD, "b": GOOD}).json()
    assert body["diverged_at"] is None and all(r["same"] for r in body["rows"])
    assert compare_sessions(runs[0], runs[0]).same_count == runs[0].message_count


@pytest.mark.parametrize(("query", "status", "code"), [
    ({"a": GOOD}, 422, None),
    ({"a": GOOD, "b": "no-such-session"}, 404, "session_not_found"),
    ({"a": "", "b": GOOD}, 422, None),
])
def test_bad_requests_get_a_clear_error(api, keys, query, status, code):
    response = api.get("/compare", query=query)
    assert response.status_code == status, response.content
    if code:
        assert_error(response, status, code)


def test_another_projects_key_cannot_compare_these_sessions(other_api, keys):
    response = other_api.get("/compare", query={"a": GOOD, "b": BAD})
    assert response.status_code == 404
