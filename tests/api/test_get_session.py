"""GET /api/v1/sessions/{key}: one session with its counts."""

import pytest

from sessions.models import Message
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db


def test_it_returns_the_session_with_its_counts(api, conversation, project):
    api.put("/sessions/chat", {"title": "Weather", "instructions": "Be brief.",
                               "compaction": {"max_tokens": 5000, "auto": False}})

    response = api.get("/sessions/chat")

    assert response.status_code == 200
    body = response.json()
    assert body["key"] == "chat"
    assert body["title"] == "Weather"
    assert body["message_count"] == 5
    assert body["raw_tokens"] == sum(Message.objects.filter(session__key="chat").values_list("tokens", flat=True))
    assert body["model_input_tokens"] == api.get("/sessions/chat/model-input").json()["tokens"]["total"]
    assert body["checkpoint_count"] == 0
    assert body["compaction"]["max_tokens"] == 5000
    assert body["compaction"]["auto"] is False
    assert set(body) >= {"created_at", "updated_at", "last_activity_at", "instructions_tokens", "metadata"}


def test_its_counts_follow_hidden_messages_and_checkpoints(api, conversation):
    before = api.get("/sessions/chat").json()
    hidden = api.patch("/sessions/chat/messages/4", {"include_in_messages": False}).json()
    api.post("/sessions/chat/compact", {"force": True, "keep_recent_tokens": 1, "summary": "Weather asked."})

    body = api.get("/sessions/chat").json()

    assert body["raw_tokens"] == before["raw_tokens"]
    assert body["checkpoint_count"] == 1
    assert body["model_input_tokens"] == api.get("/sessions/chat/model-input").json()["tokens"]["total"]
    assert body["model_input_tokens"] < before["model_input_tokens"] - hidden["tokens"]


def test_it_answers_404_for_an_unknown_session(api, conversation):
    body = assert_error(api.get("/sessions/no-such-session"), 404, "session_not_found")

    assert set(body) <= {"detail", "code"}


def test_another_projects_key_gets_404_and_no_data(other_api, conversation):
    body = assert_error(other_api.get("/sessions/chat"), 404, "session_not_found")

    assert set(body) <= {"detail", "code"}
    assert "Lisbon" not in str(body)


@pytest.mark.parametrize("path", ["/sessions/bad%20key", "/sessions/%C3%A9t%C3%A9", "/sessions/" + "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, path):
    assert_error(api.get(path), 422, "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, conversation, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(api.get("/sessions/chat", **kwargs), 401, code)

    assert "Lisbon" not in str(body)
