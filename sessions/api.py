"""HTTP API v1: a thin layer over the domain modules."""

import base64
import binascii
import json
from datetime import datetime
from typing import Literal

import orjson
from django.db.models import Q
from django.http import HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags
from ninja import Path, Query, Router
from ninja.renderers import JSONRenderer
from ninja.responses import NinjaJSONEncoder, Status
from pydantic_core import PydanticCustomError

from . import schemas as s
from .append import append_messages
from .compaction import compact_if_needed
from .compaction_runs import request_compaction as enqueue_requested_compaction
from .compaction_runs import run_outcome
from .errors import DomainError, NotFound
from .events import actor
from .exports import export_response
from .formats import model_input_response, stored_openai_response
from .inspection import with_explanations
from .listing import SessionFilters, find_sessions
from .message_edits import update_message
from .message_sizes import first_page
from .model_input import (
    TEXT_AS_STORED_FORMATS,
    StoredText,
    build_model_input,
    check_as_of,
    latest_checkpoint,
    model_input_tag,
)
from .models import CompactionRun, Session
from .next_request import build_request
from .recorded_input import RECORDED_REQUEST, build_recorded_input, check_basis
from .request_records import get_request, render_request, request_page
from .schemas import utc_datetime
from .session_store import check_key, get_session, update_session
from .trace import trace as trace_fact
from .validation import count_openai_messages
from .waiting import key_holder, wait_once
from .what_if import preview_compaction, why_skipped

router = Router(tags=["sessions"])
RENDERER = JSONRenderer()

# 429: the caller's address has too many failed API keys (sessions/throttle.py).
ERRORS = {400: s.ErrorOut, 401: s.ErrorOut, 404: s.ErrorOut, 413: s.ErrorOut, 422: s.ErrorOut, 429: s.ErrorOut}
WRITE_ERRORS = {**ERRORS, 409: s.ErrorOut}


# --- OpenAPI links -------------------------------------------------------------------------------
# Which values of a response feed the next call: they document the API's workflows, and schemathesis's
# stateful tests follow them. Targets are the operationIds ninja gives the view functions below.


def link(view: str, request_body: dict | None = None, **parameters: str) -> dict:
    target = {"operationId": f"sessions_api_{view}", "parameters": parameters}
    return target if request_body is None else {**target, "requestBody": request_body}


def session_links(key: str = "$request.path.key") -> dict:
    """From a response about one session to every operation on that session."""
    return {
        "GetSession": link("get_one_session", key=key),
        "UpdateSession": link("put_session", key=key),
        "AppendMessages": link("append", key=key),
        "GetRawLog": link("raw_log", key=key),
        "GetModelInput": link("model_input", key=key),
        "Compact": link("request_compaction", key=key),
        "BuildRequest": link("build_next_request", key=key),
        "ListCheckpoints": link("list_checkpoints", key=key),
        "ListEvents": link("list_events", key=key),
        "ListRequests": link("list_requests", key=key),
        "Export": link("export", key=key),
        "Trace": link("trace", key=key, q=key),  # where the session's own key turns up in it
    }


def message_links(seq: str) -> dict:
    """From a response naming a stored message (by a JSON pointer to its seq) to that message."""
    return {
        "PatchMessage": link("patch_message", key="$request.path.key", seq=seq),
        "GetModelInputAsOf": link("model_input", key="$request.path.key", as_of=seq),
        "GetRawLogAfter": link("raw_log", key="$request.path.key", after=seq),
    }


def run_link(run_id: str) -> dict:
    """To the compaction run a response names."""
    return link("compaction_run", key="$request.path.key", run_id=run_id)


def links(*statuses: int, **named: dict) -> dict:
    """openapi_extra for an operation whose `statuses` responses carry these links."""
    return {"responses": {status: {"links": named} for status in statuses}}


def project(request):
    return request.auth.project


# --- sessions ------------------------------------------------------------------------------------


@router.put("/sessions/{key}", response={200: s.SessionOut, 201: s.SessionOut, **WRITE_ERRORS},
            summary="Create or update a session", openapi_extra=links(200, 201, **session_links()))
