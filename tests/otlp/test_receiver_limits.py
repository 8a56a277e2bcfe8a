"""What an OTLP export costs is bounded before it costs (security issue 37, items 7 and 11): the bytes rate
limit counts what a compressed body unpacks to, a body that unpacks past CTXWEB_MAX_REQUEST_BYTES is refused
once it has unpacked that far, JSON nested past the limit is refused before it is parsed, and a form is not
an export (415)."""

import gzip
import json
import struct
import time
import tracemalloc
import zlib

import pytest
from django.conf import settings as django_settings
from django.test import Client

from sessions.access import rate_limits
from sessions.ingest import otlp
from sessions.models import ApiKey, RecordedRequest, Session
from tests.otlp.spans import SECOND, T0, as_otlp_json, export, openinference, span
from tests.otlp.test_receiver import ANSWER, HELLO, answer, post, status

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024
GZIP = {"Content-Encoding": "gzip"}
DEEP = "[" * 50_000 + "]" * 50_000  # valid JSON, 50,000 levels deep


def padded_export(session: str, padding: int, start: int = T0) -> bytes:
    """An export of one LLM span whose body is about `padding` bytes larger than its messages: an
    attribute no convention reads."""
    attrs = openinference(HELLO, ANSWER, session=session, **{"app.padding": "x" * padding})
    return export(span(attrs, start=start)).SerializeToString()


def gzip_of_zeros(size: int) -> bytes:
    """A valid gzip body of `size` zero bytes (a multiple of 1 MiB), made in a fraction of a second: 1 MiB of
    zeros compressed once, ending on a full flush (byte-aligned, no reference to what came before), then
    repeated."""
    zeros = bytes(MiB)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(size // MiB):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + block * (size // MiB) + deflate.flush() + struct.pack("<II", crc, size & 0xFFFFFFFF)


@pytest.fixture
def bytes_budget(settings):
    settings.CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE = 1_000_000
    return 1_000_000


def key_usage() -> rate_limits.Usage:
    """The figures of the test's one API key."""
    return rate_limits.usage(ApiKey.objects.get())


# --- item 7: the bytes rate limit counts what a body unpacks to -------------------------------------


def test_a_gzip_export_is_charged_what_it_unpacks_to(api_key, bytes_budget):
    unpacked = padded_export("big", 1_500_000)
    body = gzip.compress(unpacked)
    assert len(body) < 10_000 < bytes_budget < len(unpacked)

    answer(post(body, api_key, **GZIP))

    assert key_usage().bytes == len(unpacked)  # not the 4 kB it was sent as
    # A bucket empty for a minute: the next 100 kB would need 6 seconds of refill.
    refused = post(padded_export("next", 100_000, start=T0 + SECOND), api_key)
    assert refused.status_code == 429, refused.content
    assert int(refused["Retry-After"]) >= 1
    assert not Session.objects.filter(key="next").exists()


def test_an_export_whose_unpacked_size_the_bucket_cannot_cover_is_429_and_stores_nothing(api_key, bytes_budget):
    answer(post(padded_export("first", 600_000), api_key))
    unpacked = padded_export("second", 500_000, start=T0 + SECOND)

    response = post(gzip.compress(unpacked), api_key, **GZIP)

    assert response.status_code == 429, response.content
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE" in status(response).message
    assert list(Session.objects.values_list("key", flat=True)) == ["first"]
    assert RecordedRequest.objects.count() == 1
    assert key_usage().throttled == 1


def test_an_uncompressed_export_is_charged_its_size_once(api_key, bytes_budget):
    body = padded_export("plain", 200_000)

    answer(post(body, api_key))

    assert key_usage().bytes == len(body)


def test_a_gzip_bomb_is_413_having_unpacked_no_more_than_the_limit(api_key, monkeypatch):
    """1 GiB of zeros in a 1 MB gzip body: refused once it has unpacked one byte past the limit, in
    memory of about the limit, in a fraction of a second."""
    limit = django_settings.CTXWEB_MAX_REQUEST_BYTES
    bomb = gzip_of_zeros(1024 * MiB)
    assert len(bomb) < 1.1 * MiB
    produced = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args, **kwargs):
            self.inflater = real(*args, **kwargs)

        def decompress(self, data, max_length=0):
            out = self.inflater.decompress(data, max_length)
            produced.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self.inflater, name)

    monkeypatch.setattr(otlp.decode.zlib, "decompressobj", Counting)
    assert post(gzip.compress(b"warm-up"), api_key, **GZIP).status_code == 400  # what a first request imports
    produced.clear()

    tracemalloc.start()
    started = time.perf_counter()
    try:
        response = post(bomb, api_key, **GZIP)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert response.status_code == 413, response.content
    assert f"unpacks to more than {limit} bytes" in status(response).message
    assert sum(produced) == limit + 1
    assert peak < limit + 8 * MiB, peak  # the output so far, the body and one step
    assert elapsed < 2, elapsed
    assert not RecordedRequest.objects.exists()


