"""POST /v1/traces: authentication, encodings, limits and the OTLP response, with spans built from the
official protobuf classes."""

import gzip
import json
import zlib

import hypothesis
import pytest
from django.test import Client
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from sessions.models import RecordedRequest, Session
from tests.api.conftest import UNKNOWN_SECRET
from tests.conftest import AUTH_FAILURE_LIMIT
from tests.otlp.spans import SECOND, T0, TRACE, as_otlp_json, export, openinference, span

pytestmark = pytest.mark.django_db

PROTOBUF = "application/x-protobuf"
HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
ANSWER = [{"role": "assistant", "content": "Hi."}]


def post(body: bytes, secret: str | None, content_type: str = PROTOBUF, **headers):
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    return Client(HTTP_HOST="127.0.0.1").post("/v1/traces", data=body, content_type=content_type, headers=headers)


def answer(response) -> ExportTraceServiceResponse:
    assert response.status_code == 200, response.content
    if response["Content-Type"] == "application/json":
        return json_format.Parse(response.content, ExportTraceServiceResponse())
    assert response["Content-Type"] == PROTOBUF
    return ExportTraceServiceResponse.FromString(response.content)


def status(response) -> Status:
    if response["Content-Type"] == "application/json":
        return json_format.Parse(response.content, Status())
    return Status.FromString(response.content)


def llm_span(messages=HELLO, output=ANSWER, **kwargs):
    session = kwargs.pop("session", "chat-1")
    return span(openinference(messages, output, session=session), **kwargs)


def test_it_stores_an_llm_span_sent_as_protobuf(api_key):
    response = post(export(llm_span(span_id=b"\x01" * 8)).SerializeToString(), api_key)

    assert not answer(response).HasField("partial_success")
    recorded = RecordedRequest.objects.get()
    assert (recorded.session.key, recorded.external_id, recorded.source) == ("chat-1", "01" * 8, "otlp")
    assert recorded.messages == HELLO and recorded.response == ANSWER
    assert recorded.trace_id == TRACE.hex() and recorded.model == "gpt-test"


def test_it_reads_otlp_json_with_hex_ids_and_answers_in_json(api_key):
    response = post(as_otlp_json(export(llm_span(span_id=bytes.fromhex("00f067aa0ba902b7")))), api_key,
                    content_type="application/json")

    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {}
    assert RecordedRequest.objects.get().external_id == "00f067aa0ba902b7"


def test_it_reads_enum_values_given_as_integers_in_json(api_key):
    document = json.loads(as_otlp_json(export(llm_span())))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["kind"] = 3

    answer(post(json.dumps(document).encode(), api_key, content_type="application/json"))

    assert RecordedRequest.objects.count() == 1


def test_it_reads_a_gzip_body(api_key):
    body = gzip.compress(export(llm_span()).SerializeToString())

    answer(post(body, api_key, **{"Content-Encoding": "gzip"}))

    assert RecordedRequest.objects.count() == 1


@pytest.mark.parametrize("secret", [None, UNKNOWN_SECRET])
def test_it_refuses_an_export_without_a_valid_key(secret, project):
    response = post(export(llm_span()).SerializeToString(), secret)

    assert response.status_code == 401
    assert "API key" in status(response).message
    assert not RecordedRequest.objects.exists() and not Session.objects.exists()


def test_a_revoked_key_is_refused(revoked_key):
    assert post(export(llm_span()).SerializeToString(), revoked_key).status_code == 401


def test_it_refuses_other_content_types_with_415(api_key):
    response = post(b"hello", api_key, content_type="text/plain")

    assert response.status_code == 415
    assert "application/x-protobuf" in status(response).message


def test_it_refuses_other_content_encodings_with_415(api_key):
    response = post(export(llm_span()).SerializeToString(), api_key, **{"Content-Encoding": "br"})

    assert response.status_code == 415


@pytest.mark.parametrize("body, content_type", [
    (b"\xff\xff\xff not protobuf", PROTOBUF),
    (b"{not json", "application/json"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "00f067aa0ba902b7"}]}]}]}',
     "application/json"),
    (b'{"resourceSpans": "many"}', "application/json"),
    (b"[]", "application/json"),
])
def test_an_undecodable_body_is_400(api_key, body, content_type):
    response = post(body, api_key, content_type=content_type)

    assert response.status_code == 400, response.content
    assert status(response).message
    assert not RecordedRequest.objects.exists()