def put_session(request, key: str, body: s.SessionIn):
    data = body.model_dump(exclude_unset=True)
    session, created = update_session(project(request), key, data, actor(request))
    return Status(201 if created else 200, session)


@router.get("/sessions/{key}", response={200: s.SessionOut, **ERRORS}, summary="One session with its counts",
            openapi_extra=links(200, **session_links()))
def get_one_session(request, key: str):
    return get_session(project(request), key)


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    invalid = DomainError("cursor is not valid; use next_cursor from the previous page", code="invalid_cursor")
    try:
        stamp, pk = base64.urlsafe_b64decode(cursor.encode() + b"==").decode().split("|")
        stamp, pk = datetime.fromisoformat(stamp), int(pk)
        if stamp.tzinfo is None or not 0 < pk < 2**63:
            raise invalid
        return utc_datetime(stamp), pk
    except (ValueError, UnicodeDecodeError, binascii.Error, OverflowError, DomainError, PydanticCustomError):
        raise invalid from None


def _encode_cursor(session: Session) -> str:
    return base64.urlsafe_b64encode(f"{session.last_activity_at.isoformat()}|{session.pk}".encode()).decode().rstrip("=")


@router.get("/sessions", response={200: s.SessionListOut, **ERRORS}, summary="List sessions, most recently active first",
            openapi_extra=links(200, **session_links("$response.body#/items/0/key"),
                                NextPage=link("list_sessions", cursor="$response.body#/next_cursor")))
def list_sessions(
    request,
    q: str = Query("", max_length=200, description="search: text in the key, title or metadata, a tag's name, or words of a message or a note"),
    limit: int = Query(50, ge=1, le=200),
    cursor: str = Query("", max_length=200),
    lost_facts: bool = Query(False, description="only sessions whose latest checkpoint's summary lost salient literals"),
):
    qs = find_sessions([project(request).pk], SessionFilters(q=q, lost_facts=lost_facts))
    if cursor:
        stamp, pk = _decode_cursor(cursor)
        qs = qs.filter(Q(last_activity_at__lt=stamp) | Q(last_activity_at=stamp, pk__lt=pk))
    page = list(qs.order_by("-last_activity_at", "-pk")[: limit + 1])
    next_cursor = _encode_cursor(page[limit - 1]) if len(page) > limit else None
    return {"items": page[:limit], "next_cursor": next_cursor}


# --- messages ------------------------------------------------------------------------------------


@router.post("/sessions/{key}/messages", response={200: s.AppendOut, **WRITE_ERRORS},
              summary="Append a batch of messages (all or nothing)",
              openapi_extra=links(200, **session_links(), **message_links("$response.body#/messages/0/seq"),
                                  GetCompactionRun=run_link("$response.body#/compaction/id")))
def append(request, key: str, body: s.AppendIn):
    check_key(key)
    result = append_messages(project(request), key, body.messages, actor(request), fmt=body.format,
                             system=body.system)
    run = compact_if_needed(result.session, actor(request)) if result.stored_count else None
    if run is not None:
        run.refresh_from_db()  # a worker may have taken it on already
    return {
        "session": result.session.key,
        "session_created": result.session_created,
        "messages": result.messages,
        "compaction": run,
    }


@router.get("/sessions/{key}/messages", response={200: s.MessagePageOut, **ERRORS}, summary="The raw log, in seq order, each message with its explain (where it is in the model input, or why not)",
            openapi_extra=links(200, **message_links("$response.body#/items/0/seq"),
                                NextPage=link("raw_log", key="$request.path.key", after="$response.body#/next_after")))
def raw_log(request, key: str, after: int = Query(0, ge=0, le=2_000_000_000), limit: int = Query(100, ge=1, le=500)):
    session = get_session(project(request), key)
    # A page may stop before `limit` (message_sizes.PAGE_CHARS); next_after then says where the next starts.
    page, more = first_page(session.messages.filter(seq__gt=after), limit)
    next_after = page[-1].seq if more and page[-1].seq < session.message_count else None
    return {"items": with_explanations(session, page), "next_after": next_after}


