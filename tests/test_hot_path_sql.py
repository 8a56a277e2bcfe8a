"""The statements of every append that are written as SQL rather than built through the ORM (building them
cost several times running them) do what the ORM's did: the session row by key
(sessions.ingest.session_store.get_session), the stored figures' last visible rows
(sessions.context.model_input.recent_visible_rows), the duplicate-id check (sessions.db.messages.stored_with_ids), on a
session with a checkpoint, system messages, messages left out of the model input, tool calls and their
results, and a gap of invisible rows; the figures' UPDATE (rows.update_fields); the event row
(events.record); and the insert, one statement, COPY on PostgreSQL, that stores every value as sent."""

import json

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.model_input import RECENT_ROWS, _Row, _row_values, recent_visible_rows, visible_messages
from sessions.db.messages import stored_with_ids
from sessions.ingest.append import _stored_calls, append_messages
from sessions.ingest.message_edits import update_message
from sessions.models import Message, Session

pytestmark = pytest.mark.django_db


def call(n: int) -> list[dict]:
    return [
        {"id": f"u{n}", "role": "user", "content": f"question {n}"},
        {"id": f"a{n}", "role": "assistant", "content": "",
         "tool_calls": [{"id": f"c{n}", "name": "lookup", "arguments": {"n": n}}]},
        {"id": f"t{n}", "role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"},
        {"id": f"r{n}", "role": "assistant", "content": f"answer {n}"},
    ]


@pytest.fixture
def session(project):
    messages = [{"id": "sys", "role": "system", "content": "Be brief."}]
    for n in range(12):
        messages += call(n)
    messages.insert(20, {"id": "sys2", "role": "system", "content": "Be briefer."})
    append_messages(project, "figures", messages)
    session = Session.objects.get(project=project, key="figures")
    compact(session, force=True, max_tokens=200, keep_recent_tokens=300, summary="what happened first")
    session = Session.objects.get(pk=session.pk)
    for seq in (session.message_count - 2, session.message_count - 5):
        update_message(project, "figures", seq, {"include_in_messages": False}, actor="test")
    # A run of invisible rows longer than RECENT_ROWS: user messages left out of the model input.
    append_messages(project, "figures", [{"id": f"hidden{i}", "role": "user", "content": f"aside {i}",
                                          "include_in_messages": False} for i in range(RECENT_ROWS + 3)])
    session = Session.objects.get(pk=session.pk)
    assert session.checkpoint_last_seq > 0
    return session


def orm_rows(session: Session, before_seq: int) -> list[tuple]:
    """The same rows through the ORM, as the stored figures read them before they were SQL."""
    before = visible_messages(session, session.checkpoint_last_seq).filter(seq__lt=before_seq)
    return [as_tuple(_Row(row)) for row in _row_values(before.order_by("-seq"))[:RECENT_ROWS]]


def as_tuple(row: _Row) -> tuple:
    return (row.seq, row.role, row.tokens, row.call_ids, row.tool_call_tokens, row.tool_call_id, row.call_seq,
            bool(row.has_content))


def test_the_stored_figures_read_the_same_rows_as_the_orm(session):
    compared = []
    for before_seq in range(1, session.message_count + 2):
        expected = orm_rows(session, before_seq)
        assert [as_tuple(row) for row in recent_visible_rows(session, before_seq)] == expected, before_seq
        compared += expected
    # The comparison saw tool calls, their results and plain messages.
    assert any(row[3] for row in compared) and any(row[5] for row in compared) and len({row[0] for row in compared}) > RECENT_ROWS


def test_the_duplicate_id_check_reads_the_same_rows_as_the_orm(session):
    ids = ["u1", "a3", "t5", "sys", "hidden2", "no-such-id", "r11"]
    expected = {row["client_id"]: {k: row[k] for k in ("seq", "digest", "tokens")}
                for row in Message.objects.filter(session=session, client_id__in=ids).values(
                    "client_id", "seq", "digest", "tokens")}
    assert stored_with_ids(session, ids) == expected
    assert set(expected) == set(ids) - {"no-such-id"}
    assert stored_with_ids(session, ["no-such-id"]) == {}


def orm_calls(session: Session, call_ids: set[str], before_seq: int) -> dict[str, int]:
    """The calls' messages through the ORM, as an append found them before the read was SQL."""
    found = {}
    for seq, ids in (Message.objects.filter(session=session, role="assistant", seq__lt=before_seq)
                     .order_by("-seq").values_list("seq", "call_ids")):
        for call_id in (call_ids & set(ids)) - set(found):
            found[call_id] = seq
    return found


@pytest.mark.parametrize("before", ["end", "middle"])
def test_the_calls_a_batch_s_results_answer_are_found_as_through_the_orm(session, before):
    """Recent calls, calls further back than the first read (c0: 24 assistant messages back), and ids
    no message made."""
    before_seq = session.message_count + 1 if before == "end" else session.message_count // 2
    ids = {"c11", "c10", "c5", "c0", "never-made"}

    found = _stored_calls(session, ids, before_seq)

    assert found == orm_calls(session, ids, before_seq)
    assert ("c0" in found) and ("never-made" not in found)


