"""Compaction asked for by a client, waited for or not, and the state of one compaction run."""


from ninja import Path, Router
from ninja.responses import Status

from sessions.context.waiting import compact_and_wait, key_holder
from sessions.context.what_if import preview_compaction
from sessions.errors import NotFound
from sessions.http import schemas as s
from sessions.http.common import ERRORS, WRITE_ERRORS, link, links, project, run_link, session_links
from sessions.ingest.session_store import get_session
from sessions.models import CompactionRun
from sessions.store.events import actor

router = Router(tags=["sessions"])


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
    options = body.model_dump(exclude={"wait", "dry_run", "backlog"}, exclude_none=True)
    if body.dry_run:
        return preview_compaction(session, **options)
    # One waiting request per key (sessions/context/waiting.py); it waits for the first run of a backlog.
    run, outcome = compact_and_wait(session, actor(request), key_holder(request.auth), body.wait,
                                    backlog=body.backlog, **options)
    return Status(202, run) if outcome is None and run.state in CompactionRun.ACTIVE else outcome


@router.get("/sessions/{key}/compactions/{run_id}", response={200: s.CompactionRunOut, **ERRORS},
            summary="One compaction run: its state, attempts, last error, and outcome when finished",
            openapi_extra=links(200, **session_links()))
def compaction_run(request, key: str, run_id: int = Path(..., ge=1, le=9_000_000_000_000_000_000)):
    session = get_session(project(request), key)
    run = CompactionRun.objects.filter(session=session, pk=run_id).select_related("session").first()
    if run is None:
        raise NotFound(f"no compaction run {run_id} in session {key!r}")
    return run
