"""Shared helpers of the import tests: importing bytes through the runner, reading what a session
holds, and checking its model input the way a provider would."""

import json

import pytest

from sessions.formats import to_anthropic, to_openai
from sessions.importers import import_data
from sessions.model_input import build_model_input
from sessions.models import Event, Message, Session
from tests.builders import openai_input_problems


@pytest.fixture
def import_bytes(project):
    """import_bytes("name.json", data_or_object, **options) -> FileReport (into the `default` project)."""

    def _import(name, data, **options):
        if not isinstance(data, bytes):
            data = (data if isinstance(data, str) else json.dumps(data)).encode()
        return import_data(options.pop("project", project), name, data, **options)

    return _import


def jsonl(*entries) -> bytes:
    return "".join(json.dumps(entry) + "\n" for entry in entries).encode()


def counts(project=None) -> dict:
    """How many rows each table holds (for one project when given)."""
    sessions = Session.objects.all()
    messages = Message.objects.all()
    events = Event.objects.all()
    if project is not None:
        sessions = sessions.filter(project=project)
        messages = messages.filter(session__project=project)
        events = events.filter(session__project=project)
    return {
        "sessions": sessions.count(),
        "messages": messages.count(),
        "tool_calls": sum(len(ids) for ids in messages.values_list("call_ids", flat=True)),
        "tool_results": messages.filter(role="tool").count(),
        "events": events.count(),
    }


def stored(session) -> list[Message]:
    return list(session.messages.order_by("seq"))


def openai_input(session) -> list[dict]:
    """The session's model input as OpenAI messages, checked valid for the Chat Completions API."""
    session = Session.objects.get(pk=session.pk)
    model_input = build_model_input(session)
    assert session.input_tokens == model_input.tokens
    messages = to_openai(model_input)
    assert openai_input_problems(messages) == []
    return messages


def anthropic_input(session) -> dict:
    return to_anthropic(build_model_input(Session.objects.get(pk=session.pk)))
