"""Context checks over the API: POST /context-checks replays a conversation through ctxweb's compaction on
a scratch copy that stores nothing, and says whether every pinned fact and expected literal survived
(sessions.ingest.context_check)."""

from ninja import Router

from sessions.http import schemas as s
from sessions.http.common import ERRORS, link, links, project
from sessions.ingest.context_check import Settings, check_messages, check_session
from sessions.ingest.session_store import get_session
from sessions.wire.provider_messages import to_ctxweb

router = Router(tags=["compaction"])


@router.post("/context-checks", response={200: s.ContextCheckOut, **ERRORS},
             summary="Check that pinned facts and expected literals survive compaction, on a scratch replay",
             openapi_extra=links(200, GetProject=link("get_project")))
def check_context(request, body: s.ContextCheckIn):
    """The messages given (in `format`), or the session named, are appended one by one to a scratch session
    with these settings, automatic compaction running as it would; nothing is stored. `passed` says
    whether every pinned fact's literal and every `expect` literal is carried by every model input after
    the first message holding it."""
    settings = Settings(max_tokens=body.max_tokens, keep_recent_tokens=body.keep_recent_tokens,
                        summarizer=body.summarizer, pinned_facts=body.pinned_facts or [], expect=body.expect or [])
    if body.session is not None:
        return check_session(get_session(project(request), body.session), settings).as_dict()
    messages = to_ctxweb(body.format, body.messages or [], body.system).messages
    return check_messages("messages", messages, settings).as_dict()
