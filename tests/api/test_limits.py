"""Limits on what a client may send, and bodies of every odd shape: each limit is a
setting, each breach a clear 4xx JSON error {"detail", "code"}, never a 500, and a rejected request
stores nothing, not even the session an append or a request build would have created."""

import io
import json

import pytest
from django.test import override_settings

from sessions.ingest.append import append_messages
from sessions.models import Message, Project, Session
from tests.api.conftest import API, assert_error, session_state, stored
from tests.conftest import IMMEDIATE_TASKS, seeded_for_module

pytestmark = pytest.mark.django_db

CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}


@pytest.fixture(scope="module")
def seeded_chat(django_db_setup, django_db_blocker):
    """Stored once for the module (nearly every test wants it): each test reads it, or changes it inside
    its own rolled-back transaction."""
    with seeded_for_module(django_db_blocker), override_settings(TASKS=IMMEDIATE_TASKS):
        project = Project.objects.get_or_create(name="default")[0]
        append_messages(project, "chat", [
            {"role": "user", "content": "What is the weather in Lisbon?", "attributes": {"ticket": "T-1"}},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"},
            {"role": "assistant", "content": "It is 24°C and sunny."},
        ], "test")
        yield "chat"


@pytest.fixture
def chat(db, seeded_chat):
    """Session 'chat' of `project`: a question, a tool call, its result and an answer (messages 1-4)."""
    return seeded_chat


def snapshot(project) -> dict:
    """Everything a rejected request must leave as it was."""
    return {
        "rows": stored(),
        "chat": session_state(project, "chat"),
        "chat messages": list(Message.objects.filter(session__key="chat").order_by("seq").values()),
        "fresh exists": Session.objects.filter(key="fresh").exists(),
    }


def send(api, method: str, path: str, body: bytes, **meta):
    """A request with exactly these body bytes and WSGI environ entries; CONTENT_LENGTH is the body's
    length unless `meta` sets it, and left out when `meta` sets it to None."""
    environ = {
        "REQUEST_METHOD": method.upper(),
        "PATH_INFO": API + path,
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_AUTHORIZATION": f"Bearer {api.secret}",
        "wsgi.input": io.BytesIO(body),
        **meta,
    }
    environ = {name: value for name, value in environ.items() if value is not None}
    return api.client.request(**environ)


# Every endpoint that writes, with a body it accepts. Each template has a string slot and a number slot,
# so the odd bodies below differ from a valid one in exactly one way. {key} is the session written to.
WRITES = {
    "put session": ("put", "/sessions/{key}", '{"title": %s, "metadata": {"n": %s}}'),
    "append": ("post", "/sessions/{key}/messages",
               '{"messages": [{"role": "user", "content": %s, "attributes": {"n": %s}}]}'),
    "patch message": ("patch", "/sessions/chat/messages/1", '{"attributes": {"s": %s, "n": %s}}'),
    "compact": ("post", "/sessions/chat/compact", '{"summary": %s, "keep_recent_tokens": %s, "force": true}'),
    "build request": ("post", "/sessions/{key}/requests",
                      '{"instructions": %s, "messages": [{"role": "user", "content": "hi", "attributes": {"n": %s}}]}'),
    "count tokens": ("post", "/tokens",
                     '{"messages": [{"role": "user", "content": [{"type": "text", "text": %s}, '
                     '{"type": "image", "url": "https://example.com/a.png", "width": %s}]}]}'),
}
# The endpoints that may create the session they write to.
CREATING = [name for name, (_, path, _) in WRITES.items() if "{key}" in path]
TARGETS = [pytest.param(name, "chat", id=name) for name in WRITES] + [
    pytest.param(name, "fresh", id=f"{name} (new session)") for name in CREATING
]


def body_of(name: str, string: str = '"hello"', number: str = "7") -> str:
    return WRITES[name][2] % (string, number)


def write(api, name: str, key: str, body: bytes, **meta):
    method, path, _ = WRITES[name]
    return send(api, method, path.format(key=key), body, **meta)