def test_a_session_read_by_key_is_the_orm_s_session(project, session):
    from django.db import transaction
    from django.forms.models import model_to_dict

    from sessions.ingest.session_store import get_session

    expected = Session.objects.select_related("project").get(project=project, key="figures")
    for for_update in (False, True):
        with transaction.atomic():
            found = get_session(project, "figures", for_update=for_update)
        assert model_to_dict(found) == model_to_dict(expected)
        assert (found.pk, found.created_at, found.input_left_out, found.project) == (
            expected.pk, expected.created_at, expected.input_left_out, expected.project)
        assert found._state.adding is False and found._state.db == "default"


def test_the_figures_an_append_writes_read_back_as_written(session):
    from datetime import UTC, datetime

    from sessions.db.rows import update_fields

    values = {"message_count": session.message_count, "raw_tokens": 12_345, "input_tokens": 678,
              "input_left_out": [{"seq": 3, "reason": "unanswered_tool_call", "detail": "é \u2028 \"quoted\""}],
              "last_activity_at": datetime(2026, 12, 1, 16, 30, 5, 123456, tzinfo=UTC), "written_by_application": True}
    update_fields(session, **values)
    assert {name: getattr(session, name) for name in values} == values
    stored = Session.objects.get(pk=session.pk)
    assert {name: getattr(stored, name) for name in values} == values
    assert Session.objects.filter(pk=session.pk, input_left_out__0__seq=3).exists()  # stored as JSON, not text


def test_an_append_inserts_its_messages_in_one_logged_statement_that_stores_every_value(project, session):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    sent = [{"id": "copy-1", "role": "user", "content": [{"type": "text", "text": "tab\there, newline\n, \\ and é"},
                                                         {"type": "image", "url": "https://example.com/a.png"}],
             "attributes": {"nested": {"list": [1, 2.5, None, True]}, "quote": "\"\\N"}},
            {"id": "copy-2", "role": "assistant", "content": "", "reasoning": "thinking",
             "tool_calls": [{"id": "call-x", "name": "look", "arguments": {"q": "\\N"}}]},
            {"id": "copy-3", "role": "tool", "tool_call_id": "call-x", "content": "done", "is_error": True,
             "created_at": "2026-12-01T16:40:00.123456Z"}]
    with CaptureQueriesContext(connection) as queries:
        append_messages(project, "figures", sent)
    inserts = [q["sql"] for q in queries if "ctx_sessions_message" in q["sql"]
               and q["sql"].startswith(("INSERT", "COPY"))]
    assert len(inserts) == 1, inserts
    stored = {m.client_id: m for m in Message.objects.filter(session=session, client_id__startswith="copy-")}
    assert stored["copy-1"].content == sent[0]["content"] and stored["copy-1"].attributes == sent[0]["attributes"]
    assert stored["copy-1"].text.startswith("tab\there, newline\n, \\ and é")
    [call] = stored["copy-2"].tool_calls  # arguments are stored as the JSON text a provider sends
    assert (call["id"], call["name"], json.loads(call["arguments"])) == ("call-x", "look", {"q": "\\N"})
    assert stored["copy-2"].call_ids == ["call-x"] and stored["copy-2"].reasoning == "thinking"
    assert stored["copy-3"].call_seq == stored["copy-2"].seq and stored["copy-3"].is_error is True
    assert stored["copy-3"].created_at.isoformat() == "2026-12-01T16:40:00.123456+00:00"
    assert [stored[i].seq for i in ("copy-1", "copy-2", "copy-3")] == list(range(session.message_count + 1,
                                                                                    session.message_count + 4))


def test_an_event_is_stored_as_the_orm_stored_it(session):
    from django.forms.models import model_to_dict

    from sessions.models import Event
    from sessions.store.event_types import MessagesAppended
    from sessions.store.events import event_data, record

    data = MessagesAppended(input_tokens=5, count=2, first_seq=3, last_seq=4, tokens=99, duplicates=1)
    event = record(session, "api:key \"é\"", data)
    stored = Event.objects.get(pk=event.pk)
    assert model_to_dict(stored) == model_to_dict(event)
    assert stored.created_at == event.created_at and event_data(stored) == data
    assert event._state.adding is False and Event.objects.filter(session=session).latest("id").pk == event.pk
    assert record(session, "", data).actor == "system"


def test_the_latest_checkpoint_is_the_orm_s(project, session):
    """The checkpoint the model input starts from, now and as of each message, with its lost facts and
    its date, is the one (and the same values) the ORM's related manager finds."""
    from django.forms.models import model_to_dict

    from sessions.context.model_input import latest_checkpoint

    compact(session, force=True, max_tokens=400, keep_recent_tokens=100, summary="and then more")
    session = Session.objects.get(pk=session.pk)
    assert session.checkpoints.count() == 2
    found_any = found_none = False
    for as_of in [None, *range(0, session.message_count + 1)]:
        expected = session.checkpoints.all()
        if as_of is not None:
            expected = expected.filter(created_at_seq__lte=as_of)
        expected = expected.order_by("-last_seq").first()
        found = latest_checkpoint(session, as_of)
        if expected is None:
            assert found is None, as_of
            found_none = True
            continue
        assert model_to_dict(found) == model_to_dict(expected), as_of
        assert (found.pk, found.created_at, found.lost_facts, found.session) == (
            expected.pk, expected.created_at, expected.lost_facts, session), as_of
        assert found._state.adding is False and found._state.db == "default"
        found_any = True
    assert found_any and found_none
