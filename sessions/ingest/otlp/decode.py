"""OTLP/HTTP export bodies decoded with the official `opentelemetry-proto` classes: the media type
checked, a compressed body inflated step by step within its bound, JSON or protobuf read into an
ExportTraceServiceRequest; and the receiver's responses encoded."""

import base64
import re
import zlib

from django.conf import settings
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from sessions.errors import DomainError, TooLarge

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = (PROTOBUF, JSON)
GENAI_CHAT_OPERATIONS = {"chat", "generate_content"}
GENAI_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
ROLES = {"system", "developer", "user", "assistant", "tool"}
MAX_COUNT = 2**63 - 1  # what a PositiveBigIntegerField holds
MAX_ERRORS_SHOWN = 3  # distinct reasons listed in partial_success.error_message
INFLATE_STEP = 1024 * 1024  # bytes of a compressed body read, and of its output made, at a time


class UnsupportedMediaType(DomainError):
    status = 415
    code = "unsupported_media_type"


class MalformedSpan(Exception):
    """A span of an LLM call whose messages cannot be read: it alone is rejected."""


# --- decoding the export ----------------------------------------------------------------------------


def media_type(content_type: str) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_content_type(content_type: str) -> str:
    kind = media_type(content_type)
    if kind not in CONTENT_TYPES:
        raise UnsupportedMediaType(
            f"Send OTLP/HTTP traces as {PROTOBUF} or {JSON}, not {kind or 'no Content-Type'}.",
        )
    return kind


def decompressed(body: bytes, content_encoding: str) -> bytes | bytearray:
    """The body without its Content-Encoding (gzip, deflate or none), never larger than
    CTXWEB_MAX_REQUEST_BYTES: a small gzip body that unpacks to gigabytes is refused once it has unpacked
    past the limit, having held at most the limit and one step (INFLATE_STEP) of output."""
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or none.")
    limit = settings.CTXWEB_MAX_REQUEST_BYTES
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    data = bytearray()
    try:
        for start in range(0, len(body), INFLATE_STEP):
            pending = body[start:start + INFLATE_STEP]
            while True:
                room = min(INFLATE_STEP, limit + 1 - len(data))
                piece = inflater.decompress(pending, room)
                data += piece
                if len(data) > limit:
                    raise TooLarge(f"The body unpacks to more than {limit} bytes (CTXWEB_MAX_REQUEST_BYTES).",
                                   code="request_too_large")
                pending = inflater.unconsumed_tail
                if not pending and len(piece) < room:  # else zlib may hold more output of what it read
                    break
            if inflater.eof:
                break
    except zlib.error:
        raise DomainError(f"The body is not valid {encoding}.", code="invalid_encoding", status=400) from None
    if not inflater.eof:
        raise DomainError(f"The {encoding} body is truncated.", code="invalid_encoding", status=400)
    return data


def _hex_to_base64(value, name: str):
    if not isinstance(value, str) or value == "":
        return value
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise DomainError(f"{name} must be a hex string in OTLP/JSON, not {value[:40]!r}.",
                          code="invalid_otlp", status=400) from None
    return base64.b64encode(raw).decode()


def _ids_to_base64(item: dict, names: tuple[str, ...]) -> None:
    for name in names:
        for key in (name, re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)):
            if key in item:
                item[key] = _hex_to_base64(item[key], name)


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _from_json(data: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON is protobuf's JSON mapping with two differences: trace and span ids are hex strings
    (protobuf would read base64), and enums may be given as integers (protobuf reads both)."""
    from sessions.wire.json_body import load_json_body

    document = load_json_body(data)
    if not isinstance(document, dict):
        raise DomainError("An OTLP/JSON body is an object with resourceSpans.", code="invalid_otlp", status=400)
    for resource in _list(document.get("resourceSpans", document.get("resource_spans"))):
        if not isinstance(resource, dict):
            continue
        for scope in _list(resource.get("scopeSpans", resource.get("scope_spans"))):
            if not isinstance(scope, dict):
                continue
            for span in _list(scope.get("spans")):
                if not isinstance(span, dict):
                    continue
                _ids_to_base64(span, ("traceId", "spanId", "parentSpanId"))
                for link in _list(span.get("links")):
                    if isinstance(link, dict):
                        _ids_to_base64(link, ("traceId", "spanId"))
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise DomainError(f"The body is not an OTLP/JSON trace export: {str(exc)[:300]}",
                          code="invalid_otlp", status=400) from None
    return message


def decode_export(body: bytes, content_type: str, content_encoding: str = "") -> ExportTraceServiceRequest:
    kind = check_content_type(content_type)
    data = decompressed(body, content_encoding)
    if kind == JSON:
        return _from_json(data)
    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError):
        raise DomainError("The body is not an OTLP protobuf trace export.", code="invalid_otlp", status=400) from None
    return message


def encode_response(kind: str, rejected: int = 0, error_message: str = "") -> tuple[bytes, str]:
    """ExportTraceServiceResponse in the request's encoding; partial_success only when it says something."""
    response = ExportTraceServiceResponse()
    if rejected or error_message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = error_message
    if kind == JSON:
        return json_format.MessageToJson(response, indent=None).encode(), JSON
    return response.SerializeToString(), PROTOBUF


def encode_status(kind: str, code: int, message: str) -> tuple[bytes, str]:
    """The google.rpc.Status body OTLP/HTTP gives with every 4xx/5xx, in the request's encoding (JSON
    when the request's own encoding is unknown)."""
    from google.rpc.status_pb2 import Status

    status = Status(code=code, message=message)
    if kind == PROTOBUF:
        return status.SerializeToString(), PROTOBUF
    return json_format.MessageToJson(status, indent=None).encode(), JSON


