"""The statements that recording a captured request runs once a span, written as SQL rather than built
through the ORM (sessions/db/recorded_requests.py, and the raw log's digests in sessions/db/messages.py),
read and write what the ORM's did: the session's latest request (as of a moment too) with its largest
fields deferred, which of an export's requests the session holds already, the raw messages' digests by
seq and after a seq, and the new requests' rows, several a statement and in batches."""

from datetime import timedelta

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from sessions.context.recorded_input import recorded_figures
from sessions.db.messages import digests_between, digests_of
from sessions.db.recorded_requests import UNREAD, latest_request, stored_external_ids
from sessions.db.rows import insert_all
from sessions.ingest.recorded_requests import record_requests
from sessions.models import Message, RecordedRequest, Session
from tests.test_recorded_requests import T0, captured, conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(project):
    requests = conversation(4)
    # Two requests that start at the same moment: the later number is the latest.
    requests.append(captured(9, [*requests[-1].messages, requests[-1].response[0], {"role": "user", "content": "q"}]))
    requests.append(captured(10, requests[-1].messages[:-1] + [{"role": "user", "content": "again"}]))
    requests[-1].started_at = requests[-2].started_at
    record_requests(project, requests, "app")
    return Session.objects.get(project=project, key="conv")


def orm_latest(session, started_by=None):
    requests = RecordedRequest.objects.filter(session=session)
    if started_by is not None:
        requests = requests.filter(started_at__lte=started_by)
    return requests.order_by("-started_at", "-number").defer(*UNREAD).first()


def test_the_latest_request_is_the_orm_s_with_the_same_fields_deferred(session):
    moments = [None, T0, *(r.started_at for r in RecordedRequest.objects.filter(session=session)),
               T0 + timedelta(seconds=5, microseconds=1)]
    found_any = False
    for moment in moments:
        expected, found = orm_latest(session, moment), latest_request(session, moment)
        if expected is None:
            assert found is None, moment
            continue
        found_any = True
        assert found.get_deferred_fields() == expected.get_deferred_fields() == set(UNREAD)
        assert model_to_dict(found) == model_to_dict(expected), moment  # the deferred ones read when used
        assert (found.started_at, found.message_keys, found.message_seqs) == (
            expected.started_at, expected.message_keys, expected.message_seqs)
        assert found._state.adding is False and found._state.db == "default"
    assert found_any
    assert latest_request(session).number == 6  # the later number of two that started together


def test_the_requests_a_session_holds_are_found_as_through_the_orm(session, project):
    asked = ["span1", "span3", "span10", "never-sent", "span1"]
    expected = set(RecordedRequest.objects.filter(session=session, external_id__in=asked)
                   .values_list("external_id", flat=True))
    assert stored_external_ids(session, asked) == expected == {"span1", "span3", "span10"}
    assert stored_external_ids(session, []) == set()
    other = Session.objects.create(project=project, key="other")
    assert stored_external_ids(other, asked) == set()


def test_the_raw_log_s_digests_are_read_as_through_the_orm(session):
    rows = Message.objects.filter(session=session)
    count = session.message_count
    assert count >= 8
    seqs = [count, 1, 3, count + 5]
    assert sorted(digests_of(session, seqs)) == sorted(rows.filter(seq__in=seqs).values_list("seq", "digest", "tokens"))
    assert digests_of(session, []) == []
    for after, through in ((0, count), (2, 5), (count, count), (3, 2)):
        assert digests_between(session, after, through) == list(
            rows.filter(seq__gt=after, seq__lte=through).order_by("seq").values_list("seq", "digest", "tokens"))


def test_new_requests_are_stored_as_bulk_create_stores_them(session, project, monkeypatch):
    """Rows made from the session's own requests, stored again under another session both ways: every
    field the same (the request's messages as the JSON text they were sent as), each given its id; past
    the database's batch size, in as many statements as bulk_create makes."""
    originals = list(RecordedRequest.objects.filter(session=session).order_by("number"))
    ours, theirs = (Session.objects.create(project=project, key=key) for key in ("ours", "theirs"))

    def copies(target):
        made = []
        for original in originals:
            row = RecordedRequest.objects.get(pk=original.pk)
            row.pk, row._state.adding, row.session = None, True, target
            made.append(row)
        return made

    monkeypatch.setattr(connection.ops, "bulk_batch_size", lambda fields, objs: 4)
    with CaptureQueriesContext(connection) as queries:
        insert_all(mine := copies(ours))
    assert len([q for q in queries.captured_queries if q["sql"].startswith("INSERT")]) == 2  # 6 rows, 4 a statement
    RecordedRequest.objects.bulk_create(copies(theirs))

    def stored(target):
        return [{k: v for k, v in model_to_dict(r).items() if k not in ("id", "session")}
                for r in RecordedRequest.objects.filter(session=target).order_by("id")]

    assert stored(ours) == stored(theirs) == [{k: v for k, v in model_to_dict(r).items() if k not in ("id", "session")}
                                            for r in originals]
    assert [r.pk for r in mine] == list(RecordedRequest.objects.filter(session=ours).order_by("id").values_list("id", flat=True))
    assert all(r._state.adding is False and r._state.db == "default" for r in mine)
    assert RecordedRequest.objects.get(pk=mine[1].pk).messages == originals[1].messages  # key order as sent
    insert_all([])  # nothing to store: no statement


def test_a_capture_writes_its_request_count_with_the_figures_in_one_update(project):
    requests = conversation(3)
    record_requests(project, requests[:2], "app")
    # The third request drops the first turn: what it sent is smaller than the raw log's own input.
    requests[2].messages = [requests[2].messages[0], *requests[2].messages[3:]]
    with CaptureQueriesContext(connection) as queries:
        record_requests(project, requests[2:], "app")
    updates = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith('UPDATE "ctx_sessions_session"') and "request_count" in q["sql"]]
    assert len(updates) == 1 and '"input_tokens"' in updates[0], updates
    session = Session.objects.get(project=project, key="conv")
    assert session.request_count == 3
    figures = recorded_figures(session)  # built again from what is stored: what the UPDATE wrote
    assert {name: getattr(session, name) for name in figures} == figures and figures["input_messages"] == 4
