"""The review pages (sessions/dashboard/review_views.py): a review recorded from the session page, review
queues made by editors from the sessions list's filters, "Next" handing out sessions one reviewer at a
time, a queue's progress and the CSV of its reviews, and the list's review column and filters."""

import csv
import io

import pytest
from django.urls import reverse

from sessions.ingest.append import append_messages
from sessions.models import Event, Review, ReviewClaim, ReviewQueue, Session
from sessions.store.review_queues import create_queue
from sessions.store.reviews import add_review

from .conftest import make_client
from .dom import parse

pytestmark = pytest.mark.django_db


def runs(project, count=3, reward=0):
    """Sessions of a benchmark: `count` with the reward given, one with reward 1."""
    keys = []
    for n in range(count + 1):
        key = f"run-{n}"
        messages = [{"role": "user", "content": f"Task {n}: refund order W{n:04d}."},
                    {"role": "assistant", "content": f"Refunded W{n:04d}."}]
        append_messages(project, key, messages, "test")
        Session.objects.filter(project=project, key=key).update(metadata={"reward": 1 if n == count else reward})
        keys.append(key)
    return keys


def review_url(session):
    return reverse("review_add", args=[session.project.name, session.key])


def test_a_viewer_records_a_review_from_the_session_page(viewer_client, viewer_user, project):
    runs(project, 0)
    session = Session.objects.get(key="run-0")
    page = parse(viewer_client.get(session.get_absolute_url()))
    form = page.one("form", cls="review-form")
    assert form.attrs["action"] == review_url(session)
    response = viewer_client.post(review_url(session), {
        "verdict": "problem", "labels": "wrong-refund, tone", "score": "2", "seqs": "#2, 1",
        "comment": "<script>alert(1)</script> refunded the wrong order"})
    assert response.status_code == 302 and response["Location"].endswith("#reviews")
    review = Review.objects.get()
    assert (review.verdict, review.labels, review.score, review.seqs, review.reviewer) == (
        "problem", ["wrong-refund", "tone"], 2, [1, 2], f"user:{viewer_user.username}")
    assert Event.objects.filter(session=session, type="REVIEW_ADDED").count() == 1
    html = viewer_client.get(session.get_absolute_url()).content.decode()
    shown = parse(viewer_client.get(session.get_absolute_url())).one("li", id=f"review-{review.pk}")
    assert "problem" in shown.text() and "wrong-refund" in shown.text() and "2/5" in shown.text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(("data", "problem"), [
    ({}, "A verdict is one of ok, problem, unsure."),
    ({"verdict": "great"}, "A verdict is one of"),
    ({"verdict": "ok", "score": "9"}, "A score is a whole number from 1 to 5."),
    ({"verdict": "ok", "score": "two"}, "A score is a whole number"),
    ({"verdict": "ok", "seqs": "3"}, "No message #3 in this session."),
    ({"verdict": "ok", "seqs": "one"}, "seqs is a list of message numbers."),
    ({"verdict": "ok", "comment": "x" * 10_001}, "A comment is at most 10000 characters."),
])
def test_a_review_that_does_not_check_out_says_why_and_stores_nothing(viewer_client, project, data, problem):
    runs(project, 0)
    session = Session.objects.get(key="run-0")
    response = viewer_client.post(review_url(session), data, follow=True)
    assert response.status_code == 200
    assert problem in response.content.decode()
    assert not Review.objects.exists() and not Event.objects.filter(type="REVIEW_ADDED").exists()