@pytest.mark.parametrize(("name", "key"), TARGETS)
def test_every_template_body_is_accepted_as_it_is(api, chat, name, key):
    response = write(api, name, key, body_of(name).encode())

    assert response.status_code in (200, 201), response.content[:300]


# --- messages per batch --------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/sessions/fresh/messages", "/sessions/fresh/requests"])
def test_501_messages_are_over_the_default_batch_limit_and_store_nothing(api, chat, project, settings, path):
    assert settings.CTXWEB_MAX_BATCH_MESSAGES == 500
    before = snapshot(project)

    response = api.post(path, {"messages": [{"role": "user", "content": str(n)} for n in range(501)]})

    assert_error(response, 422, "batch_too_large")
    assert snapshot(project) == before


def test_500_messages_are_stored(api, chat):
    response = api.post("/sessions/fresh/messages", {"messages": [{"role": "user", "content": str(n)} for n in range(500)]})

    assert response.status_code == 200
    assert Session.objects.get(key="fresh").message_count == 500


def test_an_empty_batch_is_a_422_and_creates_no_session(api, chat, project):
    before = snapshot(project)

    assert_error(api.post("/sessions/fresh/messages", {"messages": []}), 422, "invalid_request")

    assert snapshot(project) == before


# --- bytes per request ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "key"), TARGETS)
def test_a_body_over_the_byte_limit_is_a_413_on_every_write_endpoint(api, chat, project, name, key,
                                                                       small_request_limit):
    body = body_of(name, string=json.dumps("x" * small_request_limit)).encode()
    before = snapshot(project)

    body = assert_error(write(api, name, key, body), 413, "request_too_large")

    assert str(small_request_limit) in body["detail"]
    assert snapshot(project) == before


@pytest.mark.parametrize(("name", "key"), TARGETS)
def test_a_content_length_over_the_limit_is_a_413_before_the_body_is_read(api, chat, project, name, key):
    before = snapshot(project)

    response = write(api, name, key, body_of(name).encode(), CONTENT_LENGTH=str(10 * 1024 ** 3))

    assert_error(response, 413, "request_too_large")
    assert snapshot(project) == before


def test_a_body_over_the_limit_is_a_413_even_without_an_api_key(api, chat, small_request_limit):
    response = send(api, "post", "/sessions/chat/messages", b"x" * (small_request_limit + 1), HTTP_AUTHORIZATION=None)

    assert_error(response, 413, "request_too_large")


@pytest.mark.parametrize(("name", "key"), TARGETS)
def test_a_chunked_body_without_a_content_length_is_a_400_on_every_write_endpoint(api, chat, project, name, key,
                                                                                   small_request_limit):
    """Django reads exactly Content-Length bytes, so a chunked body would be read as empty: it is
    refused, whatever its size, rather than misread."""
    before = snapshot(project)

    for body in (body_of(name).encode(), body_of(name, string=json.dumps("x" * small_request_limit)).encode()):
        response = write(api, name, key, body, CONTENT_LENGTH=None, HTTP_TRANSFER_ENCODING="chunked")
        assert_error(response, 400, "length_required")

    assert snapshot(project) == before


