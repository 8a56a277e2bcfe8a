"""Reviews and review queues over the API: GET/POST /sessions/{key}/reviews, GET/POST /queues,
GET /queues/{id} with its progress, POST /queues/{id}/next. Success and failure side by side: every bad
input is a 4xx with {"detail", "code"} and stores nothing; a review never reaches the model."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.models import Review, ReviewClaim, ReviewQueue
from tests.api.conftest import CONVERSATION, assert_error, stored

pytestmark = pytest.mark.django_db


def everything() -> dict:
    return {**stored(), "reviews": Review.objects.count(), "queues": ReviewQueue.objects.count(),
            "claims": ReviewClaim.objects.count()}


@pytest.fixture
def runs(api):
    """Four runs, oldest first: rewards 0.5, 1, 0 and 0.9."""
    for key, reward in [("run-a", 0.5), ("run-b", 1), ("run-c", 0), ("run-d", 0.9)]:
        assert api.put(f"/sessions/{key}", {"metadata": {"reward": reward}}).status_code == 201
        assert api.post(f"/sessions/{key}/messages", {"messages": CONVERSATION}).status_code == 200
    return ["run-a", "run-b", "run-c", "run-d"]


@pytest.fixture
def queue(api, runs) -> dict:
    response = api.post("/queues", {"name": "Low reward", "filter": "meta=reward<1", "labels": ["wrong-tool", "rude"]})
    assert response.status_code == 201, response.content
    return response.json()


# --- reviews of a session ---------------------------------------------------------------------------


def test_a_review_is_recorded_and_listed(api, runs):
    response = api.post("/sessions/run-a/reviews", {"verdict": "problem", "labels": ["slow"], "score": 2,
                                                    "comment": "Took three tool calls.", "seqs": [2, 3]})

    assert response.status_code == 201, response.content
    review = response.json()
    assert {k: v for k, v in review.items() if k not in ("id", "created_at")} == {
        "session": "run-a", "queue_id": None, "verdict": "problem", "labels": ["slow"], "score": 2,
        "comment": "Took three tool calls.", "seqs": [2, 3], "reviewer": "api:test-app"}
    assert api.get("/sessions/run-a/reviews").json() == {"items": [review]}
    assert api.get("/sessions/run-b/reviews").json() == {"items": []}
    events = api.get("/sessions/run-a/events", query={"type": "REVIEW_ADDED"}).json()["items"]
    assert [e["data"]["review_id"] for e in events] == [review["id"]]


def test_only_a_verdict_is_needed(api, runs):
    response = api.post("/sessions/run-a/reviews", {"verdict": "unsure"})
    assert response.status_code == 201
    assert (response.json()["labels"], response.json()["score"], response.json()["seqs"]) == ([], None, [])


def test_a_review_never_reaches_the_model(api, runs):
    before = api.get("/sessions/run-a/model-input", query={"format": "openai"}).json()
    api.post("/sessions/run-a/reviews", {"verdict": "problem", "comment": "SECRET-REVIEW-TEXT", "seqs": [1]})
    after = api.get("/sessions/run-a/model-input", query={"format": "openai"}).json()

    assert after == before and "SECRET-REVIEW-TEXT" not in str(after)


def test_the_export_carries_the_reviews(api, runs):
    api.post("/sessions/run-a/reviews", {"verdict": "ok", "comment": "Fine.", "labels": ["checked"]})
    document = b"".join(api.get("/sessions/run-a/export", query={"format": "json"}).streaming_content)
    assert b'"reviews": [{"verdict": "ok", "labels": ["checked"], "score": null, "comment": "Fine."' in document


def test_the_list_of_reviews_costs_the_same_queries_for_one_or_many(api, runs):
    def cost() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            items = api.get("/sessions/run-a/reviews").json()["items"]
        return len(items), len(queries.captured_queries)

    api.post("/sessions/run-a/reviews", {"verdict": "ok"})
    one = cost()
    for n in range(8):
        api.post("/sessions/run-a/reviews", {"verdict": "problem", "comment": f"{n}", "queue_id": None})
    many = cost()

    assert (one[0], many[0]) == (1, 9)
    assert many[1] == one[1] <= 4  # the key (2), the session, the reviews with their queues


@pytest.mark.parametrize("body, status, code", [
    ({"verdict": "fine"}, 422, "invalid_request"),
    ({}, 422, "invalid_request"),
    ({"verdict": "ok", "score": 0}, 422, "invalid_request"),
    ({"verdict": "ok", "score": 6}, 422, "invalid_request"),
    ({"verdict": "ok", "score": "x"}, 422, "invalid_request"),
    ({"verdict": "ok", "score": "3"}, 422, "invalid_request"),
    ({"verdict": "ok", "score": 2.5}, 422, "invalid_request"),
    ({"verdict": "ok", "seqs": [6]}, 422, "message_not_found"),
    ({"verdict": "ok", "seqs": [0]}, 422, "invalid_request"),
    ({"verdict": "ok", "seqs": "1"}, 422, "invalid_request"),
    ({"verdict": "ok", "labels": ["x" * 51]}, 422, "invalid_request"),
    ({"verdict": "ok", "labels": ["  "]}, 422, "invalid_label"),
    ({"verdict": "ok", "comment": "x" * 10_001}, 422, "invalid_request"),
    ({"verdict": "ok", "comment": "a\x00b"}, 422, "invalid_comment"),
    ({"verdict": "ok", "queue_id": 999_999}, 404, "queue_not_found"),
    ({"verdict": "ok", "queue_id": 0}, 422, "invalid_request"),
    ({"verdict": "ok", "mood": "happy"}, 422, "invalid_request"),
])
def test_a_bad_review_gets_a_4xx_and_stores_nothing(api, runs, body, status, code):
    before = everything()
    assert_error(api.post("/sessions/run-a/reviews", body), status, code)
    assert everything() == before


def test_a_review_of_an_unknown_session_is_a_404_and_creates_nothing(api, runs):
    before = everything()
    assert_error(api.post("/sessions/nobody/reviews", {"verdict": "ok"}), 404, "session_not_found")
    assert_error(api.get("/sessions/nobody/reviews"), 404, "session_not_found")
    assert everything() == before


def test_a_body_that_is_not_json_is_a_400(api, runs):
    before = everything()
    assert_error(api.post("/sessions/run-a/reviews", data="{verdict: ok"), 400, "invalid_json")
    assert everything() == before


def test_every_review_endpoint_needs_a_key(api, queue, bad_credentials):
    kwargs, code = bad_credentials
    before = everything()
    for method, path, body in [("get", "/sessions/run-a/reviews", None), ("post", "/sessions/run-a/reviews", {"verdict": "ok"}),
                               ("get", "/queues", None), ("post", "/queues", {"name": "x"}),
                               ("get", f"/queues/{queue['id']}", None), ("post", f"/queues/{queue['id']}/next", None)]:
        args = {} if body is None else {"json": body}
        assert_error(api.request(method, path, **args, **kwargs), 401, code)
    assert everything() == before


# --- queues -------------------------------------------------------------------------------------------


def test_a_queue_is_made_listed_and_read_with_its_progress(api, queue):
    assert {k: v for k, v in queue.items() if k not in ("id", "created_at")} == {
        "name": "Low reward", "filter": "meta=reward<1", "labels": ["wrong-tool", "rude"], "created_by": None}
    assert api.get("/queues").json() == {"items": [queue]}

    detail = api.get(f"/queues/{queue['id']}").json()

    assert detail == {**queue, "progress": {
        "matching": 3, "reviewed": 0, "remaining": 3, "claimed": 0, "reviews": 0,
        "by_verdict": {"ok": 0, "problem": 0, "unsure": 0}, "by_reviewer": []}}


def test_working_a_queue_with_next_and_reviews(api, other_key, queue, project):
    from sessions.access.api_keys import create_api_key

    second = api.with_key(create_api_key(project, "second-reviewer")[1])
    path = f"/queues/{queue['id']}/next"

    first = api.post(path).json()
    again = api.post(path).json()
    theirs = second.post(path).json()

    assert first["queue_id"] == queue["id"] and first["session"]["key"] == "run-a"
    assert first["session"]["metadata"] == {"reward": 0.5} and first["claimed_until"]
    assert again["session"]["key"] == "run-a"  # still held by this key
    assert theirs["session"]["key"] == "run-c"

    review = api.post("/sessions/run-a/reviews", {"verdict": "problem", "labels": ["rude"], "score": 1,
                                                  "queue_id": queue["id"], "seqs": [4]})
    assert review.status_code == 201 and review.json()["queue_id"] == queue["id"]
    assert api.post(path).json()["session"]["key"] == "run-d"
    assert second.post("/sessions/run-c/reviews", {"verdict": "ok", "queue_id": queue["id"]}).status_code == 201
    assert api.post("/sessions/run-d/reviews", {"verdict": "unsure", "queue_id": queue["id"]}).status_code == 201

    assert api.post(path).json() == {"queue_id": queue["id"], "session": None, "claimed_until": None}
    assert api.get(f"/queues/{queue['id']}").json()["progress"] == {
        "matching": 3, "reviewed": 3, "remaining": 0, "claimed": 0, "reviews": 3,
        "by_verdict": {"ok": 1, "problem": 1, "unsure": 1},
        "by_reviewer": [{"reviewer": "api:test-app", "reviews": 2}, {"reviewer": "api:second-reviewer", "reviews": 1}]}

    api.put("/sessions/run-e", {"metadata": {"reward": 0.1}})
    assert api.post(path).json()["session"]["key"] == "run-e"  # a new matching session joins


@pytest.mark.parametrize("body, status, code", [
    ({"name": "Bad", "filter": "tags=refund"}, 422, "invalid_filter"),
    ({"name": "Bad", "filter": "from=2026-13-45"}, 422, "invalid_filter"),
    ({"name": "Bad", "filter": "meta=reward<abc"}, 422, "invalid_filter"),
    ({"name": "Bad", "filter": "verdict=great"}, 422, "invalid_filter"),
    ({"name": "Bad", "filter": "project=other"}, 422, "invalid_filter"),
    ({"name": "Bad", "filter": "q=" + "x" * 2_000}, 422, "invalid_request"),
    ({"name": "Low reward"}, 409, "queue_exists"),
    ({"name": ""}, 422, "invalid_request"),
    ({"name": "   "}, 422, "invalid_queue"),
    ({"name": "x" * 101}, 422, "invalid_request"),
    ({"name": "Bad", "labels": "rude"}, 422, "invalid_request"),
    ({"name": "Bad", "labels": [""]}, 422, "invalid_request"),
    ({"name": "Bad", "filter": 5}, 422, "invalid_request"),
    ({"filter": ""}, 422, "invalid_request"),
])
def test_a_bad_queue_gets_a_4xx_and_stores_nothing(api, queue, body, status, code):
    before = everything()
    assert_error(api.post("/queues", body), status, code)
    assert everything() == before


def test_a_label_outside_the_queues_list_is_refused(api, queue):
    api.post(f"/queues/{queue['id']}/next")
    before = everything()
    body = assert_error(api.post("/sessions/run-a/reviews", {"verdict": "problem", "labels": ["polite"],
                                                             "queue_id": queue["id"]}), 422, "invalid_label")
    assert "wrong-tool, rude" in body["detail"]
    assert everything() == before


def test_an_unknown_queue_is_a_404(api, queue):
    before = everything()
    for response in (api.get("/queues/999999"), api.post("/queues/999999/next"),
                     api.post("/sessions/run-a/reviews", {"verdict": "ok", "queue_id": 999_999})):
        assert_error(response, 404, "queue_not_found")
    assert_error(api.get("/queues/0"), 422, "invalid_request")
    assert_error(api.post("/queues/x/next"), 422, "invalid_request")
    assert everything() == before


def test_another_projects_queues_are_not_seen(api, other_api, queue):
    before = everything()
    assert other_api.get("/queues").json() == {"items": []}
    assert_error(other_api.get(f"/queues/{queue['id']}"), 404, "queue_not_found")
    assert_error(other_api.post(f"/queues/{queue['id']}/next"), 404, "queue_not_found")
    other_api.put("/sessions/theirs", {})
    assert_error(other_api.post("/sessions/theirs/reviews", {"verdict": "ok", "queue_id": queue["id"]}),
                 404, "queue_not_found")
    assert everything() == {**before, "sessions": before["sessions"] + 1, "events": before["events"] + 1}  # created
