"""The real producers: the `openai` package calling an OpenAI-compatible server on loopback, instrumented
with openinference-instrumentation-openai or opentelemetry-instrumentation-openai-v2, exporting with
opentelemetry-exporter-otlp-proto-http to a live ctxweb configured only through the OTEL_* environment
variables docs/capture-and-import.md gives. What ctxweb stores is compared with what the client sent, byte for byte."""

import copy
import json
import re

import openai
import pytest
from ctxweb_client import Client
from django.core.signals import request_started
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sessions.access.api_keys import create_api_key
from sessions.models import Project, RecordedRequest, Session
from tests.otlp.chat_server import ChatServer

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = {"role": "system", "content": "You are a terse weather assistant."}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}}]
# As a Python application writes tool arguments (json.dumps' default separators).
WEATHER_CALL = {"id": "call_w1", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
PICTURE = [{"type": "text", "text": "Where was this taken?"},
           {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="}}]


class App:
    """A chat application: keeps its history, calls the model with it (trimmed to the last `keep_last`
    messages, or with old turns replaced by its own summary once it is longer than `summarize_over`),
    runs the tools the model calls, and remembers exactly what each request sent."""

    def __init__(self, client, keep_last: int | None = None, summarize_over: int | None = None):
        self.client, self.keep_last, self.summarize_over = client, keep_last, summarize_over
        self.history = [SYSTEM]
        self.sent: list[list[dict]] = []

    def context(self) -> list[dict]:
        turns = self.history[1:]
        if self.summarize_over and len(turns) > self.summarize_over:
            summary = {"role": "user", "content": f"(Summary of our first {len(turns) - 1} messages: "
                                                  "the user asked about the weather and got answers.)"}
            self.history = [SYSTEM, summary, turns[-1]]  # the application keeps its summary from now on
            turns = self.history[1:]
        if self.keep_last:
            turns = turns[-self.keep_last:]
            while turns and turns[0]["role"] != "user":
                turns = turns[1:]
        return [SYSTEM, *turns]

    def ask(self, content) -> str:
        self.history.append({"role": "user", "content": content})
        while True:
            messages = self.context()
            self.sent.append(copy.deepcopy(messages))
            reply = self.client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS,
                                                        temperature=0.3).choices[0].message
            if not reply.tool_calls:
                self.history.append({"role": "assistant", "content": reply.content})
                return reply.content
            calls = [{"id": c.id, "type": "function",
                      "function": {"name": c.function.name, "arguments": c.function.arguments}}
                     for c in reply.tool_calls]
            self.history.append({"role": "assistant", "content": None, "tool_calls": calls})
            for call in calls:
                self.history.append({"role": "tool", "content": "Sunny, 21 C", "tool_call_id": call["id"]})


@pytest.fixture
def secret(transactional_db):
    return create_api_key(Project.objects.get_or_create(name="default")[0], "traced-app")[1]


@pytest.fixture
def chat_server():
    with ChatServer() as server:
        yield server


@pytest.fixture
def exporter(live_server, secret, monkeypatch):
    """The OTLP/HTTP exporter, configured the way docs/capture-and-import.md says: environment variables only."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", live_server.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer {secret}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    return OTLPSpanExporter()


@pytest.fixture
def exports():
    """How each request to /v1/traces arrived: its Content-Type and Content-Encoding."""
    seen = []

    def note(sender, environ, **kwargs):
        if environ.get("PATH_INFO") == "/v1/traces":
            seen.append((environ.get("CONTENT_TYPE"), environ.get("HTTP_CONTENT_ENCODING")))

    request_started.connect(note)
    yield seen
    request_started.disconnect(note)


@pytest.fixture
def kept():
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter, kept):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    yield provider
    provider.shutdown()


@pytest.fixture(params=["openinference", "genai"])
def instrumented(request, tracer_provider, monkeypatch):
    """The `openai` package instrumented by one of the two instrumentors, for one test."""
    if request.param == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    else:
        # Message content on the span (gen_ai.input.messages / gen_ai.output.messages), not in log events.
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    yield request.param
    instrumentor.uninstrument()


def conversation(convention: str, tracer_provider):
    """Where one conversation's spans go: OpenInference names the session; the GenAI instrumentation
    has no session attribute, so its spans are grouped by trace (one parent span)."""
    if convention == "openinference":
        from openinference.instrumentation import using_session

        return using_session("support-42")
    return tracer_provider.get_tracer("app").start_as_current_span("conversation")


def session_of(convention: str, kept) -> Session:
    if convention == "openinference":
        return Session.objects.get(key="support-42")
    trace_ids = {span.context.trace_id for span in kept.get_finished_spans()}
    assert len(trace_ids) == 1
    return Session.objects.get(key=f"trace-{trace_ids.pop():032x}")


def requests_of(session) -> list[RecordedRequest]:
    return list(RecordedRequest.objects.filter(session=session).order_by("number"))


def test_stored_messages_are_byte_for_byte_what_the_client_sent(instrumented, tracer_provider, chat_server, kept,
                                                                exporter, exports):
    client = openai.OpenAI(base_url=chat_server.base_url, api_key="sk-test")
    app = App(client)
    chat_server.answers = [
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        {"role": "assistant", "content": "Sunny and 21 C in Paris."},
        {"role": "assistant", "content": "Probably the Eiffel Tower."},
    ]
    # The GenAI instrumentation records content parts of a message sent as a list as nothing at all
    # (its parts come out empty), so only OpenInference is given the picture.
    picture = PICTURE if instrumented == "openinference" else "Is that the Eiffel Tower?"

    with conversation(instrumented, tracer_provider):
        app.ask("What is the weather in Paris?")
        app.ask(picture)

    session = session_of(instrumented, kept)
    stored = requests_of(session)
    assert len(stored) == len(app.sent) == 3
    assert exports and set(exports) == {("application/x-protobuf", "gzip")}
    for request, sent, received in zip(stored, app.sent, chat_server.received, strict=True):
        # Byte for byte on both databases: the stored JSON keeps the order of the keys sent.
        assert json.dumps(request.messages) == json.dumps(sent)
        assert request.messages == received["messages"]  # and what went over the wire
        assert (request.source, request.model, request.provider) == ("otlp", "gpt-test", "openai")
        assert request.parameters["temperature"] == 0.3
        assert request.usage_output_tokens == 7
        assert request.dropped_seqs == [] and request.unmatched == []
    assert stored[0].response == [{"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]}]
    assert session.instructions == SYSTEM["content"]
    # The raw log: every turn once (the system message became the instructions), in order.
    assert [m.role for m in session.messages.order_by("seq")] == ["user", "assistant", "tool", "assistant",
                                                                  "user", "assistant"]

    # An exporter retrying the same spans stores nothing twice.
    assert exporter.export(kept.get_finished_spans()) == SpanExportResult.SUCCESS
    assert RecordedRequest.objects.count() == 3
    assert session.messages.count() == 6


def explained(live_server, secret, session) -> list[tuple]:
    """(seq, code, last request that sent it, first without it) of each raw message, read as a tool would:
    the raw log over the API, through the Python client."""
    client = Client(live_server.url, secret)
    return [(m.seq, m.explain.code, m.explain.last_sent_request, m.explain.first_missing_request)
            for m in client.raw_log(session.key)]


def test_an_application_trimming_its_history_shows_what_it_dropped(instrumented, tracer_provider, chat_server,
                                                                    kept, live_server, secret):
    app = App(openai.OpenAI(base_url=chat_server.base_url, api_key="sk-test"), keep_last=3)

    with conversation(instrumented, tracer_provider):
        for question in ("Rain today?", "And tomorrow?", "Wind?", "Snow?"):
            app.ask(question)

    stored = requests_of(session_of(instrumented, kept))
    # Raw log: 1 Rain, 2 answer, 3 tomorrow, 4 answer, 5 Wind, 6 answer, 7 Snow, 8 answer.
    assert [r.messages for r in stored] == app.sent
    assert [r.message_seqs for r in stored] == [[None, 1], [None, 1, 2, 3], [None, 3, 4, 5], [None, 5, 6, 7]]
    assert [r.dropped_seqs for r in stored] == [[], [], [1, 2], [3, 4]]
    assert [r.unmatched for r in stored] == [[], [], [], []]
    # Why each turn is, or is not, in what the model saw last (request 4 sent 5, 6 and 7).
    assert explained(live_server, secret, session_of(instrumented, kept)) == [
        (1, "dropped_by_application", 2, 3), (2, "dropped_by_application", 2, 3),
        (3, "dropped_by_application", 3, 4), (4, "dropped_by_application", 3, 4),
        (5, "in_input", None, None), (6, "in_input", None, None), (7, "in_input", None, None),
        (8, "in_input", None, None),
    ]


def test_an_application_replacing_old_turns_with_its_summary_shows_it(instrumented, tracer_provider, chat_server,
                                                                      kept, live_server, secret):
    app = App(openai.OpenAI(base_url=chat_server.base_url, api_key="sk-test"), summarize_over=4)

    with conversation(instrumented, tracer_provider):
        for question in ("Rain today?", "And tomorrow?", "Wind?", "Snow?"):
            app.ask(question)

    stored = requests_of(session_of(instrumented, kept))
    assert [r.messages for r in stored] == app.sent
    assert stored[2].messages[1]["content"].startswith("(Summary of our first 4 messages")
    # Request 3 sends the application's summary instead of messages 1-4, and its new question (5).
    assert [r.message_seqs for r in stored] == [[None, 1], [None, 1, 2, 3], [None, None, 5], [None, None, 5, 6, 7]]
    assert [r.unmatched for r in stored] == [[], [], [1], [1]]
    assert [r.dropped_seqs for r in stored] == [[], [], [1, 2, 3, 4], []]
    codes = explained(live_server, secret, session_of(instrumented, kept))
    assert codes[:4] == [(seq, "replaced_by_application_summary", 2 if seq < 4 else None, 3) for seq in (1, 2, 3, 4)]
    assert {code for _, code, _, _ in codes[4:]} == {"in_input"}


class DroppingApp(App):
    """The issue's application: it sends [system, u1], then [system, u1, a1 (a tool call), t1], then drops
    the tool exchange and sends [system, u1, a2, u2]."""

    def context(self) -> list[dict]:
        if len(self.sent) == 2:
            return [SYSTEM, self.history[1], self.history[4], self.history[5]]
        return super().context()


def test_the_model_input_is_exactly_the_request_the_application_sent_last(instrumented, tracer_provider, chat_server,
                                                                          kept, live_server, secret, client):
    """Tried as a new user would: three requests through the instrumented client, the third dropping the
    tool call and its result; the API and the session page both show exactly the third request."""
    app = DroppingApp(openai.OpenAI(base_url=chat_server.base_url, api_key="sk-test"))
    chat_server.answers = [
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        {"role": "assistant", "content": "Sunny and 21 C in Paris."},
        {"role": "assistant", "content": "Take sunglasses."},
    ]
    with conversation(instrumented, tracer_provider):
        app.ask("What is the weather in Paris?")
        app.ask("What should I take?")

    session = session_of(instrumented, kept)
    third = app.sent[2]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user"]
    api = Client(live_server.url, secret)
    model_input = api.model_input(session.key, format="openai")
    assert (model_input.basis, model_input.request) == ("recorded_request", 3)
    assert model_input.messages == [*third, {"role": "assistant", "content": "Take sunglasses."}]
    assert WEATHER_CALL["id"] not in json.dumps(model_input.messages)
    codes = {m.seq: m.explain.code for m in api.raw_log(session.key)}
    assert codes == {1: "in_input", 2: "dropped_by_application", 3: "dropped_by_application", 4: "in_input",
                     5: "in_input", 6: "in_input"}

    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(user)
    page = client.get(session.get_absolute_url()).content.decode()
    column = page[page.index('id="input-items"'):]
    shown = [int(seq) for seq in re.findall(r'<article class="entry role-\w+[^"]*" data-seq="(\d+)"', column)]
    assert shown == [1, 4, 5, 6]
    assert "What the application sent." in page and "Request <a" in page
