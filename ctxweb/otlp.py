"""POST /v1/traces: the OTLP/HTTP trace receiver, where an application's OpenTelemetry exporter sends
its spans (OTEL_EXPORTER_OTLP_ENDPOINT=https://ctxweb.example, or ..._TRACES_ENDPOINT=.../v1/traces).

Authenticated like the API (Authorization: Bearer <key>, the same brute-force throttle and rate
limits), answered the way OTLP/HTTP clients expect: ExportTraceServiceResponse in the request's
encoding, with partial_success for rejected spans, and a google.rpc.Status body with every error.
"""

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt

from sessions.access import rate_limits
from sessions.errors import DomainError
from sessions.ingest import otlp
from sessions.ingest.recorded_requests import record_requests
from sessions.store.events import actor

from .api import ApiKeyAuth

logger = logging.getLogger("ctxweb.otlp")
# google.rpc.Code values for the Status body.
RPC_CODE = {400: 3, 401: 16, 404: 5, 405: 12, 411: 3, 413: 8, 415: 3, 422: 3, 429: 8, 500: 13}


def _status(kind: str, status: int, message: str, retry_after: int | None = None) -> HttpResponse:
    body, content_type = otlp.encode_status(kind, RPC_CODE.get(status, 2), message)
    response = HttpResponse(body, status=status, content_type=content_type)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


@csrf_exempt
def receive_traces(request) -> HttpResponse:
    kind = otlp.media_type(request.content_type)
    if request.method != "POST":
        response = _status(kind, 405, "POST an OTLP trace export here.")
        response["Allow"] = "POST"
        return response
    if request.META.get("HTTP_TRANSFER_ENCODING"):
        return _status(kind, 411, "Send the body with a Content-Length header, not chunked.")
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = -1
    if length < 0:
        return _status(kind, 400, "Content-Length is not a size in bytes.")
    if length > settings.CTXWEB_MAX_REQUEST_BYTES:
        return _status(kind, 413, f"The request body is larger than {settings.CTXWEB_MAX_REQUEST_BYTES} bytes.")
    try:
        otlp.check_content_type(request.content_type)  # before anything reads the body (a form would be parsed)
        request.auth = ApiKeyAuth()(request)
        body = request.body
        data = otlp.decompressed(body, request.headers.get("Content-Encoding", ""))
        # The bytes rate limit counts what the body unpacks to, not what it was sent as.
        rate_limits.admit_unpacked(request.auth, len(body), len(data))
        export = otlp.decode_export(data, request.content_type)
        spans = otlp.spans_of(export)
        stored = _store(request.auth.project, spans, actor(request))
    except RequestDataTooBig:
        return _status(kind, 413, "The request body is too large (CTXWEB_MAX_REQUEST_BYTES).")
    except DomainError as exc:
        request.rate_limit = getattr(exc, "quota", None) or getattr(request, "rate_limit", None)
        return _status(kind, exc.status, exc.detail, getattr(exc, "retry_after", None))
    except Exception:
        logger.exception("unhandled error in POST /v1/traces")
        return _status(kind, 500, "Internal error; it was logged.")
    logger.info("otlp export: %s stored, %s rejected, %s ignored", stored, len(spans.rejected), spans.ignored)
    body, content_type = otlp.encode_response(kind, len(spans.rejected), spans.error_message())
    return HttpResponse(body, content_type=content_type)


def _store(project, spans: otlp.Spans, who: str) -> int:
    """Each conversation's requests are recorded together, in their session's transaction, at most
    CTXWEB_MAX_CAPTURE_MESSAGES messages a conversation (record_requests' bound: what holds one session's
    lock; the whole export is bounded by its size, CTXWEB_MAX_REQUEST_BYTES). A request record_requests
    refuses (messages that are not valid OpenAI messages, or past the bound) is a rejected span; so are a
    conversation's spans when its session cannot take them (a 4xx from the domain), while the other
    conversations are kept."""
    by_conversation: dict[str, list] = {}
    for request in spans.captured:
        by_conversation.setdefault(request.conversation, []).append(request)
    stored = 0
    for conversation, requests in by_conversation.items():
        try:
            result = record_requests(project, requests, who)
        except DomainError as exc:
            if exc.status >= 500 or exc.status in (401, 429):
                raise
            spans.rejected.extend([f"conversation {conversation[:80]!r}: {exc.detail}"] * len(requests))
            continue
        stored += result.stored
        spans.rejected.extend(result.rejected)
    return stored
