"""Shared base of the dashboard tests: two projects (`default`, `other`), a user for each role
(admin, editor, viewer of `default`; outsider, a viewer of `other` only; a superuser), a logged-in
client for each, and sessions built through the real domain code.

The Django test client must talk to 127.0.0.1: ALLOWED_HOSTS has no "testserver".
"""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.ingest.demo import tiny_png
from sessions.ingest.session_store import update_session
from sessions.models import Membership, Session

HOST = "127.0.0.1"
PASSWORD = "correct horse battery staple"

SYSTEM_TEXT = "(stored by an old client) You are a helpful airline agent."
IMAGE_URL = tiny_png(24, 16)
REASONING = "The board shows TP1351; look up the weather in parallel."
HIDDEN_TEXT = "internal audit marker, hidden from the model"


def make_client(user=None, **defaults) -> Client:
    client = Client(HTTP_HOST=HOST, **defaults)
    if user is not None:
        client.force_login(user)
    return client


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def words(n: int, word: str = "detail") -> str:
    return " ".join([word] * n)


# --- people ------------------------------------------------------------------------------------


def create_user(username, *, project=None, role=None, superuser=False):
    User = get_user_model()
    if superuser:
        user = User.objects.create_superuser(username, f"{username}@example.com", PASSWORD)
    else:
        user = User.objects.create_user(username, f"{username}@example.com", PASSWORD)
    if project is not None:
        Membership.objects.create(user=user, project=project, role=role)
    return user


@pytest.fixture
def make_user(db):
    return create_user


@pytest.fixture
def admin_user(make_user, project):
    return make_user("admin", project=project, role=Membership.Role.ADMIN)


@pytest.fixture
def editor_user(make_user, project):
    return make_user("editor", project=project, role=Membership.Role.EDITOR)


@pytest.fixture
def viewer_user(make_user, project):
    return make_user("viewer", project=project, role=Membership.Role.VIEWER)


@pytest.fixture
def outsider_user(make_user, other_project):
    return make_user("outsider", project=other_project, role=Membership.Role.VIEWER)


@pytest.fixture
def superuser(make_user, project, other_project):
    return make_user("root", superuser=True)


@pytest.fixture
def anonymous_client(db):
    return make_client()


@pytest.fixture
def admin_client(admin_user):
    return make_client(admin_user)


@pytest.fixture
def editor_client(editor_user):
    return make_client(editor_user)


@pytest.fixture
def viewer_client(viewer_user):
    return make_client(viewer_user)


@pytest.fixture
def outsider_client(outsider_user):
    return make_client(outsider_user)


@pytest.fixture
def superuser_client(superuser):
    return make_client(superuser)


# --- sessions ----------------------------------------------------------------------------------


def history_turn(n: int) -> list[dict]:
    """An older turn, long enough that a checkpoint summary of it is smaller than the turn."""
    return [
        {"role": "user", "content": f"Question {n}: please review booking REF{n:03d}. " + words(60, "context")},
        {"role": "assistant", "content": None, "tool_calls": [call(f"call_hist_{n}", "get_booking", ref=f"REF{n:03d}")]},
        {"role": "tool", "tool_call_id": f"call_hist_{n}", "name": "get_booking",
         "content": json.dumps({"ref": f"REF{n:03d}", "status": "confirmed", "notes": words(40, "seat")})},
        {"role": "assistant", "content": f"Booking REF{n:03d} is confirmed. " + words(50, "answer")},
    ]


