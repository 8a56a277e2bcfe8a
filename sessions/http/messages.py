"""The raw log of a session: append messages, read them page by page with where each is in the model
input, change one's flag and attributes."""


from ninja import Query, Router

from sessions.context.explain import with_explanations
from sessions.db.message_sizes import first_page
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
from sessions.ingest.append import append_messages
from sessions.ingest.message_edits import update_message
from sessions.ingest.session_store import check_key, get_session
from sessions.store.events import actor

router = Router(tags=["sessions"])


@router.post("/sessions/{key}/messages", response={200: s.AppendOut, **WRITE_ERRORS},
              summary="Append a batch of messages (all or nothing)",
              openapi_extra=links(200, **session_links(), **message_links("$response.body#/messages/0/seq"),
                                  GetCompactionRun=run_link("$response.body#/compaction/id")))
def append(request, key: str, body: s.AppendIn):
    check_key(key)
    result = append_messages(project(request), key, body.messages, actor(request), fmt=body.format,
                             system=body.system)
    return {
        "session": result.session.key,
        "session_created": result.session_created,
        "messages": result.messages,
        "compaction": result.compaction,  # the write path's automatic run (ingest.append.compact_after_write)
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
