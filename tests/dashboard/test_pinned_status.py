"""Where pinned facts stand (issue 41, item 3; sessions/context/pinned_status.py): every value a session's
pinned facts pin, the message it first appeared in, and whether each checkpoint kept it, added it back on
its Pinned: line or lost it (made before the fact was pinned); the sessions list's "pinned fact lost"
filter, empty while the rule holds; the session page, the diff page and Trace mark them."""

import pytest
from django.urls import reverse

from sessions.access.api_keys import create_api_key
from sessions.context.compaction_runs import compact
from sessions.context.pinned_status import (
    ADDED_BACK,
    KEPT,
    LOST,
    NOT_COVERED,
    checkpoint_pins,
    pinned_rows,
    refresh_pinned,
    set_pinned_facts,
)
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import PinnedSighting, Session

from ..api.conftest import Api
from .dom import parse

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(project) -> Api:
    return Api(create_api_key(project, "test-app")[1])

ORDER = {"name": "order id", "pattern": "W[0-9]{7}"}
PEANUTS = {"name": "constraint", "value": "no peanuts"}


def turns(start: int, count: int, said: dict[int, str]) -> list[dict]:
    """A long support chat; turn n's user message ends with said[n]."""
    messages = []
    for n in range(start, start + count):
        messages += [{"role": "user", "content": f"Question {n} about the delivery of my parcel. " + "detail " * 60
                      + said.get(n, "")},
                     {"role": "assistant", "content": f"Answer {n}: the parcel moves on. " + "words " * 40}]
    return messages


SAID = {0: " My order is W2378156 and there must be no peanuts in it.", 3: " The other one is W1111111."}


def chat(project, key="chat", pinned=()) -> Session:
    append_messages(project, key, turns(0, 12, SAID), "test")
    update_session(project, key, {"pinned_facts": list(pinned), "compaction": {"auto": False}})
    return Session.objects.get(project=project, key=key)


def compacted(session: Session):
    outcome = compact(session, force=True, max_tokens=100_000, keep_recent_tokens=200)
    assert outcome.checkpoint is not None
    return outcome.checkpoint


def rows_of(session: Session):
    session = Session.objects.get(pk=session.pk)
    refresh_pinned(session)
    return {row.literal: row for row in pinned_rows(session, list(session.checkpoints.order_by("last_seq")))}


def lost_sessions(client, **extra):
    return client.get("/sessions", query={"pinned_lost": "true", **extra}).json()["items"]


def test_a_value_pinned_before_compaction_is_added_back_and_no_session_is_listed_as_losing_it(project, api):
    """The rule holds: the extractive digest drops the constraint said deep in a long message, and the
    checkpoint adds it back; the order ids it keeps itself. The filter stays empty."""
    session = chat(project, pinned=[ORDER, PEANUTS])
    checkpoint = compacted(session)
    rows = rows_of(session)
    assert set(rows) == {"W2378156", "no peanuts", "W1111111"}
    assert (rows["W2378156"].seq, rows["W1111111"].seq) == (1, 7)
    assert rows["no peanuts"].state == ADDED_BACK and rows["no peanuts"].added_by.pk == checkpoint.pk
    assert rows["W2378156"].state == KEPT and rows["W2378156"].lost_by is None
    assert Session.objects.get(pk=session.pk).pinned_lost == 0
    assert lost_sessions(api) == []
    assert {row.literal: row.state for row in checkpoint_pins(checkpoint)} == {
        "W2378156": KEPT, "W1111111": KEPT, "no peanuts": ADDED_BACK}


def test_checkpoints_made_before_the_pin_are_found_lost_in_the_list_and_the_api(project, api, viewer_client):
    session = chat(project)
    checkpoint = compacted(session)
    assert "no peanuts" not in checkpoint.summary
    other = chat(project, key="holds-nothing-pinned")
    assert lost_sessions(api) == []

    update_session(project, "chat", {"pinned_facts": [PEANUTS]})  # pinned after the summary lost it
    rows = rows_of(session)
    assert rows["no peanuts"].state == LOST and rows["no peanuts"].lost_by.pk == checkpoint.pk
    assert Session.objects.get(pk=session.pk).pinned_lost == 1
    assert [item["key"] for item in lost_sessions(api)] == ["chat"]
    listed = parse(viewer_client.get(reverse("sessions"), {"pinned_lost": "1"}))
    assert "chat" in listed.text() and other.key not in listed.text()

    # A later checkpoint, made with the pin, cannot bring back what its base had already lost: still listed.
    append_messages(project, "chat", turns(12, 6, {}), "test")
    compacted(session)
    assert rows_of(session)["no peanuts"].state == LOST
    assert [item["key"] for item in lost_sessions(api)] == ["chat"]

    update_session(project, "chat", {"pinned_facts": []})  # unpinned: nothing is lost any more
    assert Session.objects.get(pk=session.pk).pinned_lost == 0
    assert lost_sessions(api) == []


