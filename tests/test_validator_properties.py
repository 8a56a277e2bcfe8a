"""Property tests of what a client may send: whatever JSON-like value arrives as a
message, a batch or a request body, validation either accepts it or raises one of its DomainErrors (a 4xx),
never anything else; and a message the API accepts reads back from the raw log as it was sent."""

import json
from decimal import Decimal

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.access.api_keys import create_api_key
from sessions.errors import DomainError
from sessions.ingest.append import parse_batch
from sessions.models import Message, Session
from sessions.wire.json_body import load_json_body
from sessions.wire.validation import MESSAGE_FIELDS, check_json, count_openai_messages, parse_message

PURE = settings(max_examples=400, deadline=None, derandomize=True, database=None)
OVER_HTTP = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Text of every kind, including NUL, lone surrogates, controls and characters outside the BMP; and text
# that is mostly storable but now and then is not.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=30)
FINE_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30)
TEXT = st.one_of(FINE_TEXT, FINE_TEXT, FINE_TEXT, ANY_TEXT)
JSON_VALUES = st.recursive(  # anything a JSON parser can produce, and NaN and infinities
    st.none() | st.booleans() | st.integers() | st.integers(-(10**400), 10**400) | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=15,
)
FINE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=10,
)
DEEP_JSON = st.integers(1, 60).map(lambda n: json.loads('{"a":' * n + "1" + "}" * n))
OBJECTS = st.one_of(*[st.dictionaries(TEXT, FINE_JSON, max_size=4)] * 4, DEEP_JSON)

IMAGE_URLS = st.sampled_from([
    "https://example.com/a.png", "http://example.com/b.jpg?x=1", "data:image/png;base64,iVBORw0KGgo=",
    "data:image/gif;base64,R0lGOD", "https://example.com/" + "a" * 8200, "data:image/png;base64,@@",
    "data:,plain", "ftp://example.com/c.png", "javascript:alert(1)", "",
])
TEXT_PART = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT})
IMAGE_PART = st.fixed_dictionaries(
    {"type": st.just("image"), "url": IMAGE_URLS},
    optional={"width": st.integers(-1, 200_000), "height": st.integers(1, 5000),
              "media_type": st.sampled_from(["image/png", "image/jpeg", None]),
              "detail": st.sampled_from(["low", "high", "auto", None])},
)
OPENAI_IMAGE_PART = st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.one_of(
    IMAGE_URLS, st.fixed_dictionaries({"url": IMAGE_URLS}, optional={"detail": st.sampled_from(["low", "x"])}))})
CALL_IDS = st.sampled_from(["call_1", "call_2", "call_3", "functions.search:0"])
TOOL_CALL = st.fixed_dictionaries(
    {"id": CALL_IDS, "name": st.sampled_from(["search", "get_weather"])},
    optional={"arguments": st.one_of(TEXT, OBJECTS, st.none())},
)
OPENAI_TOOL_CALL = st.fixed_dictionaries({
    "id": CALL_IDS, "type": st.just("function"),
    "function": st.fixed_dictionaries({"name": st.just("search"), "arguments": TEXT})})

COMMON = {"name": TEXT, "attributes": OBJECTS, "include_in_messages": st.booleans(), "persist": st.booleans(),
          "id": st.one_of(TEXT, st.just("i" * 201)),
          "created_at": st.sampled_from(["2024-05-01T12:30:00+02:00", "2024-05-01", "9999-12-31T23:59:59-14:00",
                                         "yesterday", "2024-13-01T00:00:00Z"])}


def well_formed(parts, tool_call, common=COMMON):
    """Messages of each role shaped the way the role wants them (their values may still be refused)."""
    return st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "agent", "system"]),
                               "content": st.one_of(TEXT, st.lists(parts, max_size=3))}, optional=common),
        st.fixed_dictionaries(
            {"role": st.just("assistant"), "content": st.one_of(TEXT, st.none(), st.lists(TEXT_PART, max_size=2))},
            optional={**common, "reasoning": TEXT,
                      "tool_calls": st.lists(tool_call, max_size=3, unique_by=lambda call: call["id"])}),
        st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": CALL_IDS, "content": TEXT}, optional=common),
    )


