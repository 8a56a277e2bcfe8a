"""POST /api/v1/sessions/{key}/requests: build the next request. Persistable messages are
stored, unpersisted ones are only part of this request; REQUEST_BUILT records what was sent."""

import json

import pytest

from sessions.models import Event, Message, Session
from sessions.wire.tokens import count_message
from tests.api.conftest import assert_error, session_state, stored, too_big_text
from tests.builders import assistant, openai_input_problems, user

pytestmark = pytest.mark.django_db

SECRET = "Customer card number 4111-1111-1111-1111 expires 12/29"


def build(api, body, key="chat", **kwargs):
    return api.post(f"/sessions/{key}/requests", body, **kwargs)


def request_built(key="chat") -> Event:
    return Event.objects.filter(session__key=key, type="REQUEST_BUILT").get()


def test_unpersisted_messages_are_in_the_request_but_not_stored(api, conversation):
    before = stored()

    response = build(api, {"messages": [{"role": "user", "content": SECRET, "persist": False}]})

    assert response.status_code == 200
    body = response.json()
    model_input = body["model_input"]
    assert model_input["format"] == "openai"
    assert model_input["messages"][-1] == {"role": "user", "content": SECRET}
    assert len(model_input["messages"]) == 6
    assert openai_input_problems(model_input["messages"]) == []
    assert model_input["tokens"]["request"] == count_message("user", SECRET).total
    assert body["stored"] == []
    assert body["compaction"] is None
    assert Message.objects.filter(session__key="chat").count() == 5
    assert stored()["messages"] == before["messages"]
    assert stored()["events"] == before["events"] + 1  # REQUEST_BUILT only


def test_persisted_messages_are_stored_and_sent(api, conversation):
    response = build(api, {"messages": [
        {"id": "q3", "role": "user", "content": "Is it windy there?"},
        {"role": "agent", "content": SECRET, "persist": False},
    ]})

    body = response.json()
    assert [(m["index"], m["seq"], m["stored"], m["duplicate"]) for m in body["stored"]] == [
        (0, 6, True, False), (1, None, False, False)]
    assert body["stored"][0]["id"] == "q3"
    assert [m.seq for m in Message.objects.filter(session__key="chat")] == [1, 2, 3, 4, 5, 6]
    assert Message.objects.get(session__key="chat", seq=6).content == "Is it windy there?"
    assert body["model_input"]["messages"][-2:] == [
        {"role": "user", "content": "Is it windy there?"}, {"role": "user", "content": SECRET}]
    assert not Message.objects.filter(session__key="chat", text__contains="4111").exists()


def test_request_built_records_what_was_sent_without_the_unpersisted_content(api, conversation):
    response = build(api, {"messages": [
        {"role": "user", "content": "Is it windy there?"},
        {"role": "agent", "content": SECRET, "persist": False},
    ]})

    body = response.json()
    event = request_built()
    assert body["event_id"] == event.pk
    assert event.actor == "api:test-app"
    data = event.data
    assert data["checkpoint_id"] is None
    assert data["seq_range"] == [1, 6]
    assert data["stored_messages"] == 6
    assert data["tokens"] == body["model_input"]["tokens"]["total"]
    assert data["unpersisted"] == {"count": 1, "tokens": count_message("agent", SECRET).total}
    assert data["format"] == "openai"
    assert "4111" not in json.dumps(data), "the content of unpersisted messages is never recorded"


def test_instructions_in_the_request_become_the_sessions_instructions(api, conversation):
    response = build(api, {"instructions": "You are a weather assistant. Answer in one sentence."})

    messages = response.json()["model_input"]["messages"]
    assert messages[0] == {"role": "system", "content": "You are a weather assistant. Answer in one sentence."}
    session = api.get("/sessions/chat").json()
    assert session["instructions"] == "You are a weather assistant. Answer in one sentence."
    assert request_built().data["instructions_tokens"] == session["instructions_tokens"]


def test_the_format_can_be_anthropic(api, conversation):
    response = build(api, {"instructions": "Be brief.", "format": "anthropic",
                           "messages": [{"role": "user", "content": "Thanks!", "persist": False}]})

    model_input = response.json()["model_input"]
    assert model_input["format"] == "anthropic"
    assert model_input["system"] == "Be brief."
    assert model_input["messages"][-1] == {"role": "user", "content": [
        {"type": "text", "text": "And in Porto?"}, {"type": "text", "text": "Thanks!"}]}


