"""Appending a batch to the raw log: its rules, each accepted and rejected."""

import base64
import json
from datetime import UTC, datetime

import pytest

from sessions.errors import Conflict, DomainError, TooLarge
from sessions.models import Event, EventType, Message, Session
from tests.counting import REPLY_PRIMING, message_tokens

CALL = {"id": "call_1", "name": "lookup", "arguments": '{"q": "weather"}'}
PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
PNG_DATA_URL = "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()


def stored(key="s1"):
    return list(Message.objects.filter(session__key=key).order_by("seq"))


def rejected(append, messages, key="s1") -> DomainError:
    with pytest.raises(DomainError) as info:
        append(key, messages)
    return info.value


def assert_rejected_and_nothing_stored(append, messages, code, status=422, key="fresh"):
    """The batch is refused with `code`, and a session that did not exist is not created."""
    error = rejected(append, messages, key=key)
    assert (error.code, error.status) == (code, status)
    assert not Session.objects.filter(key=key).exists()
    assert not Message.objects.filter(session__key=key).exists()
    return error


# --- roles ---------------------------------------------------------------------------------------


def test_it_stores_a_message_of_every_role(append):
    result = append(
        "s1",
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "agent", "content": "Continue."},
        ],
    )
    assert result.session_created
    assert [m.status for m in result.messages] == ["stored"] * 5
    assert [(m.seq, m.role) for m in stored()] == [
        (1, "system"), (2, "user"), (3, "assistant"), (4, "tool"), (5, "agent"),
    ]


@pytest.mark.parametrize("role", ["developer", "function", "USER", "", None])
def test_it_rejects_an_unknown_role(append, role):
    assert_rejected_and_nothing_stored(append, [{"role": role, "content": "x"}], "invalid_role")


def test_it_rejects_a_message_without_a_role(append):
    assert_rejected_and_nothing_stored(append, [{"content": "x"}], "invalid_role")


def test_it_rejects_a_message_that_is_not_an_object(append):
    assert_rejected_and_nothing_stored(append, ["hello"], "invalid_message")


# --- fields that belong to one role --------------------------------------------------------------


@pytest.mark.parametrize("role", ["user", "system", "agent"])
def test_it_rejects_tool_calls_on_a_message_that_is_not_from_the_assistant(append, role):
    message = {"role": role, "content": "x", "tool_calls": [CALL]}
    assert_rejected_and_nothing_stored(append, [message], "field_not_allowed")


def test_it_rejects_tool_calls_on_a_tool_message(append):
    batch = [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "x", "tool_calls": [{**CALL, "id": "call_2"}]},
    ]
    assert_rejected_and_nothing_stored(append, batch, "field_not_allowed")


@pytest.mark.parametrize("role", ["user", "system", "agent"])
def test_it_rejects_reasoning_on_a_message_that_is_not_from_the_assistant(append, role):
    message = {"role": role, "content": "x", "reasoning": "thinking..."}
    assert_rejected_and_nothing_stored(append, [message], "field_not_allowed")


def test_it_stores_reasoning_on_an_assistant_message(append):
    append("s1", [{"role": "assistant", "content": "42", "reasoning": "6 times 7"}])
    assert stored()[0].reasoning == "6 times 7"


@pytest.mark.parametrize("role", ["user", "assistant", "system", "agent"])
def test_it_rejects_tool_call_id_on_a_message_that_is_not_a_tool_result(append, role):
    message = {"role": role, "content": "x", "tool_call_id": "call_1"}
    assert_rejected_and_nothing_stored(append, [message], "field_not_allowed")


@pytest.mark.parametrize("tool_call_id", [None, ""])
def test_it_requires_tool_call_id_on_a_tool_message(append, tool_call_id):
    batch = [{"role": "assistant", "content": None, "tool_calls": [CALL]}, {"role": "tool", "content": "x"}]
    if tool_call_id is not None:
        batch[1]["tool_call_id"] = tool_call_id
    assert_rejected_and_nothing_stored(append, batch, "missing_tool_call_id")