def test_it_reads_a_deflate_body(api_key):
    body = zlib.compress(export(llm_span()).SerializeToString())

    answer(post(body, api_key, **{"Content-Encoding": "deflate"}))

    assert RecordedRequest.objects.count() == 1


def test_too_many_failed_keys_are_429_with_retry_after(project, low_auth_failure_limit):
    body = export(llm_span()).SerializeToString()
    codes = [post(body, UNKNOWN_SECRET).status_code for _ in range(AUTH_FAILURE_LIMIT + 1)]

    assert codes == [401] * AUTH_FAILURE_LIMIT + [429]
    refused = post(body, UNKNOWN_SECRET)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0


def test_a_body_that_is_not_gzip_is_400(api_key):
    response = post(b"plain", api_key, **{"Content-Encoding": "gzip"})

    assert response.status_code == 400


def test_a_body_over_the_limit_is_413(api_key, settings):
    settings.CTXWEB_MAX_REQUEST_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    body = export(llm_span([{"role": "user", "content": "x" * 5000}])).SerializeToString()

    response = post(body, api_key)

    assert response.status_code == 413
    assert not RecordedRequest.objects.exists()


def test_a_gzip_body_that_unpacks_past_the_limit_is_413(api_key, settings):
    settings.CTXWEB_MAX_REQUEST_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    body = gzip.compress(export(llm_span([{"role": "user", "content": "x" * 100_000}])).SerializeToString())
    assert len(body) < 4096

    response = post(body, api_key, **{"Content-Encoding": "gzip"})

    assert response.status_code == 413
    assert not RecordedRequest.objects.exists()


def test_spans_that_are_not_llm_calls_are_accepted_ignored_and_counted(api_key):
    http = span({"http.request.method": "POST", "url.full": "https://api.openai.com/v1/chat"}, name="POST")
    agent = span({"openinference.span.kind": "AGENT"}, name="agent")

    result = answer(post(export(http, llm_span(), agent).SerializeToString(), api_key))

    assert result.partial_success.rejected_spans == 0
    assert result.partial_success.error_message == "2 span(s) ignored: not LLM calls (accepted, not stored)."
    assert RecordedRequest.objects.count() == 1


