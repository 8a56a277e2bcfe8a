"""Pinned facts on real conversations (issue 41, done-when): the 203 conversations of tests/data, with their
ids, amounts and names pinned by patterns, compacted by the extractive summarizer, then again by the `openai`
summarizer against a local stub whose summary carries none of them: no checkpoint loses a pinned value."""

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.facts import carries, fold
from sessions.context.pinned import facts_of, pinned_literals
from sessions.ingest.append import append_messages
from sessions.models import Checkpoint, Message, Session
from tests.transcripts import openai_conversations, to_ctxweb

pytestmark = pytest.mark.django_db

PINNED = [
    {"name": "user id", "pattern": r"\b[a-z]+_[a-z]+_[0-9]{4}\b"},  # mia_li_3668
    {"name": "reservation", "pattern": r"\b[A-Z0-9]{6}\b"},  # NO6JO3, and flight numbers such as HAT069
    {"name": "order id", "pattern": r"#W[0-9]{7}"},
    {"name": "amount", "pattern": r"\$[0-9][0-9,]*(?:\.[0-9]{2})?"},
    {"name": "name", "pattern": r"(?:first|last)_name\": \"[A-Z][a-z]+"},
]


def lost(checkpoint: Checkpoint, facts) -> list[str]:
    """The pinned literals of what the checkpoint covers (its previous summary, its messages) it does not carry."""
    # What the model saw of them: a system message of the raw log is not sent (the session's instructions are).
    messages = (Message.objects.filter(session=checkpoint.session, seq__lte=checkpoint.last_seq, include_in_messages=True)
                .exclude(role="system"))
    texts = [checkpoint.previous.summary if checkpoint.previous else ""]
    for message in messages.only("text", "tool_calls"):
        texts.append(message.text)
        texts += [str(call.get("arguments", "")) for call in message.tool_calls or ()]
    folded = fold(checkpoint.summary)
    return [literal for _, literal in pinned_literals(facts, texts) if not carries(folded, literal)]


def test_no_checkpoint_of_the_real_conversations_loses_a_pinned_value(project, openai_stub):
    project.pinned_facts = PINNED
    project.save()
    facts = facts_of(PINNED)
    openai_stub.reply = "The customer and the agent talked about the booking."  # carries no pinned value
    outcomes = {"extractive": [], "openai": []}
    for number, (label, messages) in enumerate(openai_conversations()):
        key = f"conversation-{number}"
        append_messages(project, key, [to_ctxweb(m) for m in messages], "test")
        for summarizer, keep in (("extractive", 1500), ("openai", 300)):
            outcome = compact(Session.objects.get(project=project, key=key), force=True, max_tokens=1_000_000,
                              keep_recent_tokens=keep, summarizer=summarizer)
            outcomes[summarizer].append((label, outcome))
    checkpoints = list(Checkpoint.objects.filter(session__project=project).select_related("session", "previous"))
    losses = {c.session.key: missing for c in checkpoints if (missing := lost(c, facts))}
    assert losses == {}
    completed = {name: sum(o.status == "completed" for _, o in runs) for name, runs in outcomes.items()}
    failed = [(label, o.error) for runs in outcomes.values() for label, o in runs if o.status == "failed"]
    added = sum(1 for runs in outcomes.values() for _, o in runs if o.status == "completed"
                and "pinned_added" in o.events[-1].data)
    print(f"\n203 conversations: {completed} checkpoints completed, {added} with pinned values added back, "
          f"{len(failed)} runs failed: {failed[:3]}")
    # Conversations shorter than what the extractive run keeps have nothing for it to cover (119 of 203 had,
    # 182 for the second run, which keeps less, when this was written).
    assert completed["extractive"] >= 100 and completed["openai"] >= 150 and added >= 200
    assert all("pinned value" in error for _, error in failed)  # a run fails only to keep its pins