@pytest.mark.parametrize("content", [None, "", "absent"])
def test_it_accepts_an_assistant_message_with_tool_calls_and_no_content(append, content):
    message = {"role": "assistant", "tool_calls": [CALL]}
    if content != "absent":
        message["content"] = content
    append("s1", [message])
    [row] = stored()
    assert row.tool_calls == [CALL]
    assert row.text == ""


@pytest.mark.parametrize("role", ["user", "assistant", "agent", "tool"])
def test_it_rejects_null_content_without_tool_calls(append, role):
    batch = [{"role": role, "content": None}]
    if role == "tool":
        batch = [{"role": "assistant", "content": None, "tool_calls": [CALL]}, {**batch[0], "tool_call_id": "call_1"}]
    assert_rejected_and_nothing_stored(append, batch, "invalid_content")


def test_it_rejects_a_user_message_without_content(append):
    assert_rejected_and_nothing_stored(append, [{"role": "user"}], "invalid_content")


# --- tool calls ----------------------------------------------------------------------------------


def test_it_accepts_openai_nested_tool_calls_and_stores_them_flat(append):
    nested = {"id": "call_9", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}
    append("s1", [{"role": "assistant", "content": "", "tool_calls": [nested]}])
    assert stored()[0].tool_calls == [{"id": "call_9", "name": "search", "arguments": '{"q":"x"}'}]


def test_it_stores_json_object_arguments_as_their_json_text(append):
    arguments = {"city": "Zürich", "days": [1, 2]}
    append("s1", [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "f", "arguments": arguments}]}])
    [call] = stored()[0].tool_calls
    assert isinstance(call["arguments"], str)
    assert json.loads(call["arguments"]) == arguments


@pytest.mark.parametrize(
    "tool_calls",
    [
        "not a list",
        ["not an object"],
        [{"name": "f", "arguments": "{}"}],  # no id
        [{"id": "c", "arguments": "{}"}],  # no name
        [{"id": "c", "name": "f", "arguments": 5}],
        [{"id": "c", "name": "f", "arguments": "{}", "extra": 1}],
        [{"id": "c", "type": "code_interpreter", "function": {"name": "f", "arguments": "{}"}}],
        [{"id": "c", "name": "f"}, {"id": "c", "name": "g"}],  # the same id twice in one message
    ],
)
def test_it_rejects_malformed_tool_calls(append, tool_calls):
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    assert_rejected_and_nothing_stored(append, [message], "invalid_tool_calls")


# --- content parts -------------------------------------------------------------------------------


def test_it_stores_text_and_image_parts(append):
    content = [
        {"type": "text", "text": "What is in these pictures?"},
        {"type": "image", "url": "https://example.com/cat.png", "width": 640, "height": 480, "detail": "high"},
        {"type": "image", "url": PNG_DATA_URL, "media_type": "image/png"},
    ]
    append("s1", [{"role": "user", "content": content}])
    [row] = stored()
    assert row.content == content
    assert row.text == "What is in these pictures?"


def test_it_accepts_an_openai_image_url_part_as_an_image(append):
    part = {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg", "detail": "low"}}
    append("s1", [{"role": "user", "content": [part]}])
    assert stored()[0].content == [{"type": "image", "url": "https://example.com/a.jpg", "detail": "low"}]


@pytest.mark.parametrize(
    "part",
    [
        {"type": "audio", "url": "https://example.com/a.mp3"},
        {"type": "text"},
        {"type": "text", "text": 5},
        {"text": "no type"},
        "just a string",
    ],
    ids=["unknown type", "text part without text", "text part with a number", "no type", "not an object"],
)
def test_it_rejects_a_bad_content_part(append, part):
    assert_rejected_and_nothing_stored(append, [{"role": "user", "content": [part]}], "invalid_content")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/a.png",
        "example.com/a.png",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "",
        "data:image/png;base64,***not base64***",
        "data:image/png;base64",
    ],
)
def test_it_rejects_an_image_with_a_bad_url(append, url):
    message = {"role": "user", "content": [{"type": "image", "url": url}]}
    assert_rejected_and_nothing_stored(append, [message], "invalid_content")


def test_it_rejects_an_image_without_a_url(append):
    message = {"role": "user", "content": [{"type": "image", "width": 10, "height": 10}]}
    assert_rejected_and_nothing_stored(append, [message], "invalid_content")


