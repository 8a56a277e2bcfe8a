"""Spans of an export turned into CapturedRequests (sessions.ingest.recorded_requests): one per span
of an LLM call, its session key from the conversation id; other spans counted, unreadable ones rejected
with why."""

import hashlib
import re
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from sessions.ingest.otlp.conventions import (
    _no_nul,
    _time,
    attributes,
    convention,
    genai_request,
    openinference_request,
)
from sessions.ingest.otlp.decode import MAX_ERRORS_SHOWN, MalformedSpan
from sessions.ingest.recorded_requests import CapturedRequest
from sessions.models import SESSION_KEY_RE


@dataclass
class Spans:
    """What an export's spans became: requests to store, spans rejected (with why), spans ignored."""

    captured: list[CapturedRequest] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    ignored: int = 0

    def error_message(self) -> str:
        """partial_success.error_message: why spans were rejected (a few distinct reasons), and how
        many were not LLM calls (accepted, not stored). Empty when every span was stored."""
        notes = []
        if self.rejected:
            reasons = list(dict.fromkeys(self.rejected))
            shown = "; ".join(reasons[:MAX_ERRORS_SHOWN])
            more = f" (and {len(reasons) - MAX_ERRORS_SHOWN} more reasons)" if len(reasons) > MAX_ERRORS_SHOWN else ""
            notes.append(f"{len(self.rejected)} LLM span(s) rejected: {shown}{more}.")
        if self.ignored:
            notes.append(f"{self.ignored} span(s) ignored: not LLM calls (accepted, not stored).")
        return " ".join(notes)


def session_key(conversation: str) -> str:
    """The session key for a session or conversation id: the id itself when it is a valid key, else
    the id with every other character made "-" and a digest of the id appended, so that two ids that
    differ only there stay two sessions."""
    if re.fullmatch(SESSION_KEY_RE, conversation):
        return conversation
    digest = hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9._:@-]+", "-", conversation).strip("-.")[:180]
    return f"{readable}-{digest}" if readable else f"session-{digest}"


def captured_request(span) -> CapturedRequest | None:
    """The request one span records, None for a span that is not an LLM call; MalformedSpan when it is
    one whose messages cannot be read."""
    attrs = attributes(span.attributes)
    kind = convention(attrs, span.events)
    if not kind:
        return None
    read = openinference_request(attrs) if kind == "openinference" else genai_request(attrs, span.events)
    if not read["messages"]:
        raise MalformedSpan("it carries no input messages (turn on the instrumentation's message content capture)")
    _no_nul([read["messages"], read["response"]], "its messages")
    trace_id = span.trace_id.hex()
    conversation = read.pop("conversation")
    if not isinstance(conversation, str | int) or isinstance(conversation, bool) or conversation == "":
        conversation = f"trace-{trace_id}"
    conversation = session_key(str(conversation))
    parameters = read["parameters"]
    _no_nul(parameters, "its parameters")
    return CapturedRequest(
        conversation=str(conversation),
        external_id=span.span_id.hex(),
        source="otlp",
        started_at=_time(span.start_time_unix_nano),
        ended_at=_time(span.end_time_unix_nano) if span.end_time_unix_nano else None,
        trace_id=trace_id,
        model=str(read["model"])[:200],
        provider=str(read["provider"])[:100],
        **{k: read[k] for k in ("messages", "response", "parameters", "usage_input_tokens", "usage_output_tokens")},
    )


def spans_of(export: ExportTraceServiceRequest) -> Spans:
    result = Spans()
    for resource_spans in export.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                try:
                    if len(span.span_id) != 8 or len(span.trace_id) != 16:
                        if convention(attributes(span.attributes), span.events):
                            raise MalformedSpan("its trace or span id is missing")
                    request = captured_request(span)
                except MalformedSpan as exc:
                    result.rejected.append(f"span {span.span_id.hex() or '?'}: {exc}")
                    continue
                if request is None:
                    result.ignored += 1
                else:
                    result.captured.append(request)
    return result


