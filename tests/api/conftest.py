"""Shared setup of the HTTP API tests: keys in two projects, a revoked key, and a client that sends
`Authorization: Bearer <secret>` to /api/v1 on 127.0.0.1 (ALLOWED_HOSTS has no "testserver")."""

import json as jsonlib
from urllib.parse import urlencode

import pytest
from django.test import Client

from sessions.access.api_keys import create_api_key, revoke
from sessions.models import Checkpoint, Event, Message, Session

API = "/api/v1"
HOST = "127.0.0.1"
UNKNOWN_SECRET = "ctx_this-key-was-never-created-by-anyone-0000000000"
_DEFAULT = object()


class Api:
    """Django's test client pointed at /api/v1 with one API key.

    `secret=None` sends no Authorization header, `authorization="..."` sends that header as it is.
    Bodies given as `json` are encoded; `data` (bytes or str) is sent untouched.
    """

    def __init__(self, secret: str | None):
        self.secret = secret
        self.client = Client(HTTP_HOST=HOST)

    def with_key(self, secret: str | None) -> "Api":
        return Api(secret)

    def request(self, method: str, path: str, json=_DEFAULT, *, data=None, content_type="application/json",
                query=None, secret=_DEFAULT, authorization=None):
        secret = self.secret if secret is _DEFAULT else secret
        headers = {}
        if authorization is not None:
            headers["Authorization"] = authorization
        elif secret is not None:
            headers["Authorization"] = f"Bearer {secret}"
        if json is not _DEFAULT:
            data = jsonlib.dumps(json)
        kwargs = {"headers": headers}
        if method == "get":
            return self.client.get(API + path, query or {}, **kwargs)
        if query:
            path = f"{path}?{urlencode(query)}"
        call = getattr(self.client, method)
        if data is None:
            return call(API + path, **kwargs)
        return call(API + path, data=data, content_type=content_type, **kwargs)

    def get(self, path, **kwargs):
        return self.request("get", path, **kwargs)

    def post(self, path, json=_DEFAULT, **kwargs):
        return self.request("post", path, json, **kwargs)

    def put(self, path, json=_DEFAULT, **kwargs):
        return self.request("put", path, json, **kwargs)

    def patch(self, path, json=_DEFAULT, **kwargs):
        return self.request("patch", path, json, **kwargs)


@pytest.fixture
def api_key(project) -> str:
    """The secret of an active key of `project`."""
    return create_api_key(project, "test-app")[1]


@pytest.fixture
def other_key(other_project) -> str:
    """The secret of an active key of `other_project`."""
    return create_api_key(other_project, "other-app")[1]


@pytest.fixture
def revoked_key(project) -> str:
    key, secret = create_api_key(project, "retired-app")
    revoke(key)
    return secret


@pytest.fixture
def api(api_key) -> Api:
    return Api(api_key)


@pytest.fixture
def other_api(other_key) -> Api:
    return Api(other_key)


@pytest.fixture(params=["missing key", "malformed header", "unknown key", "revoked key"])
def bad_credentials(request, revoked_key) -> dict:
    """Each way a request can fail to authenticate: request kwargs for Api.request and the code."""
    return {
        "missing key": ({"secret": None}, "missing_api_key"),
        "malformed header": ({"authorization": f"Token {revoked_key}"}, "malformed_authorization"),
        "unknown key": ({"secret": UNKNOWN_SECRET}, "invalid_api_key"),
        "revoked key": ({"secret": revoked_key}, "revoked_api_key"),
    }[request.param]


def assert_error(response, status: int, code: str | None = None) -> dict:
    """The response is a JSON error body {"detail", "code"} with this status (and code)."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    assert isinstance(body.get("code"), str) and body["code"], body
    if code is not None:
        assert body["code"] == code, body
    return body


def stored() -> dict:
    """How many rows of each kind the database holds: a rejected request changes none of them."""
    return {
        "sessions": Session.objects.count(),
        "messages": Message.objects.count(),
        "tool_calls": sum(len(ids) for ids in Message.objects.values_list("call_ids", flat=True)),
        "checkpoints": Checkpoint.objects.count(),
        "events": Event.objects.count(),
    }


def session_state(project, key: str) -> dict | None:
    """Every field of a session row, to show a request left it as it was."""
    return Session.objects.filter(project=project, key=key).values().first()


@pytest.fixture
def small_request_limit(settings):
    """CTXWEB_MAX_REQUEST_BYTES lowered to 2 KiB (the middleware reads it per request)."""
    settings.CTXWEB_MAX_REQUEST_BYTES = 2048
    return 2048


def too_big_text(limit: int) -> str:
    return "x" * (limit + 100)


# Five messages: a question, a tool call and its result, an answer and a second question.
CONVERSATION = [
    {"id": "m1", "role": "user", "content": "What is the weather in Lisbon?"},
    {"id": "m2", "role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]},
    {"id": "m3", "role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"},
    {"id": "m4", "role": "assistant", "content": "It is 24°C and sunny in Lisbon."},
    {"id": "m5", "role": "user", "content": "And in Porto?"},
]


@pytest.fixture
def conversation(append):
    """A small session 'chat' of the five messages of CONVERSATION."""
    append("chat", CONVERSATION)
    return "chat"
