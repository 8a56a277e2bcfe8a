"""POST /api/v1/context-checks (issue 41, item 4): the conversation sent (in any format), or a session of
the key's project, replayed on a scratch copy; `passed` says whether every pinned and expected literal
survived; nothing is stored; bad input is a clear 4xx."""

import json
from pathlib import Path

import pytest

from sessions.ingest.append import append_messages
from sessions.models import Message, Session
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

TAU_BENCH = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "openai-chat" / "tau-bench-gpt-4o-airline.json"
TIGHT = {"max_tokens": 1500, "keep_recent_tokens": 300}


@pytest.fixture(scope="module")
def run_6() -> list[dict]:
    return json.loads(TAU_BENCH.read_text())[6]["traj"]


def test_a_real_conversation_fails_without_the_pin_and_passes_with_it(api, run_6):
    body = {"messages": run_6, "format": "openai", "expect": ["Denver"], **TIGHT}
    lost = api.post("/context-checks", json=body).json()
    assert lost["passed"] is False and lost["checkpoints"] >= 1
    [fact] = lost["facts"]
    assert (fact["literal"], fact["first_seq"], fact["lost_by"][0]) == ("Denver", 6, 1)
    kept = api.post("/context-checks", json={**body, "pinned_facts": [
        {"name": "city", "pattern": '"city": "[A-Z][a-z]+"'}]}).json()
    assert kept["passed"] is True
    assert {f["literal"] for f in kept["facts"]} == {"Denver", '"city": "Denver"'}
    assert not Session.objects.exists() and not Message.objects.exists()


def test_a_session_of_the_project_is_checked(api, project, run_6):
    append_messages(project, "run-6", run_6, "test", fmt="openai")
    body = api.post("/context-checks", json={"session": "run-6", "expect": ["Denver"], **TIGHT}).json()
    assert body["conversation"] == "run-6" and body["passed"] is False
    assert Session.objects.get(key="run-6").checkpoint_count == 0


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"session": "no-such-session"}, 404, "session_not_found"),
    ({"messages": [], "pinned_facts": [{"name": "x", "pattern": "(a"}]}, 422, "invalid_pinned_facts"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, 422, None),
    ({"messages": [], "max_tokens": 0}, 422, None),
    ({"messages": [], "expect": [""]}, 422, None),
    ({"messages": [], "colour": "red"}, 422, None),
])
def test_bad_checks_are_refused(api, body, status, code):
    assert_error(api.post("/context-checks", json=body), status, code)
    assert not Session.objects.exists()