@router.patch("/sessions/{key}/messages/{seq}", response={200: s.MessageOut, **ERRORS},
              summary="Change include_in_messages and/or attributes of a stored message",
              openapi_extra=links(200, **session_links(), **message_links("$response.body#/seq")))
def patch_message(request, key: str, seq: int, body: s.MessagePatchIn):
    message = update_message(project(request), key, seq, body.model_dump(exclude_unset=True), actor(request))
    return with_explanations(get_session(project(request), key), [message])[0]


# --- model input, compaction, tokens, requests ---------------------------------------------------


def matches(if_none_match: str, tag: str) -> bool:
    """If-None-Match against our tag, compared weakly (RFC 9110 13.1.2)."""
    tags = parse_etags(if_none_match)
    return "*" in tags or any(t.removeprefix("W/") == tag for t in tags)


@router.get("/sessions/{key}/model-input", response={200: s.ModelInputOut, 304: None, **ERRORS, 409: s.ErrorOut},
            summary="The model input: what the application sent (sessions rebuilt from recorded requests), or the "
                    "latest checkpoint plus the messages after it",
            description="Answers with an ETag of the session's state; sent back in If-None-Match, an unchanged "
                        "input is answered 304 with no body, without building it. `basis` in the answer says where "
                        "it comes from.",
            openapi_extra=links(200, CountTokens=link("count_tokens", {"messages": "$response.body#/messages"})))
