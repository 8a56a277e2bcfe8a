"""Trace of a string covered by many checkpoints (a long session has one every 100,000 tokens or so):
the page shows the checkpoints that stand for a message as runs that judge it alike, the API lists each
one, and the first request built on a summary without it is found among runs of checkpoint ids."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.access.api_keys import create_api_key
from sessions.context.compaction_runs import compact
from sessions.context.trace import trace
from sessions.ingest.append import append_messages
from sessions.ingest.next_request import build_request
from sessions.models import Event, EventType, Session
from tests.api.conftest import Api
from tests.api.test_trace import ORDER_CHAT

from .conftest import make_client
from .dom import parse
from .test_trace import url

pytestmark = pytest.mark.django_db

CODE = "W9609649"
# Each compaction's summary: whether it carries the order number (checkpoint 4 takes it up again).
SUMMARIES = [f"Order {CODE} was late.", "Small talk.", "More small talk.", f"Order {CODE} arrived.", "Goodbye."]


def turn(n: int) -> list[dict]:
    return [{"role": "user", "content": f"Question {n} about the weather?"},
            {"role": "assistant", "content": f"Answer {n}: sunny."}]


@pytest.fixture
def five(project, other_project):
    """Five checkpoints of the order chat; a request built on checkpoints 1, 3 and 5; between checkpoints
    2 and 3 another session's checkpoint, and a request event naming it (a checkpoint since deleted)."""
    append_messages(project, "order", ORDER_CHAT, "test")
    append_messages(other_project, "elsewhere", ORDER_CHAT, "test")
    checkpoints, requests = [], {}
    for number, summary in enumerate(SUMMARIES, start=1):
        session = Session.objects.get(project=project, key="order")
        outcome = compact(session, force=True, keep_recent_tokens=1, summary=summary)
        assert outcome.status == "completed", outcome.error
        checkpoints.append(outcome.checkpoint)
        if number == 2:
            elsewhere = Session.objects.get(project=other_project, key="elsewhere")
            stranger = compact(elsewhere, force=True, keep_recent_tokens=1, summary="Another session.").checkpoint
            Event.objects.create(session=session, type=EventType.REQUEST_BUILT, actor="test",
                                 data={"checkpoint_id": stranger.pk})
        if number in (1, 3, 5):
            requests[number] = build_request(project, "order").event.pk
        append_messages(project, "order", turn(number), "test")
    assert checkpoints[1].pk < stranger.pk < checkpoints[2].pk
    return Session.objects.select_related("project").get(project=project, key="order"), checkpoints, requests


def test_every_covering_checkpoint_is_judged_and_the_first_request_without_it_is_found(five):
    session, checkpoints, requests = five

    found = trace(session, CODE)

    first = found.rows[0]
    assert first.seq == 1
    assert [(c.id, c.number, c.carries) for c in first.coverage] == [
        (c.pk, c.number, CODE in c.summary) for c in checkpoints]
    assert [(run.first.number, run.last.number, run.count, run.first.carries) for run in first.coverage_runs] == [
        (1, 1, 1, True), (2, 3, 2, False), (4, 4, 1, True), (5, 5, 1, False)]
    assert found.lost_at.pk == checkpoints[1].pk
    assert found.current.pk == checkpoints[4].pk
    # Built on checkpoint 3 (the first request on a summary without it); the event naming the other
    # session's checkpoint, whose id lies between 2 and 3, came first and is passed over.
    assert found.first_request.pk == requests[3]
    assert found.sentence.endswith(f"(the first without it: request {requests[3]}).")


def test_the_page_shows_runs_of_checkpoints_that_judge_the_message_alike(five, viewer_user):
    session, checkpoints, _ = five

    response = make_client(viewer_user).get(url(session, "session_trace"), {"q": CODE},
                                            headers={"HX-Request": "true"})

    doc = parse(response)
    cells = [td for td in doc.find_all("td") if td.get("data-label") == "Summaries that stand for it"]
    lines = [div.text() for div in cells[0].find_all("div")]
    made = [c.created_at_seq for c in checkpoints]
    assert lines == [
        f"checkpoint 1 (made after #{made[0]}): carries it diff",
        f"checkpoints 2–3 (2, made after #{made[1]}–#{made[2]}): none carries it diff of 2",
        f"checkpoint 4 (made after #{made[3]}): carries it diff",
        f"checkpoint 5 (made after #{made[4]}): does not carry it diff",
    ]
    hrefs = [a.get("href") for a in cells[0].find_all("a")]
    assert hrefs == [url(session, "checkpoint_diff", checkpoints[n].pk) for n in (0, 1, 3, 4)]


def test_the_api_lists_each_checkpoint_that_stands_for_a_message(five, project):
    session, checkpoints, requests = five
    api = Api(create_api_key(project, "test-app")[1])

    body = api.get("/sessions/order/trace", query={"q": CODE}).json()

    assert [(c["id"], c["carries"]) for c in body["messages"][0]["checkpoints"]] == [
        (c.pk, CODE in c.summary) for c in checkpoints]
    assert body["lost_at_checkpoint_id"] == checkpoints[1].pk
    assert body["first_request"]["event_id"] == requests[3]


def test_a_trace_reads_the_same_statements_however_many_checkpoints_cover_the_string(project):
    append_messages(project, "order", ORDER_CHAT, "test")
    counts = []
    for number in range(1, 9):
        session = Session.objects.get(project=project, key="order")
        assert compact(session, force=True, keep_recent_tokens=1, summary=f"Summary {number}.").status == "completed"
        build_request(project, "order")
        append_messages(project, "order", turn(number), "test")
        if number in (2, 8):
            session = Session.objects.select_related("project").get(pk=session.pk)
            with CaptureQueriesContext(connection) as queries:
                found = trace(session, CODE)
            assert len(found.rows[0].coverage) == number
            counts.append(len(queries))
    assert counts[0] == counts[1]