def recent_messages() -> list[dict]:
    """The part after the latest checkpoint: every kind of message the raw log can show."""
    return [
        {"role": "user", "content": [
            {"type": "text", "text": "Here is the departures board. Is my flight on time?"},
            {"type": "image", "url": IMAGE_URL, "media_type": "image/png", "width": 24, "height": 16}],
         "attributes": {"user_id": "u_1842", "app_version": "3.4.1"}},
        {"role": "assistant", "content": "Let me check.", "reasoning": REASONING,
         "tool_calls": [call("call_fs_1", "flight_status", flight="TP1351", date="2025-05-20")]},
        {"role": "tool", "tool_call_id": "call_fs_1", "name": "flight_status", "content": "TP1351: on time, gate B32"},
        {"role": "assistant", "content": "TP1351 is on time, gate B32."},
        {"role": "user", "content": "Book me a taxi too."},
        {"role": "assistant", "content": None, "tool_calls": [call("call_taxi_1", "book_taxi", city="Lisbon")]},
        {"role": "user", "content": "Never mind the taxi."},
        {"role": "assistant", "content": HIDDEN_TEXT, "include_in_messages": False,
         "tool_calls": [call("call_audit_1", "audit_log", event="taxi_cancelled")]},
        {"role": "tool", "tool_call_id": "call_audit_1", "name": "audit_log", "content": "logged"},
        {"role": "assistant", "content": "The taxi is not booked. Have a good flight!"},
    ]


class Story:
    """Where each kind of message of the `story` session is (seqs)."""

    def __init__(self, session, first, second):
        self.session = session
        self.first = first  # checkpoint 1
        self.second = second  # checkpoint 2, extends the first
        self.system = 1
        recent = list(session.messages.filter(seq__gt=second.created_at_seq).order_by("seq"))
        self.image = recent[0].seq
        self.call = recent[1].seq  # assistant with reasoning and call_fs_1
        self.result = recent[2].seq  # its result
        self.dropped = recent[5].seq  # unanswered call_taxi_1, not the newest assistant message
        self.hidden = recent[7].seq  # include_in_messages=false, with call_audit_1
        self.orphan = recent[8].seq  # result of the hidden call
        self.last = recent[-1].seq
        self.history_call = 3  # assistant with call_hist_1 (covered)
        self.history_result = 4

    def url(self, suffix: str = "", **query) -> str:
        return session_url(self.session, suffix, **query)


def session_url(session: Session, suffix: str = "", **query) -> str:
    url = reverse("session", args=[session.project.name, session.key]) + suffix
    if query:
        from urllib.parse import urlencode

        url += "?" + urlencode(query)
    return url


def build_story(project, key: str = "story") -> Story:
    update_session(project, key, {
        "title": "Airline support: move a flight",
        "metadata": {"customer": "mia_li_3668", "channel": "web"},
        "instructions": "You are the support agent of Horizon Air.",
        "compaction": {"max_tokens": 4000, "keep_recent_tokens": 200, "auto": False},
    }, "test")
    append_messages(project, key, [{"role": "system", "content": SYSTEM_TEXT}], "test")
    for n in (1, 2, 3):
        append_messages(project, key, history_turn(n), "test")
    session = Session.objects.get(project=project, key=key)
    first = compact(session, force=True, actor="test")
    assert first.status == "completed", (first.status, first.reason, first.error)
    for n in (4, 5, 6):
        append_messages(project, key, history_turn(n), "test")
    second = compact(session, force=True, actor="test")
    assert second.status == "completed", (second.status, second.reason, second.error)
    append_messages(project, key, recent_messages(), "test")
    session.refresh_from_db()
    return Story(session, first.checkpoint, second.checkpoint)


@pytest.fixture
def story(project) -> Story:
    """A session of `default` with two checkpoints, a stored system message, tool calls with results,
    an unanswered call, a hidden message, an orphan result, an image, reasoning and attributes."""
    return build_story(project)


def build_other_session(other_project) -> Session:
    append_messages(other_project, "other-chat", [
        {"role": "user", "content": "A question in the other project about the checked bag."},
        {"role": "assistant", "content": "An answer in the other project."},
    ], "test")
    return Session.objects.get(project=other_project, key="other-chat")


@pytest.fixture
def other_session(other_project):
    return build_other_session(other_project)
