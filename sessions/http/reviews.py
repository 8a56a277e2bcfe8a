"""Reviews and review queues: a session's reviews, read and written; the project's queues (saved filters of
the sessions list), made and read with their progress; and the next session of a queue for this API key
(sessions.store.reviews, sessions.store.review_queues). A review is for people: never sent to the model."""

from ninja import Path, Router
from ninja.responses import Status

from sessions.http import schemas as s
from sessions.http.common import ERRORS, WRITE_ERRORS, link, links, project, session_links
from sessions.ingest.session_store import get_session
from sessions.store import review_queues, reviews

router = Router(tags=["reviews"])

QueueId = Path(..., ge=1, le=9_000_000_000_000_000_000)


def queue_links(queue_id: str) -> dict:
    """From a response naming a review queue (by a JSON pointer to its id) to that queue."""
    return {
        "GetQueue": link("get_queue", queue_id=queue_id),
        "NextInQueue": link("next_in_queue", queue_id=queue_id),
    }


@router.get("/sessions/{key}/reviews", response={200: s.ReviewListOut, **ERRORS},
            summary="A session's reviews, oldest first",
            openapi_extra=links(200, **session_links(), **queue_links("$response.body#/items/0/queue_id")))
def list_reviews(request, key: str):
    session = get_session(project(request), key)
    return {"items": list(reviews.session_reviews(session))}


@router.post("/sessions/{key}/reviews", response={201: s.ReviewOut, **WRITE_ERRORS},
             summary="Review a session: a verdict (ok, problem, unsure), labels, a 1-5 score, a comment, the "
                     "messages it is about; in a queue, its labels apply and the key's claim ends",
             openapi_extra=links(201, **session_links(), **queue_links("$response.body#/queue_id")))
def add_review(request, key: str, body: s.ReviewIn):
    here = project(request)
    session = get_session(here, key)
    queue = review_queues.get_queue(here, body.queue_id) if body.queue_id is not None else None
    review = reviews.add_review(session, request, body.verdict, body.labels, body.score, body.comment, body.seqs,
                                queue)
    return Status(201, review)


@router.get("/queues", response={200: s.QueueListOut, **ERRORS}, summary="The project's review queues, by name",
            openapi_extra=links(200, **queue_links("$response.body#/items/0/id")))
def list_queues(request):
    return {"items": list(review_queues.project_queues(project(request)))}


@router.post("/queues", response={201: s.QueueOut, **WRITE_ERRORS},
             summary="Make a review queue: a saved filter of the sessions list (its query string) whose sessions "
                     "are reviewed one after another; 409 queue_exists for a name the project has",
             openapi_extra=links(201, **queue_links("$response.body#/id")))
def add_queue(request, body: s.QueueIn):
    queue = review_queues.create_queue(project(request), request, body.name, body.filter, body.labels)
    return Status(201, queue)


@router.get("/queues/{queue_id}", response={200: s.QueueDetailOut, **ERRORS},
            summary="One review queue with its progress: matching, reviewed and remaining sessions, reviews by "
                    "verdict and by reviewer",
            openapi_extra=links(200, **queue_links("$request.path.queue_id")))
def get_queue(request, queue_id: int = QueueId):
    return review_queues.get_queue(project(request), queue_id)


@router.post("/queues/{queue_id}/next", response={200: s.QueueNextOut, **ERRORS},
             summary="The next session to review in a queue, claimed for this API key for 30 minutes (the same "
                     "one again while the key holds it unreviewed); session null when none is left",
             openapi_extra=links(200, **session_links("$response.body#/session/key"),
                                 **queue_links("$request.path.queue_id")))
def next_in_queue(request, queue_id: int = QueueId):
    queue = review_queues.get_queue(project(request), queue_id)
    session = review_queues.next_in_queue(queue, request)
    claim = review_queues.claim_of(queue, session, request) if session is not None else None
    return {"queue_id": queue.pk, "session": session, "claimed_until": claim.until if claim else None}