def test_editors_make_queues_from_the_lists_filters_and_viewers_may_not(editor_client, viewer_client, project):
    runs(project)
    listing = parse(editor_client.get(reverse("sessions") + "?project=default&meta=reward%3C1&sort=tokens"))
    link = listing.one("p", cls="save-queue").one("a").attrs["href"].replace("&amp;", "&")
    assert link.startswith(reverse("queues") + "?project=default&filter=meta%3Dreward%253C1")
    form = parse(editor_client.get(link)).one("form", cls="queue-form")
    assert {i.attrs["name"]: i.attrs.get("value") for i in form.find_all("input")}["filter"] == "meta=reward%3C1"
    response = editor_client.post(reverse("queues"), {"project": "default", "name": "Failed runs",
                                                      "filter": "meta=reward%3C1", "labels": "wrong-refund, rude"})
    queue = ReviewQueue.objects.get()
    assert response["Location"] == reverse("queue", args=[queue.pk])
    assert (queue.name, queue.labels) == ("Failed runs", ["wrong-refund", "rude"])
    page = parse(editor_client.get(reverse("queue", args=[queue.pk])))
    assert page.one(data_testid="queue-reviewed").text() == "0 of 3"
    # Viewers review; they do not make queues: no form, and a 403 for a crafted post.
    assert not parse(viewer_client.get(reverse("queues"))).find_all("form", cls="queue-form")
    assert viewer_client.post(reverse("queues"), {"project": "default", "name": "mine"}).status_code == 403
    assert ReviewQueue.objects.count() == 1


@pytest.mark.parametrize(("filter", "problem"), [
    ("nonsense=1", "The sessions list has no filter 'nonsense'"),
    ("from=2026-13-45", "The filter does not parse"),
    ("project=other", "names another"),
])
def test_a_queue_with_a_filter_the_list_does_not_read_is_refused(editor_client, project, filter, problem):
    response = editor_client.post(reverse("queues"), {"project": "default", "name": "bad", "filter": filter},
                                  follow=True)
    assert problem in parse(response).text()
    assert not ReviewQueue.objects.exists()
    # The form keeps what was typed, to mend it.
    form = parse(response).one("form", cls="queue-form")
    assert {i.attrs["name"]: i.attrs.get("value") for i in form.find_all("input")}["filter"] == filter


def test_two_reviewers_work_through_a_queue_without_reading_the_same_session(project, viewer_user, make_user):
    runs(project)
    queue = create_queue(project, viewer_user, "Failed runs", "meta=reward<1", ["wrong-refund"])
    other = make_user("second-viewer", project=project, role="viewer")
    first, second = make_client(viewer_user), make_client(other)
    given = []
    for client in (first, second):
        response = client.post(reverse("queue_next", args=[queue.pk]))
        assert response.status_code == 302
        given.append(response["Location"])
    assert given[0] != given[1] and all(url.endswith(f"?queue={queue.pk}") for url in given)
    # Asking again, each gets their own session back, not a third one.
    assert first.post(reverse("queue_next", args=[queue.pk]))["Location"] == given[0]
    page = parse(first.get(given[0]))
    assert "yours until" in page.one(data_testid="queue-banner").text()
    labels = [i.attrs["value"] for i in page.one("form", cls="review-form").find_all("input") if i.attrs.get("name") == "labels"]
    assert labels == ["wrong-refund"]  # the queue's labels, to tick
    key = given[0].split("/s/")[1].split("/")[0]
    session = Session.objects.get(key=key)
    # "Save and next": the review, then the next session no one holds.
    response = first.post(review_url(session), {"queue": queue.pk, "verdict": "problem", "labels": "wrong-refund",
                                                "next": "1"})
    third = response["Location"]
    assert third not in given and third.endswith(f"?queue={queue.pk}")
    assert not ReviewClaim.objects.filter(session=session).exists()
    # A label the queue does not have is refused.
    third_session = Session.objects.get(key=third.split("/s/")[1].split("/")[0])
    first.post(review_url(third_session), {"queue": queue.pk, "verdict": "ok", "labels": "made-up"})
    assert not Review.objects.filter(session=third_session).exists()
    first.post(review_url(third_session), {"queue": queue.pk, "verdict": "ok", "next": "1"})
    second_session = Session.objects.get(key=given[1].split("/s/")[1].split("/")[0])
    response = second.post(review_url(second_session), {"queue": queue.pk, "verdict": "unsure", "next": "1"}, follow=True)
    # The three failed runs are reviewed: the queue is done, and says so on its page.
    assert response.redirect_chain[-1][0] == reverse("queue", args=[queue.pk])
    page = parse(response)
    assert page.one(data_testid="queue-reviewed").text() == "3 of 3"
    assert "is done" in page.text()
    assert not page.find_all("form", action=reverse("queue_next", args=[queue.pk]))


