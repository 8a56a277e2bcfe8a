"""POST /api/v1/sessions/{key}/messages: append a batch, all or nothing."""

import base64
from datetime import datetime

import pytest

from sessions.models import Event, Message, Session
from sessions.wire.tokens import count_message
from tests.api.conftest import assert_error, session_state, stored, too_big_text
from tests.builders import assistant, user

pytestmark = pytest.mark.django_db

BATCH = [
    {"id": "q1", "role": "user", "content": "What is the weather in Lisbon?", "attributes": {"user": "u-7"}},
    {"id": "a1", "role": "assistant", "content": None, "reasoning": "I should call the weather tool.",
     "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Lisbon"}}]},
    {"id": "t1", "role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "24°C, sunny"},
    {"role": "assistant", "content": "It is 24°C and sunny."},
]


def post(api, key, messages, **kwargs):
    return api.post(f"/sessions/{key}/messages", {"messages": messages}, **kwargs)


@pytest.fixture
def chat(api):
    """A session 'chat' holding BATCH as messages 1-4."""
    assert post(api, "chat", BATCH).status_code == 200
    return "chat"


def test_it_creates_the_session_and_stores_the_batch_in_order(api, project):
    response = post(api, "chat", BATCH)

    assert response.status_code == 200
    body = response.json()
    assert body["session"] == "chat"
    assert body["session_created"] is True
    assert body["compaction"] is None
    assert [(m["index"], m["seq"], m["stored"], m["duplicate"]) for m in body["messages"]] == [
        (0, 1, True, False), (1, 2, True, False), (2, 3, True, False), (3, 4, True, False)]
    assert [m["id"] for m in body["messages"]][:3] == ["q1", "a1", "t1"]
    assert body["messages"][3]["id"], "the server makes an id when the client gives none"
    assert body["messages"][0]["tokens"] == count_message("user", BATCH[0]["content"]).total
    session = Session.objects.get(project=project, key="chat")
    messages = list(session.messages.order_by("seq"))
    assert [m.seq for m in messages] == [1, 2, 3, 4]
    assert [m.tokens for m in messages] == [m["tokens"] for m in body["messages"]]
    assert messages[1].tool_calls == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]
    assert messages[1].reasoning == "I should call the weather tool."
    assert messages[2].call_seq == 2
    assert messages[0].attributes == {"user": "u-7"}
    assert session.message_count == 4
    assert session.raw_tokens == sum(m.tokens for m in messages)
    assert list(session.events.values_list("type", flat=True)) == ["SESSION_CREATED", "MESSAGES_APPENDED"]
    appended = session.events.get(type="MESSAGES_APPENDED")
    assert appended.actor == "api:test-app"
    assert appended.data["tokens"] == session.raw_tokens
    assert {k: appended.data[k] for k in ("count", "first_seq", "last_seq", "duplicates")} == {
        "count": 4, "first_seq": 1, "last_seq": 4, "duplicates": 0}


def test_a_second_batch_continues_the_seqs_and_may_answer_an_earlier_call(api, chat):
    response = post(api, "chat", [
        {"role": "assistant", "content": "Let me check Porto too.",
         "tool_calls": [{"id": "call_2", "name": "get_weather", "arguments": '{"city": "Porto"}'}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "19°C, cloudy"},
        {"role": "tool", "tool_call_id": "call_1", "content": "late duplicate result"},
    ])

    assert response.status_code == 200
    assert response.json()["session_created"] is False
    assert [m["seq"] for m in response.json()["messages"]] == [5, 6, 7]
    assert dict(Message.objects.filter(session__key="chat", seq__in=[6, 7]).values_list("seq", "call_seq")) == {
        6: 5, 7: 2}


def test_a_tool_result_pairs_with_the_nearest_preceding_call_of_its_id(api, chat):
    post(api, "chat", [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "again"},
    ])

    assert Message.objects.get(session__key="chat", seq=6).call_seq == 5


def test_it_stores_text_and_image_parts_as_sent(api):
    pixel = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "url": "https://example.com/cat.png", "width": 512, "height": 512},
        {"type": "image", "url": pixel, "media_type": "image/png"},
    ]

    response = post(api, "pics", [{"role": "user", "content": parts}])

    assert response.status_code == 200
    # 3 + "user" + text, a 512x512 image (85 + 170), an image of unknown size (765).
    assert response.json()["messages"][0]["tokens"] == count_message("user", "What is this?").total + 255 + 765
    assert Message.objects.get(session__key="pics").content == parts


