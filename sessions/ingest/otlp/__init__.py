"""OpenTelemetry traces in: an OTLP/HTTP export body decoded with the official `opentelemetry-proto`
classes, and each span of an LLM call turned into a CapturedRequest (sessions.ingest.recorded_requests).

Two conventions are read:
- OpenInference (`openinference.span.kind` = LLM): messages flattened into attributes,
  `llm.input_messages.{i}.message.{role,content,contents.{j}...,tool_calls.{k}...,tool_call_id,name}`.
- OpenTelemetry GenAI (`gen_ai.operation.name` = chat): `gen_ai.input.messages` / `gen_ai.output.messages`
  as JSON parts, `gen_ai.system_instructions`, or the older per-message span events
  (`gen_ai.user.message`, `gen_ai.choice`, ...).
Both become OpenAI Chat Completions message objects with one key order: role, content, name,
tool_calls ({id, type: "function", function: {name, arguments}}), tool_call_id.

Other spans (HTTP, database, agent steps) are accepted and only counted. A span of an LLM call that
cannot be read (malformed messages, content capture turned off) is rejected on its own: the rest of
the export is kept, and the OTLP response's partial_success says how many and why.

The work is done in three steps, one module each: decode.py (the body into an
ExportTraceServiceRequest), conventions.py (a span's attributes and events into OpenAI messages) and
requests.py (the spans into CapturedRequests). The names callers use are named here.
"""

from sessions.ingest.otlp.conventions import convention, genai_request, openinference_request
from sessions.ingest.otlp.decode import (
    CONTENT_TYPES,
    JSON,
    PROTOBUF,
    MalformedSpan,
    UnsupportedMediaType,
    check_content_type,
    decode_export,
    decompressed,
    encode_response,
    encode_status,
    media_type,
)
from sessions.ingest.otlp.requests import Spans, captured_request, session_key, spans_of

__all__ = [
    "CONTENT_TYPES", "JSON", "PROTOBUF", "MalformedSpan", "Spans", "UnsupportedMediaType", "captured_request",
    "check_content_type", "convention", "decode_export", "decompressed", "encode_response", "encode_status",
    "genai_request", "media_type", "openinference_request", "session_key", "spans_of",
]