# --- item 11: JSON nested past the limit, and forms -------------------------------------------------


def genai_deep_span():
    return span({"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "deep",
                 "gen_ai.input.messages": DEEP})


def test_a_json_attribute_nested_50000_deep_is_a_rejected_span(api_key):
    reply = answer(post(export(genai_deep_span(), span(openinference(HELLO, ANSWER))).SerializeToString(), api_key))

    assert reply.partial_success.rejected_spans == 1
    assert "gen_ai.input.messages is nested more than 40 levels deep" in reply.partial_success.error_message
    assert list(Session.objects.values_list("key", flat=True)) == ["chat-1"]


def test_a_json_attribute_nested_50000_deep_in_an_otlp_json_body_is_a_rejected_span(api_key):
    response = post(as_otlp_json(export(genai_deep_span())), api_key, content_type="application/json")

    reply = answer(response)
    assert reply.partial_success.rejected_spans == 1
    assert "nested more than 40 levels deep" in reply.partial_success.error_message
    assert not Session.objects.exists()


@pytest.mark.parametrize("body", [b'{"resourceSpans":' + b"[" * 50_000, b"[" * 6 * MiB],
                         ids=["an export", "6 MB of brackets"])
def test_an_otlp_json_body_nested_past_the_limit_is_refused_before_it_is_parsed(api_key, body, monkeypatch):
    loads = json.loads

    def unless_the_body(text, *args, **kwargs):
        assert len(text) < len(body), "the body was parsed"
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", unless_the_body)

    response = post(body, api_key, content_type="application/json")

    assert response.status_code == 422, response.content
    assert "nested more than 40 levels deep" in status(response).message


def test_openinference_parameters_nested_past_the_limit_are_left_out(api_key):
    attrs = openinference(HELLO, ANSWER, **{"llm.invocation_parameters": DEEP, "llm.tools.0.tool.json_schema": DEEP})

    answer(post(export(span(attrs)).SerializeToString(), api_key))

    assert RecordedRequest.objects.get().parameters == {}


@pytest.mark.parametrize("with_key", [True, False], ids=["with a key", "without one"])
def test_a_form_posted_to_the_receiver_is_415_and_not_read(api_key, with_key):
    form = (b'--b\r\nContent-Disposition: form-data; name="file"; filename="x.pb"\r\n\r\n'
            + export(span(openinference(HELLO, ANSWER))).SerializeToString() + b"\r\n--b--\r\n")
    stream = Counted(form)
    headers = {"Authorization": f"Bearer {api_key}"} if with_key else {}
    response = Client(HTTP_HOST="127.0.0.1").generic(
        "POST", "/v1/traces", headers=headers, CONTENT_TYPE="multipart/form-data; boundary=b",
        CONTENT_LENGTH=str(len(form)), **{"wsgi.input": stream})

    assert response.status_code == 415, response.content
    assert "multipart/form-data" in status(response).message
    assert stream.read_bytes == 0
    assert not RecordedRequest.objects.exists()


class Counted:
    """A request body that counts the bytes read from it."""

    def __init__(self, data: bytes):
        self.data, self.read_bytes = data, 0

    def read(self, size=-1):
        size = len(self.data) - self.read_bytes if size is None or size < 0 else size
        chunk = self.data[self.read_bytes:self.read_bytes + size]
        self.read_bytes += len(chunk)
        return chunk

    def readline(self, size=-1):
        return self.read(size)