@pytest.mark.parametrize(("name", "key"), TARGETS)
def test_a_content_length_shorter_than_the_body_cuts_it_and_is_a_400(api, chat, project, name, key):
    body = body_of(name).encode()
    before = snapshot(project)

    response = write(api, name, key, body, CONTENT_LENGTH=str(len(body) // 2))

    assert_error(response, 400, "invalid_json")
    assert snapshot(project) == before


@pytest.mark.parametrize(("name", "key"), TARGETS)
def test_a_content_length_longer_than_the_body_is_a_400(api, chat, project, name, key):
    body = body_of(name).encode()
    before = snapshot(project)

    response = write(api, name, key, body[:-3], CONTENT_LENGTH=str(len(body)))

    assert_error(response, 400, "invalid_json")
    assert snapshot(project) == before


@pytest.mark.parametrize("length", ["abc", "-1", "1.5", "0x10"])
def test_a_content_length_that_is_not_a_size_is_a_400(api, chat, project, length):
    before = snapshot(project)

    response = write(api, "append", "fresh", body_of("append").encode(), CONTENT_LENGTH=length)

    assert_error(response, 400, "bad_request")
    assert snapshot(project) == before


def test_djangos_own_upload_limit_is_a_413_too(api, chat, project, settings):
    """DATA_UPLOAD_MAX_MEMORY_SIZE follows CTXWEB_MAX_REQUEST_BYTES; should they differ, the smaller one
    still answers 413, not ninja's 400 for a body it could not read."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    before = snapshot(project)

    response = write(api, "append", "fresh", body_of("append", string=json.dumps("x" * 2048)).encode())

    assert_error(response, 413, "request_too_large")
    assert snapshot(project) == before


# --- characters per text -------------------------------------------------------------------------

TEXT_LIMIT = 50


def message(**fields) -> dict:
    return {"messages": [{"role": "user", "content": "hi", **fields}]}


# Every text a client sends: (method, path, body with the text in it).
TEXTS = {
    "content": ("post", "/sessions/{key}/messages", lambda t: message(content=t)),
    "text part": ("post", "/sessions/{key}/messages",
                  lambda t: message(content=[{"type": "text", "text": "a"}, {"type": "text", "text": t}])),
    "reasoning": ("post", "/sessions/{key}/messages",
                  lambda t: {"messages": [{"role": "assistant", "content": "ok", "reasoning": t}]}),
    "tool call arguments": ("post", "/sessions/{key}/messages", lambda t: {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c9", "name": "f", "arguments": t}]}]}),
    "tool call arguments given as an object": ("post", "/sessions/{key}/messages", lambda t: {"messages": [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c9", "name": "f", "arguments": {"q": t[:-9]}}]}]}),
    "tool result": ("post", "/sessions/chat/messages",
                    lambda t: {"messages": [{"role": "tool", "tool_call_id": "call_1", "content": t}]}),
    "message name": ("post", "/sessions/{key}/messages", lambda t: message(name=t)),
    "attribute value": ("post", "/sessions/{key}/messages", lambda t: message(attributes={"a": [{"b": t}]})),
    "attribute key": ("post", "/sessions/{key}/messages", lambda t: message(attributes={t: 1})),
    "patched attribute value": ("patch", "/sessions/chat/messages/1", lambda t: {"attributes": {"a": t}}),
    "patched attribute key": ("patch", "/sessions/chat/messages/1", lambda t: {"attributes": {t: 1}}),
    "session title": ("put", "/sessions/{key}", lambda t: {"title": t}),
    "instructions": ("put", "/sessions/{key}", lambda t: {"instructions": t}),
    "metadata value": ("put", "/sessions/{key}", lambda t: {"metadata": {"m": {"n": t}}}),
    "metadata key": ("put", "/sessions/{key}", lambda t: {"metadata": {t: 1}}),
    "supplied summary": ("post", "/sessions/chat/compact", lambda t: {"summary": t, "force": True}),
    "request instructions": ("post", "/sessions/{key}/requests", lambda t: {"instructions": t}),
    "request message": ("post", "/sessions/{key}/requests",
                        lambda t: {"messages": [{"role": "user", "content": t, "persist": False}]}),
    "counted text": ("post", "/tokens", lambda t: {"messages": [{"role": "user", "content": t}]}),
}


def send_text(api, place: str, text: str):
    method, path, body = TEXTS[place]
    return api.request(method, path.format(key="fresh"), body(text))


@pytest.mark.parametrize("place", TEXTS)
def test_a_text_over_the_character_limit_is_a_422_and_stores_nothing(api, chat, project, settings, place):
    settings.CTXWEB_MAX_TEXT_CHARS = TEXT_LIMIT
    before = snapshot(project)

    body = assert_error(send_text(api, place, "é" * (TEXT_LIMIT + 1)), 422, "text_too_long")

    assert f"longer than {TEXT_LIMIT} characters" in body["detail"]
    assert snapshot(project) == before


@pytest.mark.parametrize("place", TEXTS)
def test_a_text_at_the_character_limit_is_accepted(api, chat, settings, place):
    settings.CTXWEB_MAX_TEXT_CHARS = TEXT_LIMIT

    response = send_text(api, place, "é" * TEXT_LIMIT)

    assert response.status_code in (200, 201), response.content[:300]


def test_the_default_character_limit_is_a_million(api, chat, project, settings):
    assert settings.CTXWEB_MAX_TEXT_CHARS == 1_000_000
    before = snapshot(project)

    assert_error(api.post("/sessions/fresh/messages", message(content="x" * 1_000_001)), 422, "text_too_long")

    assert snapshot(project) == before


def test_an_image_url_is_bounded_by_the_image_limits_not_the_text_limit(api, chat, settings):
    settings.CTXWEB_MAX_TEXT_CHARS = TEXT_LIMIT
    image = "data:image/png;base64," + "A" * 400

    response = api.post("/sessions/fresh/messages", message(content=[{"type": "image", "url": image}]))

    assert response.status_code == 200, response.content[:300]


def test_an_http_image_url_over_8192_characters_is_a_422(api, chat, project):
    before = snapshot(project)
    url = "https://example.com/" + "a" * 8192

    assert_error(api.post("/sessions/fresh/messages", message(content=[{"type": "image", "url": url}])), 422,
                 "invalid_content")

    assert snapshot(project) == before


def test_a_data_url_image_over_the_byte_limit_is_a_413(api, chat, project, settings):
    settings.CTXWEB_MAX_IMAGE_BYTES = 300
    before = snapshot(project)
    image = "data:image/png;base64," + "A" * 404  # 303 bytes

    assert_error(api.post("/sessions/fresh/messages", message(content=[{"type": "image", "url": image}])), 413,
                 "image_too_large")

    assert snapshot(project) == before


# --- levels of JSON nesting ----------------------------------------------------------------------


def nested(levels: int):
    """An object `levels` deep: {"a": {"a": ... {"a": 1}}}."""
    value = 1
    for _ in range(levels):
        value = {"a": value}
    return value


DEPTHS = {
    "attributes": ("post", "/sessions/{key}/messages", lambda v: message(attributes=v)),
    "patched attributes": ("patch", "/sessions/chat/messages/1", lambda v: {"attributes": v}),
    "metadata": ("put", "/sessions/{key}", lambda v: {"metadata": v}),
    "tool call arguments": ("post", "/sessions/{key}/messages", lambda v: {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c9", "name": "f", "arguments": v}]}]}),
    "request message attributes": ("post", "/sessions/{key}/requests",
                                   lambda v: {"messages": [{"role": "user", "content": "x", "attributes": v}]}),
}


def send_nested(api, place: str, levels: int):
    method, path, body = DEPTHS[place]
    return api.request(method, path.format(key="fresh"), body(nested(levels)))


@pytest.mark.parametrize("place", DEPTHS)
def test_json_nested_to_the_depth_limit_is_accepted(api, chat, settings, place):
    assert settings.CTXWEB_MAX_JSON_DEPTH == 32

    response = send_nested(api, place, 32)

    assert response.status_code in (200, 201), response.content[:300]


@pytest.mark.parametrize("levels", [33, 40, 41, 300])
@pytest.mark.parametrize("place", DEPTHS)
def test_json_nested_deeper_than_the_limit_is_a_422_and_stores_nothing(api, chat, project, place, levels):
    """Up to 8 levels past the limit the field is refused; deeper, the whole body is (300 levels used to
    be a 500: the serializer gives up at about 250)."""
    before = snapshot(project)

    assert_error(send_nested(api, place, levels), 422, "json_too_deep")

    assert snapshot(project) == before


def test_the_depth_limit_is_a_setting(api, chat, settings):
    settings.CTXWEB_MAX_JSON_DEPTH = 3

    assert send_nested(api, "attributes", 3).status_code == 200
    assert_error(send_nested(api, "attributes", 4), 422, "json_too_deep")


# --- odd bodies ----------------------------------------------------------------------------------


def dup_first_key(text: str) -> str:
    first_key = next(iter(json.loads(text)))
    return f'{{"{first_key}": null, {text[1:]}'


ODD_BODIES = {
    # not JSON text the way RFC 8259 wants it, or numbers no field can hold
    "not UTF-8": lambda n: body_of(n, string='"caf\xe9"').encode("latin-1"),
    "UTF-8 with a byte order mark": lambda n: b"\xef\xbb\xbf" + body_of(n).encode(),
    "UTF-16": lambda n: body_of(n).encode("utf-16"),
    "a key twice in one object": lambda n: dup_first_key(body_of(n)).encode(),
    "NaN": lambda n: body_of(n, number="NaN").encode(),
    "Infinity": lambda n: body_of(n, number="Infinity").encode(),
    "-Infinity": lambda n: body_of(n, number="-Infinity").encode(),
    "an integer of 5000 digits": lambda n: body_of(n, number="9" * 5000).encode(),
    "cut short": lambda n: body_of(n).encode()[:-1],
    "trailing text": lambda n: body_of(n).encode() + b" x",
    "two JSON texts": lambda n: (body_of(n) + body_of(n)).encode(),
    "single quotes": lambda n: body_of(n).replace('"', "'").encode(),
    "whitespace only": lambda n: b"  \n ",
    "nested beyond the parser's recursion limit": lambda n: b"[" * 100_000,
    "objects nested beyond the parser's recursion limit": lambda n: b'{"a":' * 100_000,
    # JSON, but not what the endpoint takes
    "no body": lambda n: b"",
    "a list": lambda n: b"[" + body_of(n).encode() + b"]",
    "a string": lambda n: json.dumps(body_of(n)).encode(),
    "null": lambda n: b"null",
    "a number": lambda n: b"42",
    "true": lambda n: b"true",
    "a float too large for a double": lambda n: body_of(n, number="1e999").encode(),
    "a lone high surrogate": lambda n: body_of(n, string=r'"\ud800"').encode(),
    "a lone low surrogate": lambda n: body_of(n, string=r'"x\udc00"').encode(),
    "a NUL character": lambda n: body_of(n, string=r'"a\u0000b"').encode(),
}


@pytest.mark.parametrize("odd", ODD_BODIES)
@pytest.mark.parametrize(("name", "key"), TARGETS)
def test_an_odd_body_is_a_4xx_json_error_and_stores_nothing(api, chat, project, name, key, odd):
    before = snapshot(project)

    response = write(api, name, key, ODD_BODIES[odd](name))

    assert response.status_code in (400, 422), (response.status_code, response.content[:300])
    assert_error(response, response.status_code)
    assert snapshot(project) == before


@pytest.mark.parametrize(("odd", "status", "code", "detail"), [
    ("not UTF-8", 400, "invalid_json", "not UTF-8"),
    ("UTF-8 with a byte order mark", 400, "invalid_json", "byte order mark"),
    ("a key twice in one object", 400, "invalid_json", "'messages' twice in one object"),
    ("cut short", 400, "invalid_json", "not valid JSON"),
    ("NaN", 422, "invalid_number", "NaN, which is not a JSON number"),
    ("-Infinity", 422, "invalid_number", "-Infinity, which is not a JSON number"),
    ("a float too large for a double", 422, "invalid_number", "1e999, too large"),
    ("an integer of 5000 digits", 422, "invalid_number", "too many digits"),
])
def test_a_body_that_is_not_strict_json_says_why(api, chat, odd, status, code, detail):
    body = assert_error(write(api, "append", "chat", ODD_BODIES[odd]("append")), status, code)

    assert detail in body["detail"]


def test_a_body_nested_too_deep_to_parse_is_a_422_json_too_deep(api, chat):
    body = assert_error(write(api, "append", "chat", b"[" * 100_000), 422, "json_too_deep")

    assert "nested more than 40 levels" in body["detail"]


@pytest.mark.parametrize("role", [[], {"a": 1}, ["user"]])
def test_a_role_that_is_not_text_is_a_422_when_counting_tokens(api, role):
    """/tokens takes messages as free-form objects; an unhashable role used to be a 500."""
    body = assert_error(api.post("/tokens", {"messages": [{"role": role, "content": "hi"}]}), 422, "invalid_role")

    assert body["index"] == 0
