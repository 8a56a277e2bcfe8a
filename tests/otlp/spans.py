"""OTLP trace exports built with the official protobuf classes, as an exporter builds them."""

import base64
import json
import os

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
SECOND = 1_000_000_000
T0 = 1_790_000_000 * SECOND


def any_value(value) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=key_values(value)))
    return AnyValue(string_value=value)


def key_values(attrs: dict) -> list[KeyValue]:
    return [KeyValue(key=k, value=any_value(v)) for k, v in attrs.items()]


def span(attrs: dict, *, span_id: bytes | None = None, trace_id: bytes = TRACE, start: int = T0,
         events: list[tuple[str, dict]] = (), name: str = "ChatCompletion") -> Span:
    return Span(
        trace_id=trace_id, span_id=span_id or os.urandom(8), name=name, kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=start, end_time_unix_nano=start + SECOND // 2, attributes=key_values(attrs),
        events=[Span.Event(name=n, time_unix_nano=start, attributes=key_values(a)) for n, a in events],
    )


def export(*spans: Span) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[
        ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))]),
    ])


def as_otlp_json(message: ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON: protobuf's JSON mapping, except that trace and span ids are hex, not base64."""
    document = json_format.MessageToDict(message)
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for item in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in item:
                        item[key] = base64.b64decode(item[key]).hex()
    return json.dumps(document).encode()


def openinference(messages: list[dict], output: list[dict] = (), session: str | None = "chat-1",
                  **extra) -> dict:
    """OpenInference attributes of an LLM span, flattened as the instrumentors write them."""
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-test", "llm.provider": "openai"}
    if session:
        attrs["session.id"] = session
    for prefix, items in (("llm.input_messages", messages), ("llm.output_messages", output)):
        for i, message in enumerate(items):
            for key, value in message.items():
                attrs[f"{prefix}.{i}.message.{key}"] = value
    return {**attrs, **extra}
