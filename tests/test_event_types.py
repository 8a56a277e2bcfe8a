"""Typed event data (sessions/store/event_types.py): every event type has a model, a writer that gets a field
wrong fails before anything is stored, and every event a realistic session stores validates against the
model of its type and dumps back to exactly what was stored."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from pydantic import ValidationError

from sessions.access.members import set_member
from sessions.context.checkpoints import create_imported_checkpoint
from sessions.context.compaction_runs import compact
from sessions.context.summarizers import SUMMARIZERS
from sessions.ingest.append import append_messages
from sessions.ingest.message_edits import update_message
from sessions.ingest.next_request import build_request
from sessions.ingest.session_store import update_session
from sessions.models import CompactionRun, Event, EventType, Session
from sessions.store.event_types import (
    EVENT_DATA,
    CompactionCompleted,
    CompactionSkipped,
    CompactionStarted,
    MessagesAppended,
    MessageUpdated,
    NoteAdded,
    RequestBuilt,
    SessionUpdated,
)
from sessions.store.events import event_data, parse_event_data, record
from sessions.store.notes import add_note, delete_note, edit_note, set_tags
from sessions.store.project_settings import reveal_to, set_masking
from sessions.store.reviews import add_review
from tests.builders import assistant, call, tool, user

pytestmark = pytest.mark.django_db

APPENDED = {"input_tokens": 213, "count": 2, "first_seq": 1, "last_seq": 2, "tokens": 210, "duplicates": 0}
FIGURES = {"trigger": "request", "max_tokens": 100, "keep_recent_tokens": 50, "tokens_before": 433,
           "summarizer": "extractive"}


def test_every_event_type_has_a_model():
    assert set(EVENT_DATA) == set(EventType.values)


def test_every_model_refuses_fields_it_does_not_declare():
    assert all(model.model_config["extra"] == "forbid" for model in EVENT_DATA.values())


@pytest.mark.parametrize("build", [
    lambda: MessagesAppended(**APPENDED, seqs=[1, 2]),
    lambda: MessagesAppended(**{**APPENDED, "count": "two"}),
    lambda: MessagesAppended(**{k: v for k, v in APPENDED.items() if k != "input_tokens"}),
    lambda: CompactionSkipped(**FIGURES, reason="tired", run=1),
    lambda: CompactionStarted(**{**FIGURES, "trigger": "cron"}),
    lambda: MessageUpdated(seq=2, id="m2", input_tokens=90, at_seq=3,
                           changes={"include_in_messages": {"from": True, "to": False, "by": "alice"}}),
    lambda: MessageUpdated(seq=2, id="m2", input_tokens=90, at_seq=3, changes={"pinned": {"from": 0, "to": 1}}),
    lambda: SessionUpdated(fields=["colour"]),
    lambda: NoteAdded(note_id=1, seq=None),
], ids=["unknown field", "wrong type", "missing field", "reason not a reason", "trigger not a trigger",
        "unknown key in a change", "change of a field that cannot change", "unknown session field",
        "note without its text"])
def test_a_writer_with_a_wrong_field_fails_and_stores_nothing(project, build):
    session = append_messages(project, "wrong", [user(20, "Hello")], "test").session
    stored = Event.objects.count()

    with pytest.raises(ValidationError):
        record(session, "test", build())

    assert Event.objects.count() == stored


def test_a_stored_row_with_a_field_its_model_does_not_know_is_refused_when_read():
    with pytest.raises(ValidationError):
        parse_event_data(EventType.MESSAGES_APPENDED, {**APPENDED, "seqs": [1, 2]})


@pytest.mark.parametrize(("type_", "data"), [
    (EventType.MESSAGES_APPENDED, APPENDED),  # as bench/measures.py bulk-creates them
    (EventType.COMPACTION_STARTED, FIGURES),
    (EventType.COMPACTION_SKIPPED, {**FIGURES, "reason": "under_threshold", "run": 7}),
    (EventType.COMPACTION_SKIPPED, {**FIGURES, "reason": "not_smaller", "summary_tokens": 130,
                                    "replaced_tokens": 120, "run": 7}),
    (EventType.REQUEST_BUILT, {"format": "openai", "checkpoint_id": None, "seq_range": None, "stored_messages": 0,
                               "tokens": 3, "instructions_tokens": 0, "summary_tokens": 0,
                               "unpersisted": {"count": 0, "tokens": 0}, "omitted": [], "compaction": None}),
    (EventType.NOTE_DELETED, {"note_id": 4, "seq": None}),
], ids=["appended", "started", "skipped", "skipped not smaller", "request with nothing", "note deleted"])
def test_stored_data_parses_and_dumps_back_unchanged(type_, data):
    assert parse_event_data(type_, data).model_dump(mode="json") == data


# --- every writer, in one realistic session ------------------------------------------------------


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="correct horse battery staple")


def fresh(session) -> Session:
    return Session.objects.get(pk=session.pk)


def realistic_session(project, alice, monkeypatch) -> Session:
    """A trip-booking session that records every event type, each writer at least once, and every
    optional figure both present and absent."""
    actor = "api:app"
    update_session(project, "trip", {"title": "Trip", "compaction": {"auto": False}}, actor)
    update_session(project, "trip", {"title": "Trip to Porto", "instructions": "You book trains."}, actor)
    append_messages(project, "trip", [
        user(100, "Book me a trip to Porto.", id="m1"),
        assistant(100, "Which day would you like to go?", id="m2"),
        user(100, "Next Friday, in the morning.", id="m3"),
    ], actor)
    session = append_messages(project, "trip", [
        user(100, "Next Friday, in the morning.", id="m3"),  # a retry: a duplicate
        assistant(60, "Looking it up.", id="m4", tool_calls=[call("c1", "search_trains")]),
        tool(50, "c1", "IC 521 leaves Lisbon at 09:00.", id="m5"),
        assistant(60, "IC 521 leaves at 09:00.", id="m6"),
        user(40, "Book it.", id="m7"),
    ], actor).session
    update_message(project, "trip", 2, {"include_in_messages": False}, actor)
    update_message(project, "trip", 2, {"include_in_messages": True, "attributes": {"checked": True}}, actor)

    create_imported_checkpoint(fresh(session), 2, "The user wants a trip to Porto.", actor)
    compact(fresh(session), actor=actor)  # under_threshold
    compact(fresh(session), force=True, keep_recent_tokens=100_000, actor=actor)  # nothing_to_compact
    compact(fresh(session), force=True, keep_recent_tokens=100, summary="trip " * 600, actor=actor)  # not_smaller
    with monkeypatch.context() as patched:
        patched.setitem(SUMMARIZERS, "extractive", lambda previous, messages, budget: 1 / 0)
        compact(fresh(session), force=True, keep_recent_tokens=100, actor=actor)  # failed
    # A run a killed process left open: running, its lease passed; the next compaction closes it.
    cut_off = record(fresh(session), actor, CompactionStarted(**FIGURES))
    CompactionRun.objects.create(session=session, in_process=True, state="running", attempts=1,
                                 lease_expires_at=timezone.now() - timedelta(seconds=5), started_event=cut_off)
    compact(fresh(session), force=True, keep_recent_tokens=100, summary="IC 521 to Porto on Friday.", actor=actor)

    append_messages(project, "trip", [assistant(60, "Booking it.", id="m8", tool_calls=[call("c2", "book")])], actor)
    update_session(project, "trip", {"compaction": {"auto": True, "max_tokens": 60, "keep_recent_tokens": 200}}, actor)
    build_request(project, "trip", messages=[{"role": "user", "content": "Is it booked?", "persist": False}],
                  actor=actor)

    note = add_note(fresh(session), alice, "Customer called about the booking.", seq=7)
    edit_note(note, alice, "Customer called twice about the booking.")
    delete_note(note, alice)
    add_note(fresh(session), alice, "VIP customer.")
    set_tags(fresh(session), alice, ["booking", "rail"])
    set_tags(fresh(session), alice, ["booking"])
    add_review(fresh(session), alice, "problem", ["wrong-tool"], 2, "Called the tool twice.", [2])
    viewer = get_user_model().objects.create_user("bob")
    set_member(project, "bob", "viewer")
    set_masking(project, {"enabled": True})
    reveal_to(fresh(session), alice, viewer.username)
    return fresh(session)


def test_every_event_of_a_realistic_session_validates_against_its_model(project, alice, monkeypatch):
    session = realistic_session(project, alice, monkeypatch)

    events = list(session.events.order_by("pk"))

    assert {e.type for e in events} == set(EventType.values)
    for event in events:
        data = event_data(event)
        assert type(data) is EVENT_DATA[event.type]
        assert data.model_dump(mode="json") == event.data, event.type


def test_optional_figures_are_left_out_when_they_have_no_value(project, alice, monkeypatch):
    session = realistic_session(project, alice, monkeypatch)
    by_type = {}
    for event in session.events.order_by("pk"):
        by_type.setdefault(event.type, []).append(event.data)

    imported, compacted = by_type[EventType.COMPACTION_COMPLETED][:2]
    assert "run" not in imported and imported["trigger"] == "import"
    assert isinstance(compacted["run"], int)
    skipped = {s["reason"]: s for s in by_type[EventType.COMPACTION_SKIPPED]}
    assert "summary_tokens" not in skipped["under_threshold"]
    assert skipped["not_smaller"]["summary_tokens"] >= skipped["not_smaller"]["replaced_tokens"]
    failed = by_type[EventType.COMPACTION_FAILED]
    assert any("ZeroDivisionError" in f["error"] for f in failed)
    assert any(f["error"].startswith("interrupted") for f in failed)
    hidden, shown = by_type[EventType.MESSAGE_UPDATED]
    assert set(hidden["changes"]) == {"include_in_messages"}
    assert shown["changes"]["include_in_messages"] == {"from": False, "to": True}
    assert shown["changes"]["attributes"]["keys"] == ["checked"]
    assert (shown["changes"]["attributes"]["before"]["value"], shown["changes"]["attributes"]["after"]["value"]) == (
        {}, {"checked": True})
    built = RequestBuilt.model_validate(by_type[EventType.REQUEST_BUILT][0])
    assert built.unpersisted.count == 1 and built.compaction == "skipped"
    assert [o.tool_call_id for o in built.omitted] == ["c2"]
    assert CompactionCompleted.model_validate(compacted).covered_seq_range[1] == 6