REMOVE = object()


def mutated(messages):
    """A message with one field set to any JSON value, or taken away, or a field messages do not have."""
    fields = st.sampled_from(sorted(MESSAGE_FIELDS) + ["user_id", "type"])

    def mutate(message, field, value):
        message = dict(message)
        if value is REMOVE:
            message.pop(field, None)
        else:
            message[field] = value
        return message

    return st.builds(mutate, messages, fields, st.one_of(JSON_VALUES, st.just(REMOVE)))


def messages_like(parts, tool_call, common=COMMON, shaped_weight=3):
    """Mostly well-formed messages (`shaped_weight` to one), else mutated ones, else any JSON value."""
    shaped = well_formed(parts, tool_call, common)
    return st.one_of(*[shaped] * shaped_weight, mutated(shaped), JSON_VALUES)


# What the validator takes from any caller, the OpenAI shapes of parts and tool calls included.
MESSAGE_LIKE = messages_like(st.one_of(TEXT_PART, IMAGE_PART, OPENAI_IMAGE_PART),
                             st.one_of(TOOL_CALL, TOOL_CALL, OPENAI_TOOL_CALL))


def assert_domain_error(exc: DomainError):
    assert 400 <= exc.status < 500, exc.status
    assert isinstance(exc.code, str) and exc.code
    assert isinstance(exc.detail, str) and exc.detail
    json.dumps(exc.as_dict())  # the API can render it


def storable(value) -> bool:
    """JSON text of `value` that every database can store: no NaN, no NUL, no lone surrogate."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    return "\\u0000" not in text and "\x00" not in text


@PURE
@given(value=st.one_of(MESSAGE_LIKE, MESSAGE_LIKE, JSON_VALUES))
def test_a_message_is_accepted_whole_or_refused_with_a_domain_error(value):
    try:
        new = parse_message(value, 0)
    except DomainError as exc:
        assert_domain_error(exc)
        return
    assert set(value) <= MESSAGE_FIELDS
    assert new.role in ("system", "user", "assistant", "tool", "agent")
    assert isinstance(new.content, str | list) and isinstance(new.text, str)
    assert storable([new.content, new.reasoning, new.tool_calls, new.tool_call_id, new.name, new.attributes,
                     new.client_id])
    assert all(isinstance(call["arguments"], str) for call in new.tool_calls)
    assert len({call["id"] for call in new.tool_calls}) == len(new.tool_calls)
    assert (new.role == "tool") == bool(new.tool_call_id)
    assert new.tokens > 0 and len(new.tool_call_tokens) == len(new.tool_calls)
    if new.tool_calls or new.reasoning:
        assert new.role == "assistant"


@PURE
@given(batch=st.one_of(st.lists(MESSAGE_LIKE, max_size=4), JSON_VALUES))
def test_a_batch_is_accepted_whole_or_refused_with_a_domain_error(batch):
    try:
        parsed = parse_batch(batch).messages
    except DomainError as exc:
        assert_domain_error(exc)
    else:
        assert len(parsed) == len(batch) > 0


@PURE
@given(messages=st.one_of(st.lists(MESSAGE_LIKE, max_size=3), JSON_VALUES))
def test_counting_tokens_gives_a_count_or_a_domain_error(messages):
    try:
        total, per_message = count_openai_messages(messages)
    except DomainError as exc:
        assert_domain_error(exc)
    else:
        assert total == 3 + sum(per_message) and len(per_message) == len(messages)


@PURE
@given(value=JSON_VALUES)
def test_free_form_json_is_storable_or_refused_with_a_domain_error(value):
    try:
        check_json(value, None, "attributes")
    except DomainError as exc:
        assert_domain_error(exc)
    else:
        assert storable(value)


def json_text(value) -> st.SearchStrategy[bytes]:
    return st.just(json.dumps(value).encode())


BODIES = st.one_of(
    st.binary(max_size=60),
    JSON_VALUES.flatmap(json_text),
    st.lists(st.sampled_from(['{', '}', '[', ']', ',', ':', '"a"', '1', '1e999', 'NaN', 'null', ' ', '"\\ud800"',
                              '\ufeff', '"\\u0000"', '-', '.', 'e']), max_size=40).map(lambda t: "".join(t).encode()),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
)


@PURE
@given(raw=BODIES)
def test_a_request_body_parses_to_json_or_is_refused_with_a_domain_error(raw):
    try:
        value = load_json_body(raw)
    except DomainError as exc:
        assert_domain_error(exc)
    else:
        json.dumps(value, allow_nan=False)  # JSON again, with finite numbers only


# --- through the HTTP API, with the database ----------------------------------------------------


def expected(sent: dict) -> dict:
    """What the raw log should hold for a message the API accepted, worked out from what was sent."""
    content = sent.get("content")
    if content is None:
        content = ""
    elif isinstance(content, list):
        content = [{k: v for k, v in part.items() if v is not None} for part in content]
    calls = []
    for call in sent.get("tool_calls") or ():
        arguments = call.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append({"id": call["id"], "name": call["name"], "arguments": arguments})
    return {
        "role": sent["role"],
        "content": content,
        "reasoning": sent.get("reasoning") or "",
        "tool_calls": calls,
        "tool_call_id": sent.get("tool_call_id") or "",
        "name": sent.get("name") or "",
        "attributes": sent.get("attributes") or {},
        "include_in_messages": sent.get("include_in_messages", True),
    }


def as_json_numbers(value):
    """PostgreSQL's jsonb keeps a number's exact decimal value (1e23 comes back as the integer
    10**23): compare numbers by the decimal value their JSON text says, not as Python int or float."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, list):
        return [as_json_numbers(v) for v in value]
    return {k: as_json_numbers(v) for k, v in value.items()}


