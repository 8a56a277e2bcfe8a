"""The `openai` model input written from what was stored with each part of it (sessions.context.provider_input.
stored_openai_response): every message's rendering (Message.openai_message) and the session's figures of
its input. It must be the model input built in full (on every real transcript, after compactions, after
a flag changed: tests/api/test_model_input.py, which imports them); and where the stored parts cannot say it all (a call awaiting its result, a message sent
without some of its calls, a message stored without its rendering), the full build answers instead."""

import json
from types import SimpleNamespace

import orjson
import pytest
from django.apps import apps
from django.db import connection

from sessions.context.compaction_runs import compact
from sessions.context.model_input import build_model_input, latest_checkpoint
from sessions.context.provider_input import NothingToSend, model_input_response, stored_openai_response
from sessions.http.schemas import ModelInputOut
from sessions.ingest.message_edits import update_message
from sessions.ingest.session_store import update_session
from sessions.models import Message, Session
from sessions.wire.openai import openai_message

pytestmark = pytest.mark.django_db


def as_json(body: dict) -> dict:
    """A response body as a client reads it (the messages of the stored path are JSON text)."""
    messages = body["messages"]
    messages = orjson.loads(orjson.dumps(messages)) if isinstance(messages, orjson.Fragment) else messages
    return {**ModelInputOut.model_validate({**body, "messages": []}).model_dump(mode="json"), "messages": messages}


def built_in_full(session: Session) -> dict:
    return as_json(model_input_response(build_model_input(session), "openai"))


def from_stored(session: Session) -> dict | None:
    session = Session.objects.select_related("project").get(pk=session.pk)  # its figures as stored
    body = stored_openai_response(session, latest_checkpoint(session))
    return None if body is None else as_json(body)


def compare(sessions) -> tuple[int, list[str]]:
    """How many sessions the stored parts answered for, and those where they differ from the full build."""
    answered, different = 0, []
    for session in sessions:
        try:
            expected = built_in_full(session)
        except NothingToSend:
            with pytest.raises(NothingToSend):
                from_stored(session)
            continue
        actual = from_stored(session)
        if actual is None:
            continue
        answered += 1
        if actual != expected:
            different.append(session.key)
    return answered, different


def test_a_call_awaiting_its_result_is_built_in_full(append):
    append("s", [{"role": "user", "content": "weather?"},
                 {"role": "assistant", "content": "Looking.", "tool_calls": [
                     {"id": "c1", "name": "weather", "arguments": "{}"}]}])
    session = Session.objects.get(key="s")

    assert from_stored(session) is None
    full = built_in_full(session)
    assert full["pending_tool_calls"][0]["id"] == "c1"
    assert full["messages"][-1] == {"role": "assistant", "content": "Looking."}


def test_a_message_sent_without_one_of_its_calls_is_built_in_full(append):
    append("s", [{"role": "user", "content": "two things"},
                 {"role": "assistant", "content": "On it.", "tool_calls": [
                     {"id": "c1", "name": "a", "arguments": "{}"}, {"id": "c2", "name": "b", "arguments": "{}"}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "done"},
                 {"role": "user", "content": "and now?"}])
    session = Session.objects.get(key="s")

    assert from_stored(session) is None  # c2 has no result: its message is sent without it
    assert [c["id"] for c in built_in_full(session)["messages"][1]["tool_calls"]] == ["c1"]


def test_a_message_left_out_whole_is_left_out_from_the_stored_parts_too(append):
    append("s", [{"role": "user", "content": "go"},
                 {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "a", "arguments": "{}"}]},
                 {"role": "user", "content": "never mind"}])
    session = Session.objects.get(key="s")

    body = from_stored(session)
    assert body == built_in_full(session)
    assert [m["content"] for m in body["messages"]] == ["go", "never mind"]
    assert body["omitted"] == [{"seq": 2, "reason": "dropped_tool_call", "tool_call_id": "c1", "request_index": None,
                               "whole_message": True}]


