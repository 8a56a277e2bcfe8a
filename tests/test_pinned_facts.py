"""Pinned facts (issue 41, items 1-2; sessions/context/pinned.py): literals a project or a session declares
that no checkpoint may lose. The extractive summarizer's budget leaves room for them, a summary that lacks
one (an LLM's, one supplied with the request) gets a Pinned: line, COMPACTION_COMPLETED records what was
added, and a run that cannot carry them within the summary's limit fails saying so."""

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.pinned import PINNED_HEAD, clean_pinned, facts_of, line_tokens, pinned_literals
from sessions.errors import DomainError
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, EventType, Session
from sessions.wire.tokens import count_text

pytestmark = pytest.mark.django_db

ORDER = {"name": "order id", "pattern": "W[0-9]{7}"}


def turns(count: int, order_at: int = 0) -> list[dict]:
    """A long support chat; the order id is said once, in turn `order_at`."""
    messages = []
    for n in range(count):
        said = " By the way, my order is W2378156 and there must be no peanuts in it." if n == order_at else ""
        messages += [{"role": "user", "content": f"Question {n} about the delivery of my parcel. " + "detail " * 60 + said},
                     {"role": "assistant", "content": f"Answer {n}: the parcel moves on. " + "words " * 40}]
    return messages


def session_with(project, key="chat", pinned=(ORDER,), count=12) -> Session:
    append_messages(project, key, turns(count), "test")
    update_session(project, key, {"pinned_facts": list(pinned), "compaction": {"auto": False}})
    return Session.objects.get(project=project, key=key)


@pytest.mark.parametrize(("items", "problem"), [
    ("W[0-9]+", "is a list"),
    ([{"name": "x", "pattern": "a"}] * 21, "at most 20"),
    ([{"name": "x"}], "pinned_facts[0] is"),
    ([{"name": "x", "pattern": "a", "value": "b"}], "pinned_facts[0] is"),
    ([{"name": "", "pattern": "a"}], "name is 1-50"),
    ([{"name": "x", "pattern": "a"}, {"name": "x", "value": "b"}], "given twice"),
    ([{"name": "x", "pattern": "(?=W)W"}], "RE2"),
    ([{"name": "x", "pattern": "a*"}], "matches the empty text"),
    ([{"name": "x", "value": "v" * 201}], "1-200"),
    ([{"name": "x", "pattern": 5}], "1-200"),
])
def test_a_pinned_fact_that_does_not_check_out_is_refused(items, problem):
    with pytest.raises(DomainError) as caught:
        clean_pinned(items)
    assert problem in caught.value.detail and caught.value.code == "invalid_pinned_facts"


def test_patterns_and_values_find_their_literals_once_in_order():
    facts = facts_of([ORDER, {"name": "card last four", "value": "7447"}])
    texts = ["Order W2378156 and W1111111", "card 7447, again W2378156", "nothing"]
    assert pinned_literals(facts, texts) == [("order id", "W2378156"), ("order id", "W1111111"),
                                             ("card last four", "7447")]


def test_the_extractive_summarizer_keeps_a_pinned_value_it_would_have_dropped(project):
    """A constraint the user stated deep in a long message: the digest cuts the message short, and its
    facts line keeps ids and amounts, not such words. Pinned, it is carried."""
    constraint = {"name": "constraint", "value": "no peanuts"}
    unpinned = session_with(project, "unpinned", pinned=())
    outcome = compact(unpinned, force=True, max_tokens=100_000, keep_recent_tokens=200)
    assert outcome.checkpoint is not None and "no peanuts" not in outcome.checkpoint.summary  # lost unpinned

    session = session_with(project, pinned=[constraint])
    outcome = compact(session, force=True, max_tokens=100_000, keep_recent_tokens=200)
    checkpoint = outcome.checkpoint
    assert "no peanuts" in checkpoint.summary
    event = outcome.events[-1]
    assert event.type == EventType.COMPACTION_COMPLETED
    assert event.data["pinned_added"] == {"values": ["no peanuts"], "tokens": line_tokens([("constraint", "no peanuts")])}
    assert checkpoint.summary.endswith("\n" + PINNED_HEAD + "no peanuts")


def test_the_next_checkpoint_carries_it_on_and_a_project_pin_applies_to_every_session(project):
    project.pinned_facts = [ORDER]
    project.save()
    append_messages(project, "chat", turns(12), "test")
    update_session(project, "chat", {"compaction": {"auto": False}})
    first = compact(Session.objects.get(key="chat"), force=True, max_tokens=100_000, keep_recent_tokens=800)
    assert first.checkpoint is not None and "W2378156" in first.checkpoint.summary
    append_messages(project, "chat", turns(12, order_at=-1), "test")
    second = compact(Session.objects.get(key="chat"), force=True, max_tokens=100_000, keep_recent_tokens=200,
                     summary="The customer kept asking about the parcel.")
    assert second.status == "completed", second
    assert second.checkpoint.previous_id == first.checkpoint.pk
    assert second.checkpoint.summary.endswith("Pinned: W2378156")  # from the summary it replaces


def test_a_supplied_summary_that_lacks_a_pinned_value_gets_it_added(project):
    session = session_with(project)
    outcome = compact(session, force=True, max_tokens=100_000, keep_recent_tokens=200,
                      summary="The customer asked about a parcel.")
    assert outcome.checkpoint.summary == "The customer asked about a parcel.\nPinned: W2378156"
    assert outcome.events[-1].data["pinned_added"]["values"] == ["W2378156"]
    carried = compact(session_with(project, "carried"), force=True, max_tokens=100_000, keep_recent_tokens=200,
                      summary="Order W2378156 is late.")
    assert carried.checkpoint.summary == "Order W2378156 is late."
    assert "pinned_added" not in carried.events[-1].data


def test_a_run_that_cannot_carry_its_pinned_values_fails_and_says_so(project, settings):
    settings.CTXWEB_SUMMARY_MAX_TOKENS = 60  # the summary's limit; the pins below need more
    session = session_with(project, pinned=[{"name": "turns", "pattern": "(Question|Answer) [0-9]+"}])
    outcome = compact(session, force=True, max_tokens=100_000, keep_recent_tokens=200)
    assert outcome.status == "failed" and outcome.checkpoint is None
    event = outcome.events[-1]
    assert event.type == EventType.COMPACTION_FAILED
    assert "pinned values" in event.data["error"] and "do not fit the summary's limit of 60 tokens" in event.data["error"]
    assert not Checkpoint.objects.filter(session=session).exists()


def test_a_pinned_line_is_counted_in_the_summary_tokens(project):
    session = session_with(project)
    outcome = compact(session, force=True, max_tokens=100_000, keep_recent_tokens=200, summary="Short.")
    assert count_text(outcome.checkpoint.summary) == count_text("Short.\nPinned: W2378156")
