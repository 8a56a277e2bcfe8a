"""The demo data (sessions.ingest.demo.load_demo) shows automatic compaction as a real application sees it: the
long agent run's model input crosses max_tokens by at most one turn before each drop."""

import pytest

from sessions.ingest.demo import load_demo
from sessions.models import Event, EventType, Role, Session
from sessions.store.events import event_data

pytestmark = pytest.mark.django_db


def largest_turn(session: Session) -> int:
    """Tokens of the session's largest turn (a user message and what follows it)."""
    turns, tokens = [], 0
    for role, size in session.messages.order_by("seq").values_list("role", "tokens"):
        if role == Role.USER and tokens:
            turns.append(tokens)
            tokens = 0
        tokens += size
    return max(turns + [tokens])


def test_the_long_run_never_goes_over_max_tokens_by_more_than_one_turn():
    load_demo()
    session = Session.objects.get(key="long-agent-run")
    max_tokens = session.compaction_settings().max_tokens
    turn = largest_turn(session)
    appended = [event_data(e).input_tokens for e in Event.objects.filter(
        session=session, type=EventType.MESSAGES_APPENDED).order_by("pk")]
    compactions = [event_data(e) for e in Event.objects.filter(
        session=session, type=EventType.COMPACTION_COMPLETED).order_by("pk")]

    assert session.message_count == 5200 and turn < max_tokens / 20
    assert max(appended) <= max_tokens + turn, (max(appended), max_tokens, turn)
    assert all(c.tokens_before <= max_tokens + turn for c in compactions)
    assert len(compactions) >= 40, "the run is compacted all along, not in a few big batches"
    assert all(c.tokens_after <= max_tokens for c in compactions)
    assert sum(size > max_tokens for size in appended) <= len(compactions), "each crossing is compacted at once"