def test_a_project_pin_updates_every_session_with_checkpoints_through_the_task_queue(
        project, api, django_capture_on_commit_callbacks):
    first, second = chat(project, "first"), chat(project, "second")
    compacted(first)
    compacted(second)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        set_pinned_facts(project, [PEANUTS])
    assert len(callbacks) == 1
    assert sorted(item["key"] for item in lost_sessions(api)) == ["first", "second"]
    with django_capture_on_commit_callbacks(execute=True):
        response = api.patch("/project", {"pinned_facts": [ORDER]})
    assert response.status_code == 200
    assert lost_sessions(api) == []  # the order ids were kept by both summaries


def test_values_after_the_last_checkpoint_are_not_summarized_and_new_messages_are_read_once(project):
    session = chat(project, pinned=[ORDER])
    compacted(session)
    append_messages(project, "chat", turns(12, 2, {13: " And a third order, W3333333."}), "test")
    rows = rows_of(session)
    assert rows["W3333333"].state == NOT_COVERED and rows["W3333333"].seq == 27
    assert PinnedSighting.objects.filter(session=session).count() == 3
    refresh_pinned(session)  # nothing new: nothing stored twice
    assert PinnedSighting.objects.filter(session=session).count() == 3
    assert Session.objects.get(pk=session.pk).pinned_through == 28
    update_session(project, "chat", {"pinned_facts": [PEANUTS]})  # other pins: read again from the start
    assert list(PinnedSighting.objects.filter(session=session).values_list("literal", flat=True)) == ["no peanuts"]


def test_the_session_page_the_diff_page_and_trace_mark_pinned_facts(project, viewer_client):
    session = chat(project, pinned=[PEANUTS])
    checkpoint = compacted(session)
    update_session(project, "chat", {"pinned_facts": [PEANUTS, ORDER]})  # the second order id: lost? no, kept
    page = parse(viewer_client.get(session.get_absolute_url()))
    table = page.one("table", data_testid="pinned-rows")
    rows = {row.one("code").text(): row for row in table.find_all("tr", cls="pinned-row")}
    assert set(rows) == {"W2378156", "no peanuts", "W1111111"}
    assert "added back" in rows["no peanuts"].text() and "checkpoint 1" in rows["no peanuts"].text()
    assert "kept" in rows["W2378156"].text() and "#1" in rows["W2378156"].text()

    diff = parse(viewer_client.get(reverse("checkpoint_diff", args=["default", "chat", checkpoint.pk])))
    items = {li.one("code").text(): li.text() for li in diff.one("ul", data_testid="diff-pinned").find_all("li")}
    assert "added back" in items["no peanuts"] and "kept" in items["W1111111"]

    traced = parse(viewer_client.get(session.get_absolute_url(), {"trace": "no peanuts"}))
    assert "constraint" in traced.one(data_testid="trace-pinned").text()
    assert "added back on its Pinned: line" in traced.one("table", cls="trace-rows").text()
    plain = parse(viewer_client.get(session.get_absolute_url(), {"trace": "parcel moves"}))
    assert not plain.find_all(data_testid="trace-pinned")


def test_trace_over_the_api_names_the_pinned_fact_and_what_was_added_back(project, api):
    session = chat(project, pinned=[PEANUTS])
    compacted(session)
    body = api.get("/sessions/chat/trace", query={"q": "no peanuts"}).json()
    assert body["pinned"] == "constraint"
    assert body["messages"][0]["checkpoints"][0]["added_back"] is True
    body = api.get("/sessions/chat/trace", query={"q": "W2378156"}).json()
    assert body["pinned"] is None and body["messages"][0]["checkpoints"][0]["added_back"] is False


def test_a_long_sessions_page_reads_its_pinned_values_a_budget_at_a_time(project, viewer_client, monkeypatch):
    """The page reads at most PAGE_BUDGET messages not read yet each time it opens, and says how far."""
    monkeypatch.setattr("sessions.dashboard.views.PAGE_BUDGET", 10)
    session = chat(project, pinned=[ORDER])  # 24 messages, read when pinned: W2378156 in #1, W1111111 in #7
    append_messages(project, "chat", turns(12, 15, {26: " Also W3333333."}), "test")  # #25-#54, W3333333 in #53

    def opened():
        section = parse(viewer_client.get(session.get_absolute_url())).one("section", id="pinned-facts")
        return section.text(), [code.text() for code in section.find_all("code") if code.text().startswith("W")]

    text, values = opened()
    assert "up to #34 of #54" in text and values == ["W2378156", "W1111111"]
    text, values = opened()
    assert "up to #44 of #54" in text
    text, values = opened()
    assert "so far" not in text and values == ["W2378156", "W1111111", "W3333333"]


def test_opening_the_page_of_an_unchanged_session_writes_nothing(project, viewer_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    session = chat(project, pinned=[ORDER])
    compacted(session)
    viewer_client.get(session.get_absolute_url())
    with CaptureQueriesContext(connection) as queries:
        assert viewer_client.get(session.get_absolute_url()).status_code == 200
    writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))
              and ("ctx_sessions_session" in q["sql"] or "pinnedsighting" in q["sql"])]
    assert writes == []