def test_it_rejects_an_image_over_the_size_limit_with_413(append, settings):
    settings.CTXWEB_MAX_IMAGE_BYTES = 1000
    url = "data:image/png;base64," + base64.b64encode(b"x" * 1500).decode()
    message = {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "url": url}]}
    error = assert_rejected_and_nothing_stored(append, [message], "image_too_large", status=413)
    assert isinstance(error, TooLarge)


def test_it_accepts_an_image_under_the_size_limit(append, settings):
    settings.CTXWEB_MAX_IMAGE_BYTES = 1000
    url = "data:image/png;base64," + base64.b64encode(b"x" * 900).decode()
    append("s1", [{"role": "user", "content": [{"type": "image", "url": url}]}])
    assert stored()[0].content[0]["url"] == url


def test_it_rejects_an_unknown_top_level_field(append):
    message = {"role": "user", "content": "hi", "user_id": "u-17"}
    error = assert_rejected_and_nothing_stored(append, [message], "unknown_field")
    assert "user_id" in error.detail


def test_it_keeps_application_data_in_attributes(append):
    append("s1", [{"role": "user", "content": "hi", "attributes": {"user_id": "u-17", "trace": [1, 2]}}])
    assert stored()[0].attributes == {"user_id": "u-17", "trace": [1, 2]}


def test_it_keeps_the_clients_created_at_when_importing_history(append):
    append("s1", [{"role": "user", "content": "old", "created_at": "2024-03-01T12:30:00Z"}])
    assert stored()[0].created_at == datetime(2024, 3, 1, 12, 30, tzinfo=UTC)


# --- pairing tool results with their calls -------------------------------------------------------