def test_a_message_stored_without_its_rendering_is_built_in_full(append):
    append("s", [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
    session = Session.objects.get(key="s")
    assert from_stored(session) == built_in_full(session)
    Message.objects.filter(session=session, seq=2).update(openai_message=None)

    assert from_stored(session) is None


def session_then(append, change) -> tuple[Session, Session]:
    """The session as a request read it, and as it is after `change` (another request's, committed in
    between): the stored parts must not write the new messages with the old figures."""
    append("s", [{"role": "user", "content": "hello " * 50}, {"role": "assistant", "content": "hi " * 50},
                 {"role": "user", "content": "more " * 50}, {"role": "assistant", "content": "yes " * 50},
                 {"role": "user", "content": "and?"}])
    as_read = Session.objects.select_related("project").get(key="s")
    assert stored_openai_response(as_read, latest_checkpoint(as_read)) is not None
    change(as_read)
    return as_read, Session.objects.select_related("project").get(key="s")


@pytest.mark.parametrize("change", ["append", "call awaiting its result", "flag", "checkpoint", "instructions"])
def test_a_session_changed_after_the_request_read_it_is_built_in_full(append, project, change):
    changes = {
        "append": lambda s: append("s", [{"role": "assistant", "content": "sure"}]),
        "call awaiting its result": lambda s: append("s", [{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c9", "name": "f", "arguments": "{}"}]}]),
        "flag": lambda s: update_message(project, "s", 2, {"include_in_messages": False}, "test"),
        "checkpoint": lambda s: compact(s, force=True, max_tokens=100, keep_recent_tokens=10, summary="earlier"),
        "instructions": lambda s: update_session(project, "s", {"instructions": "Be brief."}, "test"),
    }
    as_read, now = session_then(append, changes[change])
    assert (now.message_count, now.checkpoint_count, now.updated_at) != (
        as_read.message_count, as_read.checkpoint_count, as_read.updated_at)

    assert stored_openai_response(as_read, latest_checkpoint(as_read)) is None
    assert from_stored(now) in (None, built_in_full(now))  # as read again, the stored parts agree


def test_an_empty_input_is_refused_as_in_full(append):
    append("s", [{"role": "system", "content": "only instructions as a message"}])
    session = Session.objects.get(key="s")
    Session.objects.filter(pk=session.pk).update(instructions="", instructions_tokens=0)

    with pytest.raises(NothingToSend):
        from_stored(session)
    with pytest.raises(NothingToSend):
        built_in_full(Session.objects.get(pk=session.pk))


def test_an_append_stores_each_message_as_the_openai_input_sends_it(append):
    append("s", [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                     {"type": "image", "url": "https://example.com/cat.png"}], "name": "Bob Smith"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "look", "arguments": "{\"x\": 1}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a cat"},
        {"role": "agent", "content": "continue"},
    ])
    stored = dict(Message.objects.filter(session__key="s").values_list("seq", "openai_message"))
    sent = built_in_full(Session.objects.get(key="s"))["messages"]

    assert stored[1] is None  # a system message is never in the input: its rendering is not stored
    assert [json.loads(stored[seq]) for seq in (2, 3, 4, 5)] == sent


# The rendering of each kind of stored message, pinned: stored renderings outlive the code that wrote them,
# so a change here must come with a migration that renders them again (sessions.wire.openai.stored_openai_message).
PINNED = [
    (("user", "hi", [], "", ""), '{"role":"user","content":"hi"}'),
    (("user", "hi", [], "", "Bob Smith"), '{"role":"user","content":"hi","name":"Bob_Smith"}'),
    (("agent", "go on", [], "", ""), '{"role":"user","content":"go on"}'),
    (("user", [{"type": "text", "text": "see"}, {"type": "image", "url": "https://x.io/a.png", "detail": "low"},
               {"type": "image", "url": "ftp://x.io/a.png"}], [], "", ""),
     '{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":'
     '"https://x.io/a.png","detail":"low"}},{"type":"text","text":"[image: ftp://x.io/a.png]"}]}'),
    (("assistant", "", [{"id": "c1", "name": "f", "arguments": "{}"}], "", ""),
     '{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":'
     '{"name":"f","arguments":"{}"}}]}'),
    (("assistant", [{"type": "image", "url": "https://x.io/a.png"}], [], "", ""),
     '{"role":"assistant","content":[{"type":"text","text":"[image: https://x.io/a.png]"}]}'),
    (("tool", "42", [], "c1", "f"), '{"role":"tool","content":"42","tool_call_id":"c1"}'),
    (("user", [], [], "", ""), '{"role":"user","content":""}'),
]


@pytest.mark.parametrize(("fields", "rendered"), PINNED)
def test_the_rendering_of_a_stored_message_is_pinned(fields, rendered):
    role, content, tool_calls, tool_call_id, name = fields
    message = SimpleNamespace(role=role, content=content, tool_calls=tool_calls, tool_call_id=tool_call_id, name=name)
    assert orjson.dumps(openai_message(message)).decode() == rendered


def test_the_migration_renders_the_messages_stored_before_it(append):
    from importlib import import_module

    migration = import_module("sessions.migrations.0019_message_openai_message")
    append("s", [{"role": "system", "content": "rules"}, {"role": "user", "content": "hello"},
                 {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    messages = Message.objects.filter(session__key="s")
    as_appended = dict(messages.values_list("seq", "openai_message"))
    messages.update(openai_message=None)

    migration.render_stored_messages(apps, connection.schema_editor())

    assert dict(messages.values_list("seq", "openai_message")) == as_appended
    assert sum(text is not None for text in as_appended.values()) == 3
