"""sessions.context.checkpoints.create_imported_checkpoint: a compaction made elsewhere, recreated over the
raw log with the same bookkeeping as one ctxweb made itself."""

import pytest

from sessions.context.checkpoints import create_imported_checkpoint
from sessions.context.model_input import build_model_input, summary_message_tokens
from sessions.errors import Conflict, DomainError
from sessions.models import Event, EventType, Session
from tests.builders import assistant, call, tool, user


@pytest.fixture
def session(append):
    append("s", [
        user(40, "First question"), assistant(30, "First answer"),
        user(40, "Second question"), assistant(20, "Calling", tool_calls=[call("c1", "lookup")]),
        tool(25, "c1", "Looked up"), assistant(30, "Second answer"),
        user(40, "Third question"),
    ])
    return Session.objects.get(key="s")


def test_it_covers_up_to_last_seq_and_refreshes_the_session(session):
    checkpoint, created = create_imported_checkpoint(session, 2, "Q1 answered.", "import")

    session.refresh_from_db()
    assert created
    assert (checkpoint.first_seq, checkpoint.last_seq, checkpoint.created_at_seq) == (1, 2, 7)
    assert checkpoint.previous is None
    assert checkpoint.summary_tokens == summary_message_tokens("Q1 answered.", 2)
    assert checkpoint.replaced_tokens == 70
    assert checkpoint.tokens_after == session.input_tokens == build_model_input(session).tokens
    assert checkpoint.tokens_before == checkpoint.tokens_after + 70 - checkpoint.summary_tokens
    assert session.checkpoint_count == 1


def test_it_records_compaction_completed_with_trigger_import(session):
    checkpoint, _ = create_imported_checkpoint(session, 2, "Q1 answered.", "import", created_at_seq=3)

    event = Event.objects.get(session=session, type=EventType.COMPACTION_COMPLETED)
    assert event.actor == "import"
    assert event.data == {
        "trigger": "import", "max_tokens": 100_000, "keep_recent_tokens": 20_000,
        "tokens_before": checkpoint.tokens_before, "summarizer": "import", "checkpoint_id": checkpoint.pk,
        "at_seq": 3, "covered_seq_range": [1, 2], "replaced_tokens": 70,
        "summary_tokens": checkpoint.summary_tokens, "tokens_after": checkpoint.tokens_after,
        "still_over_threshold": False, "lost_count": checkpoint.facts_lost,
    }


def test_a_second_one_extends_the_first_and_replaces_its_summary(session):
    first, _ = create_imported_checkpoint(session, 2, "Q1 answered.")
    second, _ = create_imported_checkpoint(session, 6, "Q1 and Q2 answered.")

    assert second.previous == first and second.first_seq == 3
    assert second.replaced_tokens == first.summary_tokens + 40 + 20 + 25 + 30
    assert Session.objects.get(pk=session.pk).checkpoint_count == 2


def test_the_same_checkpoint_again_is_not_created_twice(session):
    first, _ = create_imported_checkpoint(session, 2, "Q1 answered.")
    events = Event.objects.count()

    again, created = create_imported_checkpoint(session, 2, "  Q1 answered.\n")

    assert again == first and not created
    assert Event.objects.count() == events
    assert Session.objects.get(pk=session.pk).checkpoint_count == 1


def test_the_same_cut_with_another_summary_is_a_conflict(session):
    create_imported_checkpoint(session, 2, "Q1 answered.")

    with pytest.raises(Conflict) as error:
        create_imported_checkpoint(session, 2, "Something else.")
    assert error.value.code == "checkpoint_conflict"


@pytest.mark.parametrize("last_seq", [0, 8])
def test_it_refuses_a_cut_outside_the_raw_log(session, last_seq):
    with pytest.raises(DomainError) as error:
        create_imported_checkpoint(session, last_seq, "Nope.")
    assert error.value.code == "invalid_checkpoint"


def test_it_refuses_a_cut_before_the_latest_checkpoint(session):
    create_imported_checkpoint(session, 4, "Q1 and a call.")

    with pytest.raises(DomainError) as error:
        create_imported_checkpoint(session, 2, "Q1 answered.")
    assert error.value.code == "checkpoint_out_of_order"


def test_it_needs_a_summary(session):
    with pytest.raises(DomainError) as error:
        create_imported_checkpoint(session, 2, "  ")
    assert error.value.code == "invalid_summary"
