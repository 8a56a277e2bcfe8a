"""Property-based fuzzing of the whole API from its OpenAPI schema (schemathesis, in-process through the
WSGI application): whatever a client sends, no 5xx, and every response is one the schema declares, with
the declared content type and shape."""

import json
from datetime import timedelta, timezone
from functools import cache

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from sessions.access.api_keys import create_api_key
from sessions.ingest.append import append_messages
from sessions.models import Message, Session
from tests.api.fuzzing import (  # noqa: F401 - connection_kept_across_requests, rate_limits_off and wsgi_host are fixtures
    CHECKS,
    connection_kept_across_requests,
    load_schema,
    rate_limits_off,
    wsgi_host,
)

FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

# Every operation of the schema, as "METHOD path": test_the_schema_lists_every_endpoint checks that the
# schema has exactly these, so each one is fuzzed. The tests are parametrized by this list rather than by
# the loaded schema, which is loaded when the first test runs: loading it when the module is collected
# costs seconds in every xdist worker. Each operation is driven through `as_strategy` under our own
# parametrization: schemathesis's pytest integration (`schema.parametrize`, `from_fixture`) gives every
# operation the same node id under pytest 9, which breaks fixture teardown.
LABELS = [
    "PUT /api/v1/sessions/{key}", "GET /api/v1/sessions/{key}", "GET /api/v1/sessions",
    "POST /api/v1/sessions/{key}/messages", "GET /api/v1/sessions/{key}/messages",
    "PATCH /api/v1/sessions/{key}/messages/{seq}", "GET /api/v1/sessions/{key}/model-input",
    "POST /api/v1/sessions/{key}/compact", "GET /api/v1/sessions/{key}/compactions/{run_id}",
    "POST /api/v1/tokens", "POST /api/v1/sessions/{key}/requests",
    "GET /api/v1/sessions/{key}/checkpoints", "GET /api/v1/sessions/{key}/events",
    "GET /api/v1/sessions/{key}/export", "GET /api/v1/sessions/{key}/trace", "GET /api/v1/ping",
    "GET /api/v1/sessions/{key}/requests", "GET /api/v1/sessions/{key}/requests/{number}",
    "GET /api/v1/compare",
    "GET /api/v1/sessions/{key}/reviews", "POST /api/v1/sessions/{key}/reviews", "GET /api/v1/queues",
    "POST /api/v1/queues", "GET /api/v1/queues/{queue_id}", "POST /api/v1/queues/{queue_id}/next",
    "GET /api/v1/project", "PATCH /api/v1/project", "POST /api/v1/context-checks",
]
SESSION_LABELS = [label for label in LABELS if "{key}" in label]
MODES = [pytest.param(GenerationMode.POSITIVE, id="positive"), pytest.param(GenerationMode.NEGATIVE, id="negative")]


@cache
def schema():
    return load_schema()


def operation(label: str):
    method, path = label.split(" ", 1)
    return schema()[path][method]


# The WSGI app runs in this process, on this thread's database connection, so it sees the test database
# and the test's transaction.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("wsgi_host", "rate_limits_off", "connection_kept_across_requests")]


@pytest.fixture
def authorization(project) -> dict:
    return {"Authorization": f"Bearer {create_api_key(project, 'fuzzer')[1]}"}


@pytest.fixture
def existing_session(project) -> str:
    """A session with a tool call, its result and an answer, for cases pointed at a real session."""
    append_messages(project, "fuzz", [
        {"id": "m1", "role": "user", "content": "What is the weather in Lisbon?"},
        {"id": "m2", "role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": "{}"}]},
        {"id": "m3", "role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"id": "m4", "role": "assistant", "content": "Sunny."},
    ])
    return "fuzz"


def fuzz(strategy, authorization):
    @FUZZ
    @given(case=strategy)
    def run(case):
        case.call_and_validate(headers=authorization, checks=CHECKS)

    run()


def test_the_schema_lists_every_endpoint():
    labels = [result.ok().label for result in schema().get_all_operations()]

    assert sorted(labels) == sorted(LABELS)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("label", LABELS)
def test_no_request_gets_a_server_error_or_an_undeclared_response(label, mode, authorization):
    fuzz(operation(label).as_strategy(generation_mode=mode), authorization)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("label", SESSION_LABELS)
def test_no_request_about_an_existing_session_gets_a_server_error_or_an_undeclared_response(
        label, mode, authorization, existing_session):
    fuzz(operation(label).as_strategy(generation_mode=mode, path_parameters={"key": existing_session}), authorization)


# --- appends of well-formed messages --------------------------------------------------------------
# The schema-driven cases above rarely get a batch past the role rules (a generated `tool` message
# answers no call), so the append path also gets messages that are well formed by construction, with
# arbitrary text, attributes, images and client timestamps.

OFFSETS = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes)))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
IMAGE_URLS = st.sampled_from([
    "https://example.com/a.png", "http://example.com/b.jpg",
    "data:image/png;base64,iVBORw0KGgo=", "data:,plain", "data:image/gif;base64,R0lGOD",
])
PARTS = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, st.text(max_size=40)),
    st.fixed_dictionaries(
        {"type": st.just("image"), "url": IMAGE_URLS},
        optional={"width": st.integers(1, 100_000), "height": st.integers(1, 100_000),
                  "media_type": st.sampled_from(["image/png", "image/jpeg"]),
                  "detail": st.sampled_from(["low", "high", "auto"])},
    ),
)
MESSAGES = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "agent", "system"]),
     "content": st.text(max_size=80) | st.lists(PARTS, max_size=3)},
    optional={
        "name": st.text(max_size=20),
        "attributes": st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=4),
        "include_in_messages": st.booleans(),
        "id": st.text(min_size=1, max_size=30),
        "created_at": st.datetimes(timezones=OFFSETS).map(lambda d: d.isoformat()),
    },
)


def as_json_numbers(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [as_json_numbers(v) for v in value]
    return {k: as_json_numbers(v) for k, v in value.items()}


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batch=st.lists(MESSAGES, min_size=1, max_size=4))
def test_a_well_formed_batch_is_stored_as_sent_or_rejected_with_a_4xx(batch, authorization, project):
    client = Client(HTTP_HOST="127.0.0.1", headers=authorization)
    key = f"fuzz-{Session.objects.count()}"
    before = Message.objects.count()

    response = client.post(f"/api/v1/sessions/{key}/messages", json.dumps({"messages": batch}),
                           content_type="application/json")

    assert response.status_code < 500, (batch, response.content[:300])
    body = response.json()
    if response.status_code != 200:
        assert response.status_code in (409, 413, 422), body
        assert isinstance(body.get("detail"), str) and isinstance(body.get("code"), str), body
        assert Message.objects.count() == before
        return
    stored_ids = [m["id"] for m in body["messages"] if m["stored"]]
    rows = {m.client_id: m for m in Message.objects.filter(session__key=key, session__project=project)}
    assert sorted(rows) == sorted(stored_ids)
    for sent, result in zip(batch, body["messages"], strict=True):
        if result["stored"]:
            row = rows[result["id"]]
            assert row.role == sent["role"]
            # PostgreSQL's jsonb keeps a number's exact decimal value, which a Python float may only
            # approximate (3.602879701896397e16 comes back as 36028797018963970): compare as JSON
            # numbers, not as Python int-versus-float.
            assert as_json_numbers(row.attributes) == as_json_numbers(sent.get("attributes", {}))
            assert row.include_in_messages == sent.get("include_in_messages", True)
