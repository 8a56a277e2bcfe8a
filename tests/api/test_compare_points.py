"""GET /api/v1/compare with a side that is a recorded request (`a_request`, `b_request`) or the model input
as of a message (`a_as_of`, `b_as_of`): two requests of one session that are not consecutive, and the
input before and after a compaction, aligned as two sessions are (sessions/context/compare.py)."""

import pytest

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.models import Session
from tests.api.conftest import assert_error
from tests.recorded_sessions import FIRST_QUESTION, REQUESTS, SUMMARY, SYSTEM, rebuilt_session

pytestmark = pytest.mark.django_db


def shown(row, side):
    message = row[side]
    return None if message is None else (message["kind"], message["seq"], message["text"])


def test_two_recorded_requests_of_one_session_line_up(api, project):
    rebuilt_session(project)
    # Request 4 sent the application's summary, #5, #6 and #7; request 5 dropped #5 and #6 and added #8, #9.
    body = api.get("/compare", query={"a": "rebuilt", "a_request": 4, "b_request": 5}).json()

    assert (body["a"]["what"], body["a"]["request"], body["a"]["as_of"]) == ("request 4", 4, None)
    assert (body["b"]["what"], body["b"]["key"]) == ("request 5", "rebuilt")  # b defaults to a
    assert body["a"]["messages"] == len(REQUESTS[3][0]) and body["b"]["messages"] == len(REQUESTS[4][0])
    rows = [(shown(r, "a"), shown(r, "b"), r["same"]) for r in body["rows"]]
    instructions = ("instructions", None, SYSTEM["content"])
    summary = ("message", None, SUMMARY)  # the application's own message: no raw message is it
    assert rows == [
        (instructions, instructions, True),
        (summary, summary, True),
        (("message", 5, "When will I see it?"), None, False),
        (("message", 6, "Within five working days."), None, False),
        (("message", 7, "Can you also change my delivery address?"),) * 2 + (True,),
        (None, ("message", 8, "Yes, what is the new address?"), False),
        (None, ("message", 9, "Rua Augusta 12, Lisbon."), False),
    ]
    assert body["diverged_at"] == 2


def test_the_first_request_against_the_last_shows_what_the_application_dropped(api, project):
    rebuilt_session(project)
    body = api.get("/compare", query={"a": "rebuilt", "b": "rebuilt", "a_request": 1, "b_request": 5}).json()
    # The first question, sent in request 1, is where request 5 sends the application's summary instead:
    # a changed pair, its words marked, the summary no raw message (seq null).
    row = next(r for r in body["rows"] if r["a"] and r["a"]["text"] == FIRST_QUESTION)
    assert not row["same"] and (row["b"]["seq"], row["b"]["text"]) == (None, SUMMARY)
    assert row["a_changed"] and row["b_changed"]
    assert [r["b"]["seq"] for r in body["rows"] if r["b"] and r["a"] is None] == [7, 8, 9]
    # The tokens of a request side are those the request was measured at when recorded.
    assert body["a"]["tokens"] > 0 and body["b"]["tokens"] > body["a"]["tokens"]


def test_the_model_input_before_and_after_a_compaction(api, project):
    turns = []
    for n in range(1, 13):
        turns += [{"role": "user", "content": f"Question {n}: what about order W{n:04d}? " + "detail " * 30},
                  {"role": "assistant", "content": f"Answer {n}: order W{n:04d} ships Monday. " + "words " * 30}]
    append_messages(project, "long", turns, "test")
    session = Session.objects.get(project=project, key="long")
    before = session.message_count
    outcome = compact(session, max_tokens=600, keep_recent_tokens=150)
    assert outcome.checkpoint is not None
    last_covered = outcome.checkpoint.last_seq

    body = api.get("/compare", query={"a": "long", "a_as_of": before - 1, "b_as_of": before}).json()
    assert body["a"]["what"] == f"model input as of message {before - 1}" and body["b"]["as_of"] == before
    a_items = [r["a"] for r in body["rows"] if r["a"]]
    b_items = [r["b"] for r in body["rows"] if r["b"]]
    # Flags are today's: as of any message the input is built on the checkpoint made afterwards only if it
    # existed by then; it did not, so side a is the whole log up to #23, side b starts with the summary.
    assert [m["seq"] for m in a_items] == list(range(1, before))
    assert b_items[0]["kind"] == "summary" and b_items[0]["seq"] is None
    assert [m["seq"] for m in b_items[1:]] == list(range(last_covered + 1, before + 1))
    rows_by_seq = {r["a"]["seq"]: r for r in body["rows"] if r["a"]}
    # The summary stands where the first message it replaced stood; the rest it covers stand alone.
    assert rows_by_seq[1]["b"]["kind"] == "summary" and not rows_by_seq[1]["same"]
    assert all(rows_by_seq[seq]["b"] is None for seq in range(2, last_covered + 1))
    assert all(rows_by_seq[seq]["same"] for seq in range(last_covered + 1, before))


def test_a_side_with_a_request_and_an_as_of_is_refused(api, project):
    rebuilt_session(project)
    assert_error(api.get("/compare", query={"a": "rebuilt", "a_request": 1, "a_as_of": 2, "b_request": 2}),
                 422, "invalid_comparison")


@pytest.mark.parametrize(("query", "status", "code"), [
    ({"a_request": 6}, 404, "request_not_found"),  # it has five
    ({"b_request": 99}, 404, "request_not_found"),
    ({"a_as_of": 11}, 422, "invalid_as_of"),  # it has ten messages
    ({"a_request": 0}, 422, None),
    ({"b_as_of": -1}, 422, None),
    ({"a_request": "two"}, 422, None),
])
def test_a_side_that_is_not_there_is_a_clear_error(api, project, query, status, code):
    rebuilt_session(project)
    assert_error(api.get("/compare", query={"a": "rebuilt", **query}), status, code)


def test_a_session_without_recorded_requests_has_no_request_to_compare(api, project):
    append_messages(project, "plain", [{"role": "user", "content": "hello"}], "test")
    assert_error(api.get("/compare", query={"a": "plain", "a_request": 1}), 404, "request_not_found")
    body = api.get("/compare", query={"a": "plain", "a_as_of": 0, "b_as_of": 1}).json()
    assert [(r["a"], r["b"]["seq"]) for r in body["rows"]] == [(None, 1)]