def model_input(
    request, response: HttpResponse, key: str, format: s.FormatName = "ctxweb",
    as_of: int | None = Query(None, ge=0, le=2_000_000_000),
    basis: Literal["recorded_request", "raw_log"] | None = Query(None, description=(
        "recorded_request: what the application sent (the default of a session rebuilt from recorded requests); "
        "raw_log: what ctxweb builds from the raw log by its own rules (the default of every other session)")),
):
    session = get_session(project(request), key)
    check_as_of(session, as_of)
    basis = check_basis(session, basis)
    tag = model_input_tag(session, format, as_of, basis)
    # Per API key, and to be asked again each time: the tag, not an age, says whether it is still good.
    headers = {"ETag": tag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
    if matches(request.headers.get("If-None-Match", ""), tag):
        return HttpResponseNotModified(headers=headers)
    for name, value in headers.items():
        response[name] = value
    # A session never compacted has no checkpoint to look up: the count moves with every checkpoint stored,
    # and the tag above was made from the same row.
    if basis == RECORDED_REQUEST:
        return model_input_json(request, response, model_input_response(
            build_recorded_input(session, as_of=as_of), format))
    checkpoint = None if not session.checkpoint_count else False
    if format == "openai" and as_of is None and not session.request_count:  # its figures are of this basis
        checkpoint = checkpoint if checkpoint is None else latest_checkpoint(session)
        if (body := stored_openai_response(session, checkpoint)) is not None:
            return model_input_json(request, response, body)
    return model_input_json(request, response, model_input_response(
        build_model_input(session, as_of=as_of, checkpoint=checkpoint,
                          text_as_stored=format in TEXT_AS_STORED_FORMATS), format))


def model_input_json(request, response: HttpResponse, body: dict) -> HttpResponse:
    """The model input's response, as ninja would render it from ModelInputOut, without walking its
    messages through the schema: they are plain JSON values our renderers made (sessions/formats.py),
    which the schema takes as they are (a list of dicts of anything), and validating and dumping them
    again cost as much as serializing them. Every other field goes through the schema and the API's
    renderer (ninja's), in the schema's order; the messages are serialized by orjson (messages_json).
    tests/api/test_model_input.py compares the response with ninja's own rendering."""
    head = s.ModelInputOut.model_validate({**body, "messages": []}).model_dump()

    def field(name, value) -> bytes:
        value = messages_json(body["messages"]) if name == "messages" else render(value)
        return render(name) + b": " + value

    def render(value) -> bytes:
        return RENDERER.render(request, value, response_status=200).encode()

    response.content = b"{" + b", ".join(field(name, value) for name, value in head.items()) + b"}"
    return response


def messages_json(messages: list) -> bytes:
    """The model input's messages as JSON. orjson writes them about 15 times as fast as the standard
    library (a 727-message input: 0.07 against 1.0 ms), which was the largest step of a fetch after the
    read; it writes UTF-8 rather than \\u escapes, and no spaces. A string content read as stored
    (StoredText) goes in as the JSON text it is stored as. What orjson refuses (an integer past 64
    bits, a lone surrogate stored on SQLite) goes through the standard library, as before."""
    try:
        return orjson.dumps(messages, default=_as_stored)
    except orjson.JSONEncodeError:
        return json.dumps(messages, cls=_StoredTextEncoder).encode()


def _as_stored(value):
    if type(value) is StoredText:
        return orjson.Fragment(value.json)
    raise TypeError


class _StoredTextEncoder(NinjaJSONEncoder):
    def default(self, o):
        return json.loads(o.json) if type(o) is StoredText else super().default(o)


@router.post("/sessions/{key}/compact",
             response={200: s.CompactionOut | s.CompactionPreviewOut, 202: s.CompactionRunOut, **WRITE_ERRORS},
             summary="Request compaction; it runs on a background worker, waited for up to a bound. With dry_run, "
                     "say what it would do and store nothing",
             openapi_extra={"responses": {
                 **links(200, **session_links(),
                         GetModelInputAsOf=link("model_input", key="$request.path.key",
                                                as_of="$response.body#/checkpoint/created_at_seq"))["responses"],
                 **links(202, GetCompactionRun=run_link("$response.body#/id"))["responses"]}})
def request_compaction(request, key: str, body: s.CompactIn):
    session = get_session(project(request), key)
    options = body.model_dump(exclude={"wait", "dry_run"}, exclude_none=True)
    if body.dry_run:
        return preview_compaction(session, **options)
    run = enqueue_requested_compaction(session, actor(request), **options)
    if body.wait:
        run = wait_once(run, key_holder(request.auth))  # one waiting request per key (sessions/waiting.py)
    else:
        run.refresh_from_db()
    if run.state in CompactionRun.ACTIVE:
        return Status(202, run)
    outcome = run_outcome(run)
    if outcome is not None and outcome.status == "skipped":
        outcome.explanation = why_skipped(session, outcome.reason, **options) or ""
    return outcome


@router.get("/sessions/{key}/compactions/{run_id}", response={200: s.CompactionRunOut, **ERRORS},
            summary="One compaction run: its state, attempts, last error, and outcome when finished",
            openapi_extra=links(200, **session_links()))
def compaction_run(request, key: str, run_id: int = Path(..., ge=1, le=9_000_000_000_000_000_000)):
    session = get_session(project(request), key)
    run = CompactionRun.objects.filter(session=session, pk=run_id).select_related("session").first()
    if run is None:
        raise NotFound(f"no compaction run {run_id} in session {key!r}")
    return run


@router.get("/ping", response={200: s.PingOut, **ERRORS}, summary="Check an API key: which project and key it is",
            openapi_extra=links(200, ListSessions=link("list_sessions")))
def ping(request):
    """Authenticates like every other call (key lookup, brute-force check, rate limit) and reads nothing
    else: a client's cheapest check of its key and the server, and the benchmark's HTTP floor."""
    key = request.auth
    return {"project": key.project.name, "key": key.name, "key_prefix": key.prefix}


@router.post("/tokens", response={200: s.TokensOut, **ERRORS}, summary="Count tokens of an OpenAI-format message list")
def count_tokens(request, body: s.TokensIn):
    total, per_message = count_openai_messages(body.messages)
    return {"total": total, "messages": per_message}


@router.post("/sessions/{key}/requests", response={200: s.RequestOut, **WRITE_ERRORS},
             summary="Build the next request: store messages, compact if needed, return the model input",
             openapi_extra=links(200, **session_links(), **message_links("$response.body#/stored/0/seq"),
                                 CountTokens=link("count_tokens", {"messages": "$response.body#/model_input/messages"}),
                                 GetCompactionRun=run_link("$response.body#/compaction/id")))
def build_next_request(request, key: str, body: s.RequestIn):
    check_key(key)
    built = build_request(
        project(request), key, instructions=body.instructions, messages=body.messages,
        fmt=body.format, message_format=body.message_format, actor=actor(request),
        waiter=key_holder(request.auth),
    )
    return {
        "model_input": model_input_response(built.model_input, body.format),
        "stored": built.appended.messages if built.appended else [],
        "compaction": built.compaction,
        "compaction_in_progress": built.compaction_in_progress,
        "event_id": built.event.pk,
    }


# --- recorded requests ---------------------------------------------------------------------------


@router.get("/sessions/{key}/requests", response={200: s.RecordedRequestListOut, **ERRORS},
            summary="The requests the application sent, captured from outside (OpenTelemetry spans, request logs), "
                    "in order: time, model, token figures ours and the provider's, what each dropped",
            openapi_extra=links(200, GetRequest=link("recorded_request", key="$request.path.key",
                                                     number="$response.body#/items/0/number"),
                                NextPage=link("list_requests", key="$request.path.key",
                                              after="$response.body#/next_after")))
def list_requests(request, key: str, after: int = Query(0, ge=0, le=2_000_000_000),
                  limit: int = Query(100, ge=1, le=500)):
    session = get_session(project(request), key)
    page, next_after = request_page(session, after, limit)
    return {"items": page, "next_after": next_after}


@router.get("/sessions/{key}/requests/{number}", response={200: s.RecordedRequestOut, **ERRORS},
            summary="One recorded request: its messages in any model-input format (openai: exactly as sent), its "
                    "response, parameters, and the raw seq each message matched",
            openapi_extra=links(200, **session_links()))
def recorded_request(request, key: str, number: int = Path(..., ge=1, le=2_000_000_000),
                     format: s.FormatName = "openai"):
    session = get_session(project(request), key)
    return render_request(session, get_request(session, number), format)


# --- checkpoints, events, export -----------------------------------------------------------------


@router.get("/sessions/{key}/checkpoints", response={200: s.CheckpointListOut, **ERRORS}, summary="Checkpoints, newest first",
            openapi_extra=links(200, GetModelInputAsOf=link("model_input", key="$request.path.key",
                                                            as_of="$response.body#/items/0/created_at_seq")))
def list_checkpoints(request, key: str):
    session = get_session(project(request), key)
    return {"items": list(session.checkpoints.order_by("-last_seq"))}


@router.get("/sessions/{key}/events", response={200: s.EventListOut, **ERRORS},
            summary="Events in order; type filters by exact type, or by prefix when it ends with _",
            openapi_extra=links(200, NextPage=link("list_events", key="$request.path.key",
                                                   after="$response.body#/next_after")))
def list_events(
    request,
    key: str,
    type: str = Query("", max_length=40, description="e.g. COMPACTION_COMPLETED, or COMPACTION_ for every compaction event"),
    after: int = Query(0, ge=0, le=9_000_000_000_000_000_000),
    limit: int = Query(200, ge=1, le=1000),
):
    session = get_session(project(request), key)
    qs = session.events.filter(pk__gt=after)
    if type:
        qs = qs.filter(type__startswith=type) if type.endswith("_") else qs.filter(type=type)
    page = list(qs.order_by("pk")[:limit])
    return {"items": page, "next_after": page[-1].pk if len(page) == limit else None}


@router.get("/sessions/{key}/trace", response={200: s.TraceOut, **ERRORS},
            summary="Trace a string: the messages that hold it, whether the model input still carries it, and "
                    "which summary lost it",
            openapi_extra=links(200, **session_links(), **message_links("$response.body#/messages/0/seq")))
def trace(request, key: str, q: str = Query(..., min_length=1, max_length=200,
                                            description="a literal string; * stands for any run of non-space characters")):
    return trace_fact(get_session(project(request), key), q)


EXPORT_RESPONSES = {
    200: {
        "description": "The session: json (lossless, re-importable), jsonl, or markdown; each with its tags and notes",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/markdown": {"schema": {"type": "string"}},
        },
    }
}


@router.get("/sessions/{key}/export", response={**ERRORS}, openapi_extra={"responses": EXPORT_RESPONSES},
            summary="Export one session")
def export(request, key: str, format: str = Query("json", pattern="^(json|jsonl|markdown)$")):
    session = get_session(project(request), key)
    return export_response(session, format)