# Messages the API's schema takes in shape (its own parts and tool calls), with values of every kind.
API_MESSAGES = messages_like(
    st.one_of(TEXT_PART, IMAGE_PART), TOOL_CALL,
    {"name": TEXT, "attributes": OBJECTS, "include_in_messages": st.booleans(),
     "id": st.text(st.characters(exclude_categories=()), min_size=1, max_size=12)},
    shaped_weight=25,
)


@pytest.fixture
def api_key(project) -> str:
    return create_api_key(project, "properties")[1]


@pytest.mark.django_db
@OVER_HTTP
@given(batch=st.lists(API_MESSAGES, min_size=1, max_size=4))
def test_a_batch_the_api_accepts_reads_back_from_the_raw_log_as_sent(batch, api_key):
    client = Client(HTTP_HOST="127.0.0.1", headers={"Authorization": f"Bearer {api_key}"})
    key = f"prop-{Session.objects.count()}"
    before = (Session.objects.count(), Message.objects.count())

    response = client.post(f"/api/v1/sessions/{key}/messages", json.dumps({"messages": batch}),
                           content_type="application/json")

    assert response.status_code < 500, response.content[:300]
    body = response.json()
    if response.status_code != 200:
        assert 400 <= response.status_code < 500 and body["detail"] and body["code"], body
        assert (Session.objects.count(), Message.objects.count()) == before
        return
    log = client.get(f"/api/v1/sessions/{key}/messages", {"limit": 500}).json()["items"]
    by_id = {m["id"]: m for m in log}
    stored = [(sent, result) for sent, result in zip(batch, body["messages"], strict=True) if result["stored"]]
    assert len(log) == len(stored)
    for sent, result in stored:
        got = by_id[result["id"]]
        assert got["seq"] == result["seq"]
        want = expected(sent)
        assert {**{k: got[k] for k in want}, "attributes": as_json_numbers(got["attributes"])} == {
            **want, "attributes": as_json_numbers(want["attributes"])}
