"""Requests to the model: the next one built (stored, compacted when needed, rendered), and the ones an
application recorded (request logs, OpenTelemetry), page by page or one at a time."""


from ninja import Path, Query, Router

from sessions.context.provider_input import model_input_response
from sessions.context.request_records import get_request, render_request, request_page
from sessions.context.waiting import key_holder
from sessions.http import schemas as s
from sessions.http.common import (
    ERRORS,
    WRITE_ERRORS,
    link,
    links,
    message_links,
    project,
    run_link,
    session_links,
)
from sessions.ingest.next_request import build_request
from sessions.ingest.session_store import check_key, get_session
from sessions.store.events import actor

router = Router(tags=["sessions"])


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


@router.get("/sessions/{key}/requests", response={200: s.RecordedRequestListOut, **ERRORS},
            summary="The requests the application sent, captured from outside (OpenTelemetry spans, request logs), "
                    "in order: time, model, token figures ours and the provider's, what each dropped",
            openapi_extra=links(200, GetRequest=link("recorded_request", key="$request.path.key",
                                                     number="$response.body#/items/0/number"),
                                # Its first request whether or not the page shows it (a 404 when none was
                                # recorded): so that linked calls reach the operation too.
                                GetFirstRequest=link("recorded_request", key="$request.path.key", number="1"),
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