def test_it_pairs_a_tool_result_with_a_call_of_an_earlier_batch(append):
    append("s1", [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]}])
    append("s1", [{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])
    assert stored()[2].call_seq == 2


def test_it_pairs_a_tool_result_with_a_call_earlier_in_the_same_batch(append):
    append(
        "s1",
        [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
            {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
    )
    assert [m.call_seq for m in stored()] == [None, None, 2, 2]


def test_a_reused_tool_call_id_pairs_with_the_nearest_preceding_call(append):
    call = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
    append("s1", [{"role": "user", "content": "a"}, call, result, {"role": "user", "content": "b"}, call, result])
    append("s1", [{"role": "user", "content": "c"}, call])
    append("s1", [result])
    rows = stored()
    assert [(m.seq, m.call_seq) for m in rows if m.role == "tool"] == [(3, 2), (6, 5), (9, 8)]
    assert sum("call_1" in m.call_ids for m in rows if m.role == "assistant") == 3


def test_it_rejects_an_unknown_tool_call_id_and_stores_nothing(append):
    append("s1", [{"role": "assistant", "content": None, "tool_calls": [CALL]}])
    error = rejected(
        append,
        [{"role": "user", "content": "stored only if all is well"}, {"role": "tool", "tool_call_id": "call_x", "content": "?"}],
    )
    assert (error.code, error.status) == ("unknown_tool_call_id", 422)
    assert len(stored()) == 1
    assert Session.objects.get(key="s1").message_count == 1


def test_it_rejects_an_unknown_tool_call_id_in_a_new_session_without_creating_it(append):
    batch = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_1", "content": "?"}]
    assert_rejected_and_nothing_stored(append, batch, "unknown_tool_call_id")


def test_it_rejects_a_tool_result_that_comes_before_its_call(append):
    batch = [
        {"role": "tool", "tool_call_id": "call_1", "content": "too early"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
    ]
    assert_rejected_and_nothing_stored(append, batch, "unknown_tool_call_id")


def test_a_call_in_another_session_does_not_count(append):
    append("other", [{"role": "assistant", "content": None, "tool_calls": [CALL]}])
    assert_rejected_and_nothing_stored(
        append, [{"role": "tool", "tool_call_id": "call_1", "content": "?"}], "unknown_tool_call_id"
    )


# --- client ids ----------------------------------------------------------------------------------


def test_it_makes_an_id_when_the_client_gives_none(append):
    result = append("s1", [{"role": "user", "content": "a"}, {"role": "user", "content": "a"}])
    ids = [m.client_id for m in stored()]
    assert all(ids) and len(set(ids)) == 2
    assert [m.client_id for m in result.messages] == ids


def test_it_reports_a_resent_id_as_a_duplicate_with_the_stored_seq(append):
    append("s1", [{"role": "user", "content": "a", "id": "m1"}, {"role": "user", "content": "b", "id": "m2"}])
    result = append("s1", [{"role": "user", "content": "b", "id": "m2"}])
    [message] = result.messages
    assert (message.status, message.seq, message.client_id) == ("duplicate", 2, "m2")
    assert message.duplicate and not message.stored
    assert len(stored()) == 2


def test_retrying_a_whole_batch_stores_nothing_twice(append):
    batch = [
        {"role": "user", "content": "weather?", "id": "u1"},
        {"role": "assistant", "content": None, "tool_calls": [CALL], "id": "a1"},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "id": "t1"},
        {"role": "assistant", "content": "It is sunny.", "id": "a2"},
    ]
    first = append("s1", batch)
    session = Session.objects.get(key="s1")
    retry = append("s1", batch)

    assert [m.status for m in retry.messages] == ["duplicate"] * 4
    assert [m.seq for m in retry.messages] == [m.seq for m in first.messages] == [1, 2, 3, 4]
    assert [m.tokens for m in retry.messages] == [m.tokens for m in first.messages]
    assert len(stored()) == 4
    after = Session.objects.get(key="s1")
    assert (after.message_count, after.raw_tokens, after.input_tokens) == (
        session.message_count, session.raw_tokens, session.input_tokens,
    )


def test_a_retry_with_new_messages_stores_only_the_new_ones(append):
    append("s1", [{"role": "user", "content": "a", "id": "m1"}, {"role": "assistant", "content": "b", "id": "m2"}])
    result = append(
        "s1",
        [
            {"role": "user", "content": "a", "id": "m1"},
            {"role": "assistant", "content": "b", "id": "m2"},
            {"role": "user", "content": "c", "id": "m3"},
        ],
    )
    assert [(m.status, m.seq) for m in result.messages] == [("duplicate", 1), ("duplicate", 2), ("stored", 3)]
    assert [m.client_id for m in stored()] == ["m1", "m2", "m3"]


def test_the_same_id_with_different_content_is_a_409_and_stores_nothing(append):
    append("s1", [{"role": "user", "content": "original", "id": "m1"}])
    error = rejected(append, [{"role": "user", "content": "new"}, {"role": "user", "content": "changed", "id": "m1"}])
    assert isinstance(error, Conflict)
    assert (error.code, error.status) == ("id_conflict", 409)
    assert [(m.seq, m.text) for m in stored()] == [(1, "original")]


@pytest.mark.parametrize(
    "change",
    [
        {"role": "assistant"},
        {"name": "bob"},
        {"content": [{"type": "text", "text": "original"}, {"type": "text", "text": "more"}]},
    ],
)
def test_any_change_to_what_the_model_sees_under_the_same_id_is_a_conflict(append, change):
    append("s1", [{"role": "user", "content": "original", "id": "m1"}])
    error = rejected(append, [{"role": "user", "content": "original", "id": "m1", **change}])
    assert (error.code, error.status) == ("id_conflict", 409)
    assert len(stored()) == 1


def test_the_same_id_twice_in_one_batch_is_stored_once(append):
    message = {"role": "user", "content": "hello", "id": "m1"}
    result = append("s1", [message, {"role": "assistant", "content": "hi"}, message])
    assert [(m.status, m.seq) for m in result.messages] == [("stored", 1), ("stored", 2), ("duplicate", 1)]
    assert [m.client_id for m in stored()][0] == "m1"
    assert len(stored()) == 2
    assert Session.objects.get(key="s1").message_count == 2


def test_the_same_id_twice_in_one_batch_with_different_content_is_a_conflict(append):
    batch = [{"role": "user", "content": "one", "id": "m1"}, {"role": "user", "content": "two", "id": "m1"}]
    assert_rejected_and_nothing_stored(append, batch, "id_conflict", status=409)


# --- batches -------------------------------------------------------------------------------------


def test_it_rejects_an_empty_batch(append):
    assert_rejected_and_nothing_stored(append, [], "empty_batch")


@pytest.mark.parametrize("batch", [None, {"role": "user", "content": "hi"}, "hi"])
def test_it_rejects_a_batch_that_is_not_a_list(append, batch):
    assert_rejected_and_nothing_stored(append, batch, "invalid_batch")


def test_it_rejects_a_batch_over_the_limit(append, settings):
    settings.CTXWEB_MAX_BATCH_MESSAGES = 3
    batch = [{"role": "user", "content": str(i)} for i in range(4)]
    assert_rejected_and_nothing_stored(append, batch, "batch_too_large")


def test_it_accepts_a_batch_at_the_limit(append, settings):
    settings.CTXWEB_MAX_BATCH_MESSAGES = 3
    append("s1", [{"role": "user", "content": str(i)} for i in range(3)])
    assert len(stored()) == 3


def test_one_bad_message_rejects_the_whole_batch(append):
    append("s1", [{"role": "user", "content": "first"}])
    batch = [{"role": "user", "content": "fine"}, {"role": "assistant", "content": "fine"}, {"role": "robot", "content": "x"}]
    error = rejected(append, batch)
    assert error.code == "invalid_role"
    assert error.extra.get("index") == 2
    assert len(stored()) == 1


def test_an_unpersisted_message_is_not_stored(append):
    result = append("s1", [{"role": "user", "content": "keep"}, {"role": "user", "content": "drop", "persist": False}])
    assert [(m.status, m.seq) for m in result.messages] == [("stored", 1), ("not_persisted", None)]
    assert [m.text for m in stored()] == ["keep"]


def test_seqs_are_gapless_across_batches(append):
    seqs = []
    for size in (3, 1, 5, 2):
        result = append("s1", [{"role": "user", "content": f"m{i}"} for i in range(size)])
        seqs += [m.seq for m in result.messages]
    assert seqs == list(range(1, 12))
    assert [m.seq for m in stored()] == list(range(1, 12))


def test_seqs_stay_gapless_after_a_rejected_batch(append):
    append("s1", [{"role": "user", "content": "a"}])
    rejected(append, [{"role": "user", "content": "b"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    result = append("s1", [{"role": "user", "content": "c"}])
    assert result.messages[0].seq == 2
    assert [m.seq for m in stored()] == [1, 2]


def test_seqs_are_per_session(append):
    append("s1", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    result = append("s2", [{"role": "user", "content": "c"}])
    assert result.messages[0].seq == 1


# --- session figures and events ------------------------------------------------------------------


def test_it_keeps_the_session_counters_right(append):
    append(
        "s1",
        [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 degrees"},
        ],
    )
    append(
        "s1",
        [
            {"role": "system", "content": "stored system prompt"},
            {"role": "user", "content": "a private note", "include_in_messages": False},
            {"role": "assistant", "content": "It is sunny.", "name": "helper"},
        ],
    )
    expected = [
        message_tokens("user", "What is the weather in Paris?"),
        message_tokens("assistant", "", tool_calls=[CALL]),
        message_tokens("tool", "sunny, 24 degrees"),
        message_tokens("system", "stored system prompt"),
        message_tokens("user", "a private note"),
        message_tokens("assistant", "It is sunny.", name="helper"),
    ]
    session = Session.objects.get(key="s1")
    assert [m.tokens for m in stored()] == expected
    assert session.message_count == 6
    assert session.raw_tokens == sum(expected)
    # The stored system message and the hidden one are not part of the model input.
    assert session.input_tokens == REPLY_PRIMING + expected[0] + expected[1] + expected[2] + expected[5]


def test_it_reports_each_messages_tokens(append):
    result = append("s1", [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "Hi!"}])
    assert [m.tokens for m in result.messages] == [
        message_tokens("user", "Hello there"), message_tokens("assistant", "Hi!"),
    ]


def test_it_records_messages_appended(append):
    append("s1", [{"role": "user", "content": "a"}], actor="key-1")
    result = append("s1", [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}], actor="key-2")
    events = list(Event.objects.filter(session__key="s1").order_by("id"))
    assert [e.type for e in events] == [
        EventType.SESSION_CREATED, EventType.MESSAGES_APPENDED, EventType.MESSAGES_APPENDED,
    ]
    last = events[-1]
    assert last.actor == "key-2"
    assert last.data["count"] == 2
    assert (last.data["first_seq"], last.data["last_seq"]) == (2, 3)
    assert last.data["tokens"] == sum(m.tokens for m in result.messages)


def test_a_rejected_batch_records_no_event(append):
    append("s1", [{"role": "user", "content": "a"}])
    rejected(append, [{"role": "user", "content": "b"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert Event.objects.filter(session__key="s1", type=EventType.MESSAGES_APPENDED).count() == 1


# --- text the databases cannot store -------------------------------------------------------------

BAD_TEXT = ["nul \x00 inside", "lone surrogate \ud800 inside"]
PLACES = {
    "content": lambda bad: [{"role": "user", "content": bad}],
    "text part": lambda bad: [{"role": "user", "content": [{"type": "text", "text": bad}]}],
    "attribute value": lambda bad: [{"role": "user", "content": "x", "attributes": {"note": bad}}],
    "nested attribute value": lambda bad: [{"role": "user", "content": "x", "attributes": {"a": [{"b": bad}]}}],
    "attribute key": lambda bad: [{"role": "user", "content": "x", "attributes": {bad: 1}}],
    "reasoning": lambda bad: [{"role": "assistant", "content": "x", "reasoning": bad}],
    "name": lambda bad: [{"role": "user", "content": "x", "name": bad}],
    "id": lambda bad: [{"role": "user", "content": "x", "id": bad}],
    "tool call arguments": lambda bad: [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "f", "arguments": bad}]}
    ],
    "tool call name": lambda bad: [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": bad, "arguments": "{}"}]}
    ],
    "tool call id": lambda bad: [
        {"role": "assistant", "content": None, "tool_calls": [{"id": bad, "name": "f", "arguments": "{}"}]}
    ],
    "tool_call_id": lambda bad: [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": bad, "content": "x"},
    ],
    "image url": lambda bad: [{"role": "user", "content": [{"type": "image", "url": "https://example.com/" + bad}]}],
}


@pytest.mark.parametrize("bad", BAD_TEXT, ids=["nul", "surrogate"])
@pytest.mark.parametrize("place", PLACES)
def test_it_rejects_text_the_database_cannot_store(append, place, bad):
    error = rejected(append, PLACES[place](bad), key="fresh")
    assert 400 <= error.status < 500
    assert not Session.objects.filter(key="fresh").exists()


def test_the_fast_insert_reads_every_column_of_a_message_from_the_validated_message():
    """append's executemany writes the model's columns, each read from the NewMessage attribute of the
    same name: a field added to Message needs a value there (or the insert fails here)."""
    from sessions.wire.validation import parse_message

    new = parse_message({"role": "user", "content": "x"})
    new.seq, new.created_at = 1, None
    columns = [f.attname for f in Message._meta.concrete_fields if not f.primary_key and f.attname != "session_id"]
    assert [name for name in columns if not hasattr(new, name)] == []


def test_a_stored_message_reads_back_exactly_as_sent(append):
    sent = {
        "id": "m-1", "role": "assistant", "content": [{"type": "text", "text": "héllo"}], "reasoning": "why",
        "tool_calls": [{"id": "c1", "name": "f", "arguments": '{"a": [1, 2.5, null]}'}], "name": "bot",
        "attributes": {"trace": {"id": 7, "ok": True, "tags": ["x"]}}, "include_in_messages": False,
        "created_at": "2024-05-01T12:30:00+02:00",
    }
    append("exact", [{"role": "user", "content": "q"}, sent])
    m = Message.objects.get(session__key="exact", seq=2)
    assert (m.client_id, m.role, m.content, m.reasoning, m.name, m.attributes, m.include_in_messages) == (
        "m-1", "assistant", sent["content"], "why", "bot", sent["attributes"], False)
    assert m.tool_calls == sent["tool_calls"] and m.call_ids == ["c1"] and len(m.tool_call_tokens) == 1
    assert m.created_at.isoformat() == "2024-05-01T10:30:00+00:00"