def test_a_request_for_a_new_session_creates_it(api, project):
    response = build(api, {"messages": [{"role": "user", "content": "Hello"}]}, key="fresh")

    assert response.status_code == 200
    assert Session.objects.get(project=project, key="fresh").message_count == 1


@pytest.fixture
def near_threshold(api):
    """Auto compaction at max_tokens 300, keeping 50: two turns stored, 253 tokens of model input."""
    api.put("/sessions/near", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 50, "auto": True}})
    api.post("/sessions/near/messages", {"messages": [
        user(100, "Tell me about the earthquake of 1755."), assistant(100, "It struck Lisbon on 1 November."),
        user(50, "Who rebuilt the city?")]})
    assert api.get("/sessions/near").json()["model_input_tokens"] == 253
    return "near"


def test_it_compacts_automatically_when_the_request_crosses_max_tokens(api, near_threshold):
    response = build(api, {"messages": [assistant(60, "The Marquis of Pombal.")]}, key="near")

    body = response.json()
    assert body["compaction"]["status"] == "completed" and body["compaction_in_progress"] is False
    assert body["compaction"]["outcome"]["events"][0]["data"]["trigger"] == "auto"
    checkpoint = body["compaction"]["outcome"]["checkpoint"]
    assert checkpoint["last_seq"] == 2
    model_input = body["model_input"]
    assert model_input["checkpoint"]["id"] == checkpoint["id"]
    assert model_input["messages"][0]["content"].startswith("Summary of the earlier conversation, covering messages 1–2:")
    assert [m["role"] for m in model_input["messages"]] == ["user", "user", "assistant"]
    event = request_built("near")
    assert event.data["compaction"] == "completed"
    assert event.data["checkpoint_id"] == checkpoint["id"]
    assert event.data["seq_range"] == [3, 4]
    assert event.data["tokens"] == model_input["tokens"]["total"]


def test_unpersisted_messages_count_towards_the_threshold_and_stay_in_the_request(api, near_threshold):
    response = build(api, {"messages": [assistant(60, SECRET, persist=False)]}, key="near")

    body = response.json()
    assert body["compaction"]["status"] == "completed"
    assert body["compaction"]["outcome"]["tokens_before"] == 313
    assert body["model_input"]["messages"][-1] == {"role": "assistant", "content": body["model_input"]["messages"][-1][
        "content"]}
    assert body["model_input"]["messages"][-1]["content"].startswith(SECRET)
    assert Message.objects.filter(session__key="near").count() == 3
    assert "4111" not in json.dumps(list(Event.objects.filter(session__key="near").values_list("data", flat=True)))


def test_it_does_not_compact_at_or_under_the_threshold(api, near_threshold):
    response = build(api, {"messages": [assistant(47, "The Marquis.", persist=False)]}, key="near")

    assert response.json()["compaction"] is None
    assert response.json()["model_input"]["tokens"]["total"] == 300
    assert not Event.objects.filter(session__key="near", type__startswith="COMPACTION_").exists()


def test_it_does_not_compact_when_auto_is_off(api, near_threshold):
    api.put("/sessions/near", {"compaction": {"auto": False}})

    response = build(api, {"messages": [assistant(200, "A long answer.")]}, key="near")

    assert response.json()["compaction"] is None
    assert request_built("near").data["compaction"] is None


def test_a_retried_message_is_a_duplicate_and_is_stored_once(api, conversation):
    response = build(api, {"messages": [{"id": "m5", "role": "user", "content": "And in Porto?"}]})

    assert response.status_code == 200
    assert [(m["seq"], m["stored"], m["duplicate"]) for m in response.json()["stored"]] == [(5, False, True)]
    assert Message.objects.filter(session__key="chat").count() == 5


def test_the_same_id_with_different_content_is_a_409_and_changes_nothing(api, conversation, project):
    before, state = stored(), session_state(project, "chat")

    assert_error(build(api, {"instructions": "New instructions.", "messages": [
        {"role": "user", "content": "fine"},
        {"id": "m5", "role": "user", "content": "And in Faro?"}]}), 409, "id_conflict")

    assert stored() == before
    assert session_state(project, "chat") == state


def test_an_unknown_tool_call_id_is_a_422_and_changes_nothing(api, conversation, project):
    before, state = stored(), session_state(project, "chat")

    assert_error(build(api, {"instructions": "New instructions.", "messages": [
        {"role": "user", "content": "fine"},
        {"role": "tool", "tool_call_id": "call_unknown", "content": "?"}]}), 422, "unknown_tool_call_id")

    assert stored() == before
    assert session_state(project, "chat") == state


