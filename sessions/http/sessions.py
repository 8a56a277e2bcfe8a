"""The sessions resource: create or update one, read one, list them; and what hangs off one session
whole: its checkpoints, its events, trace a fact, export."""

import base64
import binascii
from datetime import datetime

from django.db.models import Q
from ninja import Query, Router
from ninja.responses import Status
from pydantic_core import PydanticCustomError

from sessions.access.masking_policy import seeks_masked
from sessions.context.exports import export_response
from sessions.context.trace import trace as trace_fact
from sessions.errors import DomainError
from sessions.http import schemas as s
from sessions.http.common import (
    ERRORS,
    WRITE_ERRORS,
    link,
    links,
    message_links,
    project,
    session_links,
)
from sessions.http.schemas import utc_datetime
from sessions.ingest.session_store import get_session, update_session
from sessions.models import Session
from sessions.store.events import actor
from sessions.store.listing import SessionFilters, find_sessions

router = Router(tags=["sessions"])


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
    pinned_lost: bool = Query(False, description="only sessions whose latest checkpoint's summary does not carry a "
                              "pinned fact of the messages it covers (made before the fact was pinned)"),
):
    qs = find_sessions([project(request).pk], SessionFilters(q=q, lost_facts=lost_facts, pinned_lost=pinned_lost))
    if seeks_masked(request, q):  # a masked key finds nothing by personal data
        qs = qs.none()
    if cursor:
        stamp, pk = _decode_cursor(cursor)
        qs = qs.filter(Q(last_activity_at__lt=stamp) | Q(last_activity_at=stamp, pk__lt=pk))
    page = list(qs.order_by("-last_activity_at", "-pk")[: limit + 1])
    next_cursor = _encode_cursor(page[limit - 1]) if len(page) > limit else None
    return {"items": page[:limit], "next_cursor": next_cursor}


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


@router.get("/sessions/{key}/trace", response={200: s.TraceOut, **ERRORS, 403: s.ErrorOut},
            summary="Trace a string: the messages that hold it, whether the model input still carries it, and "
                    "which summary lost it",
            openapi_extra=links(200, **session_links(), **message_links("$response.body#/messages/0/seq")))
def trace(request, key: str, q: str = Query(..., min_length=1, max_length=200,
                                            description="a literal string; * stands for any run of non-space characters")):
    if seeks_masked(request, q):
        raise DomainError("this is personal data, which this key sees masked: it is not traced",
                          code="masked", status=403)
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
