"""Explanation and model input agree, always (SPEC §10), and every provider format is a request its provider
takes: on every session made from tests/data (the transcripts imported, the request logs imported as request
logs, and the OTLP exports of tests/data/otlp received as the two instrumentations sent them), at every point
of the conversation (as of each message, and now), in every format.

- A message is explained `in_input` if and only if it is in the model input, and that holds for each form of
  the input the pages explain against (the stored figures now; laid out again as of a message).
- Each format carries what the input holds: a message per entry in `openai`, each tool call and each result
  once in every format, the seqs of the entries in `ctxweb`.
- Every `anthropic` answer passes tests/anthropic_rules.py (the anthropic package's typed params and the
  Messages API's structural rules).
- A session rebuilt from recorded requests answers, by default, what its application sent (basis
  recorded_request); what ctxweb would build from its raw log (basis raw_log) agrees with its explanations too.

Each point's input is built once and rendered in every format; failures are collected and the first few shown.
"""

from pathlib import Path

import pytest
from django.utils.text import slugify
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sessions.context.explain import checkpoints_of, explain_messages, page_layout
from sessions.context.model_input import Reason
from sessions.context.provider_input import FORMATS, NothingToSend, model_input_response
from sessions.context.recorded_input import RAW_LOG, RECORDED_REQUEST, build_input
from sessions.ingest import otlp
from sessions.ingest.importers import import_file
from sessions.ingest.recorded_requests import record_requests
from sessions.models import Project, Session
from tests.anthropic_rules import anthropic_request_problems
from tests.conftest import TRANSCRIPT_FILES, seeded_for_module

DATA = Path(__file__).resolve().parent / "data"
REQUEST_LOGS = sorted((DATA / "request-logs").glob("*.jsonl"))
OTLP_EXPORTS = sorted((DATA / "otlp").glob("*.pb"))
SHOWN = 15
EXPLAINED_FIELDS = ("seq", "role", "include_in_messages", "call_seq", "tool_call_id")


def receive(project: Project, path: Path) -> list[str]:
    """An OTLP export file received as /v1/traces receives it: decoded, each LLM span a request."""
    export = ExportTraceServiceRequest()
    export.ParseFromString(path.read_bytes())
    spans = otlp.spans_of(export)
    assert spans.captured and not spans.rejected, (path.name, spans.rejected)
    result = record_requests(project, spans.captured, "otlp")
    assert not result.rejected, result.rejected
    return result.sessions


@pytest.fixture(scope="module")
def data_sessions(django_db_setup, django_db_blocker) -> list[tuple[str, int]]:
    """(what it was made from, session id) of every session made from tests/data, once for the module."""
    with seeded_for_module(django_db_blocker):
        made = []
        for kind, paths in (("transcript", TRANSCRIPT_FILES), ("request log", REQUEST_LOGS), ("OTLP", OTLP_EXPORTS)):
            for path in paths:
                project = Project.objects.create(name=slugify(f"{kind}-{path.name}")[:100])
                if kind == "OTLP":
                    receive(project, path)
                else:
                    report = import_file(project, path, fmt="request-log" if kind == "request log" else "auto")
                    assert report.error is None, (path.name, report.error)
                made += [(f"{kind} {path.name}", pk) for pk in
                         Session.objects.filter(project=project).order_by("key").values_list("pk", flat=True)]
        yield made


def carried(rendered, fmt: str) -> tuple[int, int]:
    """(tool calls, tool results) a rendered input carries."""
    if fmt == "anthropic":
        blocks = [b for m in rendered["messages"] for b in m["content"] if isinstance(b, dict)]
        return sum(b["type"] == "tool_use" for b in blocks), sum(b["type"] == "tool_result" for b in blocks)
    if fmt == "openai-responses":
        return (sum(i["type"] == "function_call" for i in rendered),
                sum(i["type"] == "function_call_output" for i in rendered))
    return (sum(len(m.get("tool_calls") or ()) for m in rendered),
            sum(m["role"] == "tool" for m in rendered))