@pytest.mark.parametrize(("body", "code"), [
    pytest.param({"messages": [{"role": "wizard", "content": "x"}]}, "invalid_role", id="unknown role"),
    pytest.param({"messages": [{"role": "user", "content": "x", "persist": "later"}]}, "invalid_field",
                 id="persist not a boolean"),
    pytest.param({"messages": "hello"}, "invalid_request", id="messages not a list"),
    pytest.param({"format": "gemini"}, "invalid_request", id="unknown format"),
    pytest.param({"instructions": 5}, "invalid_request", id="instructions not a string"),
    pytest.param({"prompt": "x"}, "invalid_request", id="unknown field"),
])
def test_it_rejects_a_bad_body_with_422_and_changes_nothing(api, conversation, project, body, code):
    before, state = stored(), session_state(project, "chat")

    # The body's own fields are checked by the API (invalid_request); each message by the validator
    # the importers and the dashboard use too, with its codes.
    assert_error(build(api, body), 422, code)

    assert stored() == before
    assert session_state(project, "chat") == state


def test_it_rejects_a_message_breaking_the_role_rules_with_422_and_changes_nothing(api, conversation, project):
    before, state = stored(), session_state(project, "chat")

    assert_error(build(api, {"messages": [{"role": "user", "content": "x", "reasoning": "no"}]}), 422)

    assert stored() == before
    assert session_state(project, "chat") == state


def test_it_rejects_a_body_that_is_not_json_with_400(api, conversation):
    before = stored()

    assert_error(api.post("/sessions/chat/requests", data="messages=[]"), 400, "invalid_json")

    assert stored() == before


def test_it_rejects_an_oversized_body_with_413(api, conversation, small_request_limit):
    before = stored()

    response = build(api, {"messages": [{"role": "user", "content": too_big_text(small_request_limit),
                                         "persist": False}]})

    assert_error(response, 413, "request_too_large")
    assert stored() == before


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    before = stored()

    assert_error(build(api, {"messages": [{"role": "user", "content": "x"}]}, key=key), 422, "invalid_session_key")

    assert stored() == before


def test_it_rejects_a_request_without_a_valid_key_with_401(api, conversation, bad_credentials):
    kwargs, code = bad_credentials
    before = stored()

    assert_error(build(api, {"messages": [{"role": "user", "content": "x"}]}, **kwargs), 401, code)

    assert stored() == before


def test_another_projects_key_builds_from_its_own_session_only(other_api, conversation, project):
    state = session_state(project, "chat")

    response = build(other_api, {"messages": [{"role": "user", "content": "Hi", "persist": False}]})

    assert response.status_code == 200
    assert response.json()["model_input"]["messages"] == [{"role": "user", "content": "Hi"}]
    assert session_state(project, "chat") == state


def test_a_request_with_nothing_to_send_to_anthropic_is_refused_and_stores_nothing(api, project):
    api.put("/sessions/bare", {"instructions": "Be brief."})
    before, state = stored(), session_state(project, "bare")

    body = assert_error(build(api, {"instructions": "Be very brief.", "format": "anthropic"}, key="bare"),
                        409, "nothing_to_send")

    assert "Append a user message first" in body["detail"]
    assert stored() == before
    assert session_state(project, "bare") == state
    assert_error(build(api, {"instructions": "Be brief.", "format": "anthropic"}, key="new"), 409, "nothing_to_send")
    assert stored() == before  # no session made either


def test_a_request_with_only_instructions_is_sent_to_openai(api):
    response = build(api, {"instructions": "Be brief."}, key="bare")

    assert response.json()["model_input"]["messages"] == [{"role": "system", "content": "Be brief."}]


def test_calls_of_the_requests_own_messages_awaiting_results_are_pending(api, conversation):
    call = {"id": "call_2", "name": "get_weather", "arguments": '{"city": "Porto"}'}
    response = build(api, {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [call], "persist": False}]})

    model_input = response.json()["model_input"]
    assert model_input["pending_tool_calls"] == [{"seq": None, "request_index": 0, **call}]
    assert model_input["omitted"] == [{"seq": None, "reason": "awaiting_tool_result", "tool_call_id": "call_2",
                                       "request_index": 0, "whole_message": True}]
    assert model_input["messages"][-1] == {"role": "user", "content": "And in Porto?"}
    assert api.post("/tokens", {"messages": model_input["messages"]}).json()["total"] == model_input["tokens"]["total"]
