"""Shared helpers of the import tests: importing bytes through the runner, reading what a session
holds, and checking its model input the way a provider would."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sessions.context.model_input import build_model_input
from sessions.context.recorded_input import build_input
from sessions.ingest.importers import import_data
from sessions.models import Event, Membership, Message, Session
from sessions.wire.anthropic import to_anthropic
from sessions.wire.openai import to_openai
from tests.builders import openai_input_problems


@pytest.fixture
def import_bytes(project):
    """import_bytes("name.json", data_or_object, **options) -> FileReport (into the `default` project)."""

    def _import(name, data, **options):
        if not isinstance(data, bytes):
            data = (data if isinstance(data, str) else json.dumps(data)).encode()
        return import_data(options.pop("project", project), name, data, **options)

    return _import


HOST = "127.0.0.1"  # the test client must use a host in ALLOWED_HOSTS
IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@pytest.fixture
def import_dir(settings, tmp_path):
    """Uploads are stored under a temporary folder."""
    settings.CTXWEB_IMPORT_DIR = tmp_path / "imports"
    return settings.CTXWEB_IMPORT_DIR


@pytest.fixture
def immediate_tasks(settings, import_dir):
    """Import jobs run as soon as their upload commits (the worker's work, in the test's process)."""
    settings.TASKS = IMMEDIATE


def client_for(project, role=None, username="person") -> Client:
    """A logged-in dashboard client for a new user with `role` in `project` (none when role is None)."""
    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw")
    if role is not None:
        Membership.objects.create(user=user, project=project, role=role)
    client = Client(HTTP_HOST=HOST)
    client.force_login(user)
    return client


def long_name(ending: str, length: int = 250) -> str:
    """A run's file name as batch tools write them (instance, model, settings), `length` characters."""
    stem = "mini-swe-agent__deepseek_reasoner__pvlib__pvlib-python-1072__temperature-0.0__top_p-1.0__"
    stem = (stem * 4)[: length - len(ending) - len(".traj.json")] + ending
    return stem + ".traj.json"


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
    model_input = build_input(session)  # on its basis: what its application sent, when that is recorded
    assert session.input_tokens == model_input.tokens
    messages = to_openai(model_input)
    assert openai_input_problems(messages) == []
    return messages


def anthropic_input(session) -> dict:
    return to_anthropic(build_model_input(Session.objects.get(pk=session.pk)))
