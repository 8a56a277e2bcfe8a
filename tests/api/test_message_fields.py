"""Every field of a message a client sends (sessions.http.schemas.MessageIn) is carried to the validated
message, stored, returned by the raw log and exported as it was sent, so an export appends back the
same message. A field added to MessageIn fails here until it is given a value below, and then fails
in the place that loses it."""

import json
from datetime import datetime

import pytest

from sessions.http.schemas import INPUT_ONLY, STORED_AS, MessageIn
from sessions.models import Message
from sessions.wire.validation import parse_messages

pytestmark = pytest.mark.django_db

# A value other than its default for every field of MessageIn but the input-only ones, over two
# messages: which role may carry which field is a rule (sessions.wire.validation).
SENT = [
    {"id": "ask-1", "role": "assistant", "content": "Looking it up.", "reasoning": "The order id is known.",
     "tool_calls": [{"id": "call-1", "name": "lookup_order", "arguments": '{"order": "A-17"}'}], "name": "support-bot",
     "attributes": {"trace": "t-42"}, "include_in_messages": False, "created_at": "2024-05-01T10:30:00+00:00"},
    {"id": "result-1", "role": "tool", "tool_call_id": "call-1", "content": [{"type": "text", "text": "not found"}],
     "is_error": True, "created_at": "2024-05-01T10:30:01+00:00"},
]
# Where the stored message and the validated one keep a field under another name.
KEPT_AS = {"id": "client_id"}


def as_sent(value):
    return value.isoformat() if isinstance(value, datetime) else value


def kept(message, fields) -> dict:
    """The fields of a stored or validated message, as a client sends them."""
    return {name: as_sent(getattr(message, KEPT_AS.get(name, name), "<missing>")) for name in fields}


def read_time(message: dict) -> dict:
    """The API writes UTC as Z; the exports and the sample as +00:00."""
    return {**message, "created_at": datetime.fromisoformat(message["created_at"])}


def test_the_sample_gives_every_field_a_client_may_send_a_value_other_than_its_default():
    fields = MessageIn.model_fields
    given = {name for message in SENT for name in message}
    assert set(fields) - set(INPUT_ONLY) - given == set(), "give the new field a value in SENT"
    assert [(name, value) for message in SENT for name, value in message.items() if value == fields[name].default] == []


def test_a_field_stored_as_sent_has_the_same_default_in_the_model_as_in_the_schema():
    """What the model stores when a client leaves the field out is what MessageIn says it is (never null:
    the raw log and the exports return it as stored)."""
    as_is = [name for name in MessageIn.model_fields if name not in STORED_AS and name not in INPUT_ONLY]
    assert as_is, "role, is_error, include_in_messages..."
    for name in as_is:
        column, field = Message._meta.get_field(name), MessageIn.model_fields[name]
        assert not column.null
        if field.is_required():
            assert not column.has_default(), name
        else:
            assert column.get_default() == field.get_default(call_default_factory=True), name


def test_every_field_sent_is_validated_stored_returned_and_exported_as_sent(api):
    validated = parse_messages(SENT)
    assert api.post("/sessions/fields/messages", {"messages": SENT}).status_code == 200
    stored = list(Message.objects.filter(session__key="fields").order_by("seq"))
    returned = api.get("/sessions/fields/messages").json()["items"]
    export = json.loads(b"".join(api.get("/sessions/fields/export").streaming_content))
    lines = [json.loads(line) for line in b"".join(
        api.get("/sessions/fields/export", query={"format": "jsonl"}).streaming_content).splitlines()]

    for i, sent in enumerate(SENT):
        assert kept(validated[i], sent) == sent, "sessions.wire.validation.new_message (NewMessage)"
        assert kept(stored[i], sent) == sent, "the Message model (sessions.db.messages.insert_messages)"
        in_raw_log = {name: returned[i].get(name, "<missing>") for name in sent}
        assert read_time(in_raw_log) == read_time(sent), "the raw log (MessageOut)"
        assert export["messages"][i] == sent, "the JSON export (MessageRecord)"
        assert lines[1 + i] == {"type": "message", "seq": i + 1, **sent}, "the JSON Lines export"
