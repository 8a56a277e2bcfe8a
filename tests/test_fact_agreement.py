"""One extractor of salient literals and one rule for "the summary carries it" (sessions/context/facts.py),
whoever asks: a checkpoint's figures (facts kept and lost, its lost list), the lost-facts filter of the
sessions list, and Trace. Property over every transcript of tests/data: compacted under a summary that
carries a few of its facts, each checkpoint's lost list is exactly the covered messages' literals the
summary does not carry; every literal Trace finds in a covered message it calls carried or not as the
checkpoint does; and a literal Trace reports lost at a checkpoint is in that checkpoint's lost list."""

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.facts import MAX_STORED, carries, fold, tally
from sessions.context.trace import MAX_QUERY, trace
from sessions.models import Checkpoint, Session
from sessions.store.listing import SessionFilters, find_sessions

pytestmark = pytest.mark.django_db
SESSIONS_PER_FILE = 3
TRACED_LOST, TRACED_KEPT = 12, 6


def sessions_of(imported_files) -> list[Session]:
    """The longest few sessions of each imported file."""
    chosen = []
    for project, _ in imported_files.values():
        chosen += list(Session.objects.filter(project=project, message_count__gte=6)
                       .order_by("-message_count", "key")[:SESSIONS_PER_FILE])
    return chosen


def covered(session: Session, checkpoint: Checkpoint):
    """The messages a checkpoint's summary newly stands for that the model would have seen."""
    return (session.messages.filter(seq__gte=checkpoint.first_seq, seq__lte=checkpoint.last_seq,
                                    include_in_messages=True)
            .exclude(role="system").order_by("seq"))


def traceable(literal: str) -> bool:
    return "*" not in literal and len(literal.strip()) >= 2 and len(" ".join(literal.split())) <= MAX_QUERY


def test_checkpoints_and_trace_agree_on_every_literal_of_every_transcript(imported_files):
    disagreements, checked, traced = [], 0, 0
    for session in sessions_of(imported_files):
        tallies = tally(covered(session, Checkpoint(first_seq=1, last_seq=session.message_count // 2)))
        if not tallies:
            continue
        # A summary that carries a few of the facts (the first three), so both kinds are there.
        summary = "Earlier in this conversation: " + "; ".join(t.text for t in list(tallies.values())[:3]) + "."
        outcome = compact(session, force=True, keep_recent_tokens=1, summary=summary)
        if outcome.status != "completed":
            continue
        checkpoint = outcome.checkpoint
        name = f"{session.project.name}/{session.key}"
        folded = fold(checkpoint.summary)
        facts = tally(covered(session, checkpoint))
        expected = {key for key, t in facts.items() if not carries(folded, t.text)}
        stored = {fold(item["text"]) for item in checkpoint.lost_facts}
        checked += 1
        if (checkpoint.facts_lost, checkpoint.facts_kept) != (len(expected), len(facts) - len(expected)):
            disagreements.append(f"{name}: figures {checkpoint.facts_lost}/{checkpoint.facts_kept}, "
                                 f"expected {len(expected)}/{len(facts) - len(expected)}")
        if (stored != expected) if len(expected) <= MAX_STORED else not stored <= expected:
            disagreements.append(f"{name}: lost list differs: {sorted(stored ^ expected)[:5]}")
        listed = find_sessions([session.project_id], SessionFilters(lost_facts=True)).filter(pk=session.pk).exists()
        if listed != bool(expected):
            disagreements.append(f"{name}: lost-facts filter says {listed}, the checkpoint lost {len(expected)}")

        lost = [t for key, t in facts.items() if key in expected and traceable(t.text)][:TRACED_LOST]
        kept = [t for key, t in facts.items() if key not in expected and traceable(t.text)][:TRACED_KEPT]
        for fact in lost + kept:
            traced += 1
            found = trace(Session.objects.get(pk=session.pk), fact.text)
            in_covered = [row for row in found.rows
                          if checkpoint.first_seq <= row.seq <= checkpoint.last_seq and row.sent]
            if not in_covered:
                disagreements.append(f"{name}: Trace finds {fact.text!r} in no covered message (seqs {fact.seqs})")
                continue
            verdicts = {c.carries for row in in_covered for c in row.coverage if c.checkpoint.pk == checkpoint.pk}
            if verdicts != {fold(fact.text) not in expected}:
                disagreements.append(f"{name}: Trace says carried={verdicts} for {fact.text!r}, the checkpoint "
                                     f"{'lost' if fold(fact.text) in expected else 'kept'} it")
            if found.lost_at is not None and found.lost_at.pk == checkpoint.pk and fold(fact.text) not in stored:
                disagreements.append(f"{name}: Trace reports {fact.text!r} lost at the checkpoint; its list lacks it")
            if found.fact_kind is None:
                disagreements.append(f"{name}: Trace does not count {fact.text!r} as a fact ({fact.kind})")
    assert checked >= 8 and traced >= 60, (checked, traced)
    assert not disagreements, "\n".join(disagreements[:15])