def problems_at(session, messages, checkpoints, as_of, basis) -> list[str]:
    """What is wrong with the session's input (on `basis`, as of `as_of`), in a sentence each."""
    found = []
    model_input = build_input(session, as_of=as_of, basis=basis)
    sent = {e.seq for e in model_input.entries if e.seq is not None}
    forms = {"as built": model_input, "as the pages lay it out": page_layout(session, checkpoints, as_of, basis)}
    for form, shape in forms.items():
        explained = explain_messages(messages, shape, checkpoints)
        in_input = {seq for seq, e in explained.items() if e.code == Reason.IN_INPUT}
        if in_input != sent:
            found.append(f"{form}: explained in_input but not in the input {sorted(in_input - sent)[:8]}, in the input "
                         f"but explained otherwise {sorted((s, explained[s].code) for s in sent - in_input)[:8]}")
        if shape.tokens != model_input.tokens:
            found.append(f"{form}: {shape.tokens} tokens, built {model_input.tokens}")
    calls = sum(len(e.tool_calls) for e in model_input.entries if e.kind != "instructions")
    results = sum(e.role == "tool" for e in model_input.entries)
    for fmt in FORMATS:
        try:
            body = model_input_response(model_input, fmt)
        except NothingToSend:
            # Anthropic takes no message without content (the GenAI instrumentation records a message
            # whose content was a list of parts as no content at all): only such messages may be left.
            empty = all(not e.content and not e.tool_calls for e in model_input.entries if e.kind != "instructions")
            if sent and not (fmt == "anthropic" and empty):
                found.append(f"{fmt}: nothing to send, with messages {sorted(sent)[:8]} in the input")
            continue
        rendered = {"messages": body["messages"], **({"system": body["system"]} if body["system"] else {})} \
            if fmt == "anthropic" else body["messages"]
        if body["basis"] != model_input.basis:
            found.append(f"{fmt}: basis {body['basis']}, built {model_input.basis}")
        if fmt == "ctxweb":
            shown = {m["seq"] for m in rendered if "seq" in m}
            awaiting = {model_input.awaiting.seq} if model_input.awaiting is not None else set()
            if shown != sent | awaiting:
                found.append(f"ctxweb: seqs {sorted(shown ^ (sent | awaiting))[:8]} differ from the input's")
            continue
        if fmt == "openai" and len(rendered) != len(model_input.entries):
            found.append(f"openai: {len(rendered)} messages for {len(model_input.entries)} entries")
        if carried(rendered, fmt) != (calls, results):
            found.append(f"{fmt}: carries (calls, results) {carried(rendered, fmt)}, the input {(calls, results)}")
        if fmt == "anthropic" and (refused := anthropic_request_problems(rendered)):
            found.append(f"anthropic: {refused[:3]}")
    return found


def test_explanation_and_input_agree_at_every_point_of_every_session_of_the_data(db, data_sessions):
    failures, points, bases = [], 0, set()
    for made_from, pk in data_sessions:
        session = Session.objects.select_related("project").get(pk=pk)
        messages = list(session.messages.order_by("seq").only(*EXPLAINED_FIELDS))
        checkpoints = checkpoints_of(session)
        for basis in ([RECORDED_REQUEST, RAW_LOG] if session.request_count else [RAW_LOG]):
            bases.add(basis)
            for as_of in [None, *range(1, session.message_count + 1)]:
                points += 1
                for problem in problems_at(session, messages, checkpoints, as_of, basis):
                    failures.append(f"{made_from} · {session.key} · {basis} · as of {as_of}: {problem}")
    assert bases == {RECORDED_REQUEST, RAW_LOG} and points > 5000
    if failures:
        pytest.fail(f"{len(failures)} problems at {points} points; the first {SHOWN}:\n" + "\n".join(failures[:SHOWN]),
                    pytrace=False)


def test_every_source_of_the_data_made_sessions(data_sessions):
    made = {made_from.split(" ")[0] for made_from, _ in data_sessions}
    assert made == {"transcript", "request", "OTLP"}
    otlp_sessions = [made_from for made_from, _ in data_sessions if made_from.startswith("OTLP")]
    assert {name.split(" ")[1].split("-")[0] for name in otlp_sessions} == {"openinference", "genai"}