def test_a_retried_message_is_a_duplicate_and_is_stored_once(api, chat):
    before = stored()

    response = post(api, "chat", [BATCH[0], {"id": "q2", "role": "user", "content": "And Porto?"}])

    assert response.status_code == 200
    first, second = response.json()["messages"]
    assert (first["seq"], first["id"], first["stored"], first["duplicate"]) == (1, "q1", False, True)
    assert first["tokens"] == count_message("user", BATCH[0]["content"]).total
    assert (second["seq"], second["stored"], second["duplicate"]) == (5, True, False)
    assert stored()["messages"] == before["messages"] + 1
    assert Message.objects.filter(session__key="chat", client_id="q1").count() == 1


def test_a_retried_whole_batch_stores_nothing_twice(api, chat):
    before = stored()

    response = post(api, "chat", BATCH[:3])

    assert response.status_code == 200
    assert [(m["seq"], m["duplicate"]) for m in response.json()["messages"]] == [(1, True), (2, True), (3, True)]
    assert stored() == before


def test_the_same_id_twice_in_one_batch_is_stored_once(api):
    message = {"id": "same", "role": "user", "content": "hello"}

    response = post(api, "twice", [message, message])

    assert [(m["seq"], m["duplicate"]) for m in response.json()["messages"]] == [(1, False), (1, True)]
    assert Message.objects.filter(session__key="twice").count() == 1


@pytest.mark.parametrize("changed", [
    {"id": "q1", "role": "user", "content": "What is the weather in Porto?"},
    {"id": "q1", "role": "agent", "content": "What is the weather in Lisbon?"},
    {"id": "a1", "role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Porto"}}]},
], ids=["other content", "other role", "other tool call"])
def test_the_same_id_with_different_content_is_a_409_and_stores_nothing(api, chat, project, changed):
    before, state = stored(), session_state(project, "chat")

    body = assert_error(post(api, "chat", [{"id": "new", "role": "user", "content": "fine"}, changed]),
                        409, "id_conflict")

    assert body["index"] == 1
    assert body["seq"] == {"q1": 1, "a1": 2}[changed["id"]]
    assert stored() == before
    assert session_state(project, "chat") == state


def test_an_unknown_tool_call_id_is_a_422_and_stores_nothing(api, chat, project):
    before, state = stored(), session_state(project, "chat")

    body = assert_error(post(api, "chat", [
        {"role": "user", "content": "valid and first"},
        {"role": "tool", "tool_call_id": "call_never_made", "content": "?"},
    ]), 422, "unknown_tool_call_id")

    assert body["index"] == 1
    assert stored() == before
    assert session_state(project, "chat") == state


