"""Explain for sessions rebuilt from recorded requests (SPEC §2 "Explain", §9): the application's own
requests decide. RecordedRequest rows are made through the ORM here, so each case is exactly the one named;
tests/api/test_recorded_requests.py and tests/importers/test_request_log.py go through record_requests."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.context.explain import explain_messages
from sessions.context.model_input import Reason, build_model_input
from sessions.context.recorded_input import build_recorded_input
from sessions.models import Message, RecordedRequest, Session

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def request(session, number, message_seqs, response_seqs=(), dropped=(), unmatched=()):
    # Sent right before its response was stored (as recording sets at_seq), or after the newest it carried.
    sent = max((s for s in message_seqs if s is not None), default=0)
    at_seq = min(response_seqs) - 1 if response_seqs and min(response_seqs) > sent else sent
    return RecordedRequest.objects.create(
        session=session, number=number, external_id=f"r{number}", source="otlp",
        started_at=T0 + timedelta(seconds=number), messages=[{"role": "user", "content": "x"}] * len(message_seqs),
        message_seqs=list(message_seqs), response_seqs=list(response_seqs), dropped_seqs=list(dropped),
        unmatched=list(unmatched), at_seq=at_seq)


@pytest.fixture
def session(append):
    append("app", [{"role": "user", "content": f"m{n}"} if n % 2 else {"role": "assistant", "content": f"m{n}"}
                   for n in range(1, 9)])
    return Session.objects.get(key="app")


def explained(session, **build):
    session = Session.objects.get(pk=session.pk)
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    build_input = build_recorded_input if session.request_count else build_model_input
    return explain_messages(messages, build_input(session, **build), [])


def recorded(session, *rows):
    for number, seqs, *options in rows:
        request(session, number, seqs, **(options[0] if options else {}))
    Session.objects.filter(pk=session.pk).update(request_count=len(rows))


def test_without_recorded_requests_nothing_changes(session):
    assert {e.code for e in explained(session).values()} == {Reason.IN_INPUT}


def test_the_latest_request_decides_what_is_in_the_input(session):
    recorded(session, (1, [None, 1], {"response_seqs": [2]}), (2, [None, 1, 2, 3], {"response_seqs": [4]}),
             (3, [None, 3, 4, 5], {"response_seqs": [6], "dropped": [1, 2]}))
    found = explained(session)
    assert [found[s].code for s in (3, 4, 5)] == [Reason.IN_INPUT] * 3
    assert (found[5].request, found[5].position, found[5].request_position) == (3, 4, 4)
    assert found[5].sentence == "In the model input: the application's request 3 sent it as message 4 of 4."
    assert found[1].code == Reason.DROPPED_BY_APPLICATION
    assert (found[1].last_sent_request, found[1].first_missing_request) == (2, 3)
    assert found[1].sentence == (
        "Dropped by the application from its own requests. Last sent in request 2; request 3 was the first "
        "without it.")
    assert found[6].code == Reason.IN_INPUT and found[6].request == 3
    assert found[6].sentence == "In the model input, message 5 of 7: the response to request 3."
    assert found[7].code == Reason.IN_INPUT and found[7].position == 6
    assert found[7].sentence == "In the model input, message 6 of 7: stored after request 3, the latest the application sent."


def test_a_message_never_sent_is_said_so(session):
    # Request 1's response (#2) is left out by request 2, which sends #1 and a new #3 only.
    recorded(session, (1, [1], {"response_seqs": [2]}), (2, [1, 3], {"response_seqs": [4], "dropped": [2]}),
             (3, [1, 3, 4, 5], {}))
    found = explained(session)[2]
    assert found.code == Reason.DROPPED_BY_APPLICATION
    assert (found.last_sent_request, found.first_missing_request) == (None, 2)
    assert found.sentence.startswith("Dropped by the application from its own requests. It was never sent: stored "
                                     "after request 1 (its response, or a message added then), and request 2 was "
                                     "the first without it, and no later request sent it again (the request in "
                                     "force is request 3).")
    assert found.as_dict()["last_sent_request"] is None


def test_the_latest_drop_counts_when_a_message_was_sent_again(session):
    recorded(session, (1, [1, 2]), (2, [2], {"dropped": [1]}), (3, [1, 2, 3]), (4, [3], {"dropped": [1, 2]}))
    found = explained(session)[1]
    assert (found.last_sent_request, found.first_missing_request) == (3, 4)


def test_a_replacement_by_the_application_s_summary(session):
    recorded(session, (1, [1, 2, 3]), (2, [None, None, 3, 4], {"dropped": [1, 2], "unmatched": [1]}))
    found = explained(session)
    assert found[1].code == found[2].code == Reason.REPLACED_BY_APPLICATION_SUMMARY
    assert found[1].replacements == (2,)
    assert found[1].sentence == (
        "Replaced by the application's own summary or rewrite. Last sent in request 1; request 2 was the first "
        "without it, and instead sent a message matching no stored message (its message 2).")
    assert found[1].as_dict() == {"code": "replaced_by_application_summary", "sentence": found[1].sentence,
                                  "first_missing_request": 2, "last_sent_request": 1, "replacements": [2]}


def test_as_of_explains_against_the_request_in_force_then(session):
    recorded(session, (1, [1, 2]), (2, [2, 3], {"dropped": [1]}))
    found = explained(session, as_of=2)
    assert found[1].code == found[2].code == Reason.IN_INPUT and found[1].request == 1
    assert found[3].code == Reason.AFTER_AS_OF
    found = explained(session, as_of=4)
    assert found[1].code == Reason.DROPPED_BY_APPLICATION and found[1].first_missing_request == 2
    assert found[4].code == Reason.IN_INPUT and "stored after request 2" in found[4].sentence
    assert found[5].code == Reason.AFTER_AS_OF


def test_the_cost_does_not_grow_with_the_number_of_requests(session, append):
    recorded(session, *[(n, [n, n + 1], {"dropped": [n - 1]} if n > 1 else {}) for n in range(1, 8)])
    session = Session.objects.get(pk=session.pk)
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    model_input = build_recorded_input(session)
    with CaptureQueriesContext(connection) as queries:
        found = explain_messages(messages, model_input, [])
    assert len(queries) <= 3
    assert found[3].code == Reason.DROPPED_BY_APPLICATION and found[3].first_missing_request == 4