def test_malformed_llm_spans_are_rejected_alone_with_partial_success(api_key):
    gap = span({"openinference.span.kind": "LLM", "session.id": "chat-1",
                "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "a",
                "llm.input_messages.2.message.role": "user", "llm.input_messages.2.message.content": "b"})
    bad_role = llm_span([{"role": "wizard", "content": "hi"}])
    bad_json = span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[{not json"})
    no_content = span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test"})
    tool_without_id = llm_span([{"role": "tool", "content": "42"}])  # refused by record_requests

    result = answer(post(export(gap, llm_span(), bad_role, bad_json, no_content, tool_without_id)
                         .SerializeToString(), api_key))

    assert result.partial_success.rejected_spans == 5
    message = result.partial_success.error_message
    assert message.startswith("5 LLM span(s) rejected: ")
    assert "indexes are not 0..1" in message and "more reasons" in message
    assert RecordedRequest.objects.count() == 1


def test_spans_without_a_session_id_are_grouped_by_trace(api_key):
    first = llm_span(session=None, start=T0)
    second = llm_span(HELLO + ANSWER + [{"role": "user", "content": "More"}], session=None, start=T0 + SECOND)
    other_trace = llm_span(session=None, trace_id=b"\x07" * 16)

    answer(post(export(first, second, other_trace).SerializeToString(), api_key))

    keys = dict(Session.objects.values_list("key", "request_count"))
    assert keys == {f"trace-{TRACE.hex()}": 2, f"trace-{'07' * 16}": 1}


def test_a_retried_export_stores_nothing_twice(api_key):
    body = export(llm_span(span_id=b"\x02" * 8)).SerializeToString()

    answer(post(body, api_key))
    again = answer(post(body, api_key))

    assert not again.HasField("partial_success")
    assert RecordedRequest.objects.count() == 1
    assert Session.objects.get().message_count == 2  # the system message became the instructions


def test_batches_out_of_order_are_numbered_by_start_time(api_key):
    later = llm_span(HELLO + ANSWER + [{"role": "user", "content": "More"}], span_id=b"\x0b" * 8,
                     start=T0 + 10 * SECOND, output=[{"role": "assistant", "content": "Sure."}])
    earlier = llm_span(span_id=b"\x0a" * 8, start=T0)

    answer(post(export(later).SerializeToString(), api_key))
    answer(post(export(earlier).SerializeToString(), api_key))

    numbers = dict(RecordedRequest.objects.values_list("external_id", "number"))
    assert numbers == {"0a" * 8: 1, "0b" * 8: 2}
    first, second = RecordedRequest.objects.order_by("number")
    assert (first.message_seqs, first.response_seqs) == ([None, 1], [2])
    assert (second.message_seqs, second.response_seqs, second.dropped_seqs) == ([None, 1, 2, 3], [4], [])
    session = Session.objects.get()
    assert [m.text for m in session.messages.order_by("seq")] == ["Hello", "Hi.", "More", "Sure."]


def test_get_is_405_and_no_csrf_token_is_needed(api_key):
    client = Client(HTTP_HOST="127.0.0.1", enforce_csrf_checks=True)
    assert client.get("/v1/traces").status_code == 405
    response = client.post("/v1/traces", data=export(llm_span()).SerializeToString(), content_type=PROTOBUF,
                           headers={"Authorization": f"Bearer {api_key}"})
    assert response.status_code == 200


def test_a_session_rebuilt_from_spans_opens_in_the_dashboard(api_key, django_user_model):
    answer(post(export(llm_span(session=None)).SerializeToString(), api_key))
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw-unused-1")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(admin)

    page = client.get(Session.objects.get().url("session"))

    assert page.status_code == 200
    assert "Hello" in page.content.decode() and "Hi." in page.content.decode()


MESSAGE_VALUES = st.one_of(
    st.sampled_from(["user", "assistant", "tool", "system", "", "image", "text", "call_1", "{}", "[]"]),
    st.text(max_size=12), st.integers(-5, 5), st.booleans(),
)
OI_KEYS = [f"llm.{side}_messages.{i}.message.{field}" for side in ("input", "output") for i in (0, 1)
           for field in ("role", "content", "name", "tool_call_id", "contents.0.message_content.type",
                         "contents.0.message_content.text", "contents.0.message_content.image.image.url",
                         "tool_calls.0.tool_call.id", "tool_calls.0.tool_call.function.name",
                         "tool_calls.0.tool_call.function.arguments")]
GENAI_PARTS = st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_call", "tool_call_response", "uri",
                                                              "blob", "reasoning"])},
                                    optional={"content": MESSAGE_VALUES, "id": MESSAGE_VALUES, "name": MESSAGE_VALUES,
                                              "arguments": MESSAGE_VALUES, "response": MESSAGE_VALUES,
                                              "uri": MESSAGE_VALUES, "modality": st.just("image")})
GENAI_MESSAGES = st.lists(st.fixed_dictionaries({"role": MESSAGE_VALUES, "parts": st.lists(GENAI_PARTS, max_size=3)}),
                          max_size=4).map(json.dumps)


@hypothesis.settings(max_examples=60, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(
    oi=st.dictionaries(st.sampled_from(OI_KEYS), MESSAGE_VALUES, max_size=8),
    genai=st.tuples(GENAI_MESSAGES, GENAI_MESSAGES),
    session_id=st.text(max_size=10),
)
def test_whatever_llm_spans_carry_the_answer_is_200_and_counts_every_span(api_key, oi, genai, session_id):
    spans = [
        span({"openinference.span.kind": "LLM", "session.id": session_id, **oi}),
        span({"gen_ai.operation.name": "chat", "gen_ai.conversation.id": session_id,
              "gen_ai.input.messages": genai[0], "gen_ai.output.messages": genai[1]}),
    ]
    before = RecordedRequest.objects.count()

    result = answer(post(export(*spans).SerializeToString(), api_key))

    stored = RecordedRequest.objects.count() - before
    assert stored + result.partial_success.rejected_spans == 2