def test_a_tool_result_cannot_answer_a_call_later_in_the_batch(api):
    before = stored()

    assert_error(post(api, "order", [
        {"role": "tool", "tool_call_id": "call_9", "content": "too early"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_9", "name": "f", "arguments": "{}"}]},
    ]), 422, "unknown_tool_call_id")

    assert stored() == before


def test_a_tool_call_id_from_another_session_is_unknown(api, chat):
    assert_error(post(api, "elsewhere", [{"role": "tool", "tool_call_id": "call_1", "content": "x"}]),
                 422, "unknown_tool_call_id")
    assert not Session.objects.filter(key="elsewhere").exists()


@pytest.mark.parametrize(("messages", "code"), [
    pytest.param([], "invalid_request", id="empty batch"),
    pytest.param([{"role": "wizard", "content": "x"}], "invalid_role", id="unknown role"),
    pytest.param([{"content": "x"}], "invalid_role", id="no role"),
    pytest.param([{"role": "user", "content": "x", "colour": "red"}], "unknown_field", id="unknown field"),
    pytest.param([{"role": "user", "content": 5}], "invalid_content", id="content a number"),
    pytest.param([{"role": "user", "content": [{"type": "video", "url": "https://x"}]}], "invalid_content", id="unknown part"),
    pytest.param([{"role": "user", "content": [{"type": "image", "url": "https://x", "width": 0}]}], "invalid_content", id="image width 0"),
    pytest.param([{"role": "user", "content": "x", "include_in_messages": "maybe"}], "invalid_field", id="flag not a boolean"),
    pytest.param([{"role": "user", "content": "x", "attributes": ["a"]}], "invalid_field", id="attributes not an object"),
    pytest.param([{"role": "user", "content": "x", "id": ""}], "invalid_field", id="empty id"),
    pytest.param([{"role": "user", "content": "x", "id": "i" * 201}], "invalid_field", id="id too long"),
    pytest.param([{"role": "user", "content": "x", "created_at": "last tuesday"}], "invalid_field", id="bad created_at"),
    pytest.param([{"role": "assistant", "content": "x", "tool_calls": [{"name": "f"}]}], "invalid_tool_calls", id="tool call without id"),
    pytest.param([{"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "name": ""}]}], "invalid_tool_calls", id="tool call without name"),
    pytest.param([{"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "name": "f", "arguments": 7}]}], "invalid_tool_calls", id="tool call arguments a number"),
])
def test_it_rejects_a_malformed_batch_with_422_naming_the_problem_and_stores_nothing(api, chat, project, messages, code):
    before, state = stored(), session_state(project, "chat")

    # The body's shape is checked by the API (invalid_request); each message by the one validator
    # that the importers and the dashboard use too, with its own codes.
    assert_error(post(api, "chat", messages), 422, code)
    assert_error(post(api, "fresh", messages), 422, code)

    assert stored() == before
    assert session_state(project, "chat") == state


@pytest.mark.parametrize("message", [
    pytest.param({"role": "user", "content": "x", "tool_calls": [{"id": "c", "name": "f"}]}, id="tool calls on user"),
    pytest.param({"role": "user", "content": "x", "reasoning": "hmm"}, id="reasoning on user"),
    pytest.param({"role": "user", "content": "x", "tool_call_id": "call_1"}, id="tool_call_id on user"),
    pytest.param({"role": "tool", "content": "x"}, id="tool without tool_call_id"),
    pytest.param({"role": "user", "content": None}, id="null content on user"),
    pytest.param({"role": "user"}, id="no content"),
    pytest.param({"role": "user", "content": "nul \x00 byte"}, id="NUL in content"),
    pytest.param({"role": "user", "content": [{"type": "image", "url": "ftp://x/y.png"}]}, id="image not http"),
    pytest.param({"role": "user", "content": [{"type": "image", "url": "data:image/png;base64,@@@"}]},
                 id="image not base64"),
    pytest.param({"role": "assistant", "content": "x",
                  "tool_calls": [{"id": "c", "name": "f"}, {"id": "c", "name": "g"}]}, id="repeated call id"),
])
def test_it_rejects_a_message_breaking_the_role_rules_with_422_and_stores_nothing(api, chat, project, message):
    before, state = stored(), session_state(project, "chat")

    body = assert_error(post(api, "chat", [{"role": "user", "content": "valid"}, message]), 422)

    assert body["code"] != "internal_error"
    assert stored() == before
    assert session_state(project, "chat") == state


@pytest.mark.parametrize("created_at", ["9999-12-31T23:59:59-23:00", "0001-01-01T00:00:00+05:00"],
                         ids=["after the year 9999 in UTC", "before the year 1 in UTC"])
def test_it_rejects_a_created_at_no_database_can_store_with_422(api, chat, created_at):
    before = stored()

    assert_error(post(api, "chat", [{"role": "user", "content": "x", "created_at": created_at}]), 422)

    assert stored() == before


@pytest.mark.parametrize("created_at", ["2000-01-01T00:00:00+16:00", "2000-01-01T00:00:00-23:59"],
                         ids=["offset +16:00", "offset -23:59"])
def test_a_created_at_with_any_utc_offset_is_stored_as_that_instant_or_rejected_with_422(api, created_at):
    before = stored()

    response = post(api, "history", [{"role": "user", "content": "x", "created_at": created_at}])

    assert response.status_code in (200, 422), response.content
    if response.status_code == 422:
        assert_error(response, 422)
        assert stored() == before
    else:
        expected = datetime.fromisoformat(created_at)
        assert Message.objects.get(session__key="history").created_at == expected


def test_it_keeps_the_clients_created_at_when_importing_history(api):
    post(api, "history", [{"role": "user", "content": "old", "created_at": "2021-03-04T05:06:07.123456+02:00"}])

    assert Message.objects.get(session__key="history").created_at.isoformat() == "2021-03-04T03:06:07.123456+00:00"


def test_it_rejects_a_batch_over_the_message_limit_with_422(api, chat, settings):
    settings.CTXWEB_MAX_BATCH_MESSAGES = 3
    before = stored()

    assert_error(post(api, "chat", [{"role": "user", "content": str(n)} for n in range(4)]), 422, "batch_too_large")

    assert stored() == before
    assert post(api, "chat", [{"role": "user", "content": str(n)} for n in range(3)]).status_code == 200


def test_it_rejects_an_image_over_the_image_limit_with_413(api, chat, settings):
    settings.CTXWEB_MAX_IMAGE_BYTES = 30
    before = stored()
    image = "data:image/png;base64," + base64.b64encode(b"x" * 60).decode()

    assert_error(post(api, "chat", [{"role": "user", "content": [{"type": "image", "url": image}]}]), 413)

    assert stored() == before


def test_it_rejects_a_body_that_is_not_json_with_400(api, chat):
    before = stored()

    assert_error(api.post("/sessions/chat/messages", data='{"messages": [{"role": "user"'), 400, "invalid_json")
    assert_error(api.post("/sessions/new-one/messages", data=b"\xff\xfe", content_type="application/octet-stream"),
                 400, "invalid_json")

    assert stored() == before


def test_it_rejects_an_oversized_body_with_413_and_stores_nothing(api, chat, small_request_limit):
    before = stored()

    response = post(api, "chat", [{"role": "user", "content": too_big_text(small_request_limit)}])

    assert_error(response, 413, "request_too_large")
    assert stored() == before


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201, "%C3%A9t%C3%A9", "tab%09key"])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    before = stored()

    assert_error(post(api, key, [{"role": "user", "content": "x"}]), 422, "invalid_session_key")

    assert stored() == before


def test_a_session_key_with_a_slash_gets_a_json_error(api):
    before = stored()

    response = post(api, "slash%2Fin%2Fkey", [{"role": "user", "content": "x"}])

    assert response.status_code in (404, 422)
    assert_error(response, response.status_code)
    assert stored() == before


def test_it_rejects_a_request_without_a_valid_key_with_401(api, chat, bad_credentials):
    kwargs, code = bad_credentials
    before = stored()

    assert_error(post(api, "chat", [{"role": "user", "content": "x"}], **kwargs), 401, code)
    assert_error(post(api, "new-one", [{"role": "user", "content": "x"}], **kwargs), 401, code)

    assert stored() == before


def test_another_projects_key_appends_to_its_own_session_and_never_to_this_one(other_api, chat, project,
                                                                               other_project):
    state = session_state(project, "chat")

    response = post(other_api, "chat", [{"id": "q1", "role": "user", "content": "mine"}])

    assert response.status_code == 200
    assert response.json()["session_created"] is True
    assert response.json()["messages"][0]["seq"] == 1
    assert response.json()["messages"][0]["duplicate"] is False
    assert session_state(project, "chat") == state
    assert Session.objects.get(project=other_project, key="chat").message_count == 1


def test_another_projects_key_cannot_answer_this_projects_tool_calls(other_api, chat):
    assert_error(post(other_api, "chat", [{"role": "tool", "tool_call_id": "call_1", "content": "x"}]),
                 422, "unknown_tool_call_id")


def test_it_compacts_automatically_when_the_append_crosses_max_tokens(api):
    api.put("/sessions/auto", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 50, "auto": True}})
    first = post(api, "auto", [user(100, "Tell me about the earthquake of 1755."),
                               assistant(100, "It struck Lisbon on 1 November 1755.")])
    assert first.json()["compaction"] is None  # 203 tokens: under the threshold, nothing recorded

    response = post(api, "auto", [user(120, "And who rebuilt the city afterwards?")])

    # The run is enqueued; the instant test worker (tests/conftest.py) has done it by the answer.
    run = response.json()["compaction"]
    assert (run["status"], run["trigger"], run["attempts"]) == ("completed", "auto", 1)
    assert run["url"] == f"/api/v1/sessions/auto/compactions/{run['id']}"
    compaction = run["outcome"]
    assert compaction["status"] == "completed"
    assert compaction["checkpoint"]["last_seq"] == 2
    assert [e["type"] for e in compaction["events"]] == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]
    assert compaction["events"][0]["data"]["trigger"] == "auto"
    assert Event.objects.filter(session__key="auto", type="COMPACTION_COMPLETED").count() == 1


def test_it_does_not_compact_when_auto_is_off(api):
    api.put("/sessions/manual", {"compaction": {"max_tokens": 20, "keep_recent_tokens": 10, "auto": False}})

    response = post(api, "manual", BATCH + [{"role": "user", "content": "And Porto?"}])

    assert response.json()["compaction"] is None
    assert not Event.objects.filter(session__key="manual", type__startswith="COMPACTION_").exists()


@pytest.mark.parametrize("key", [".", "..", "%2E", "%2e%2E"])
def test_it_refuses_the_session_keys_dot_and_dot_dot_with_422(api, key):
    before = stored()

    for response in (post(api, key, [{"role": "user", "content": "x"}]), api.put(f"/sessions/{key}", {})):
        body = assert_error(response, 422, "invalid_session_key")
        assert body["detail"] == "A session key is 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or .."

    assert stored() == before


def test_keys_holding_dots_besides_those_two_are_accepted(api):
    for key in ("...", ".hidden", "a..b", "v1.2"):
        assert post(api, key, [{"role": "user", "content": "x"}]).status_code == 200, key