def test_leaving_a_session_gives_it_back_to_the_queue(viewer_client, viewer_user, project):
    runs(project, 1)
    queue = create_queue(project, viewer_user, "Failed", "meta=reward<1")
    url = viewer_client.post(reverse("queue_next", args=[queue.pk]))["Location"]
    assert ReviewClaim.objects.count() == 1
    viewer_client.post(reverse("queue_next", args=[queue.pk]), {"leave": "run-0"})
    assert not ReviewClaim.objects.exists()
    assert url.split("?")[0].endswith("/s/run-0/")


def test_the_csv_of_a_queues_reviews(viewer_client, viewer_user, project):
    runs(project, 2)
    queue = create_queue(project, viewer_user, "Failed", "meta=reward<1", ["bad"])
    add_review(Session.objects.get(key="run-0"), viewer_user, "problem", ["bad"], 1, "=HYPERLINK(\"x\")", [1], queue=queue)
    add_review(Session.objects.get(key="run-1"), viewer_user, "ok", queue=queue)
    add_review(Session.objects.get(key="run-2"), viewer_user, "ok")  # not in the queue
    response = viewer_client.get(reverse("queue_csv", args=[queue.pk]))
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:3] == ["session", "title", "verdict"]
    assert [(r[0], r[2], r[3], r[5]) for r in rows[1:]] == [("run-0", "problem", "bad", "'=HYPERLINK(\"x\")"),
                                                         ("run-1", "ok", "", "")]
    page = parse(viewer_client.get(reverse("queue", args=[queue.pk])))
    assert page.one(data_testid="queue-reviewed").text() == "2 of 2"
    assert [row.text() for row in page.one("table", cls="by-verdict").find_all("td")] == ["1", "1", "0"]


def test_the_list_shows_each_sessions_latest_verdict_and_filters_by_it(viewer_client, viewer_user, project):
    runs(project, 2)
    add_review(Session.objects.get(key="run-0"), viewer_user, "ok")
    add_review(Session.objects.get(key="run-0"), viewer_user, "problem")
    add_review(Session.objects.get(key="run-1"), viewer_user, "ok")

    def shown(query=""):
        page = parse(viewer_client.get(reverse("sessions") + query))
        rows = page.one("table").find("tbody").find_all("tr")
        return {row.one("a", cls="key").text(): row.one("td", data_label="Review").text().strip() for row in rows}

    assert shown() == {"run-0": "problem +1", "run-1": "ok", "run-2": "—"}
    assert set(shown("?reviewed=yes")) == {"run-0", "run-1"}
    assert set(shown("?reviewed=no")) == {"run-2"}
    assert set(shown("?verdict=problem")) == {"run-0"}
    assert set(shown("?verdict=ok&meta=reward%3C1")) == {"run-1"}


def test_two_sessions_of_a_queue_are_compared_from_its_page(viewer_client, viewer_user, project):
    runs(project, 2)
    queue = create_queue(project, viewer_user, "Failed", "meta=reward<1")
    for key in ("run-0", "run-1"):
        add_review(Session.objects.get(key=key), viewer_user, "problem", queue=queue)
    page = parse(viewer_client.get(reverse("queue", args=[queue.pk])))
    form = page.one("form", id="compare-reviewed")
    assert form.get("action") == reverse("compare_ticked")
    ticks = [box.get("value") for box in page.find_all("input", cls="pick") if box.get("form") == "compare-reviewed"]
    assert len(ticks) == 2
    response = viewer_client.post(reverse("compare_ticked"), {"session": ticks}, follow=True)
    assert "first differ" in parse(response).one(cls="compare-verdict").text()
