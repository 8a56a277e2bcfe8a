"""How many of the salient literals (sessions/context/facts.py) of real transcripts (tests/data) the extractive
summarizer keeps, without and with keeping facts (issue 21.3). Every conversation is stored, all its
turns but the last are summarized as one compaction would (a one-turn agent run whole), and the share of the covered messages'
distinct literals that the summary carries is summed over the conversations. Figures are printed
(run with -s) and quoted in docs/compaction.md."""

import pytest
from django.conf import settings

from sessions.context.compaction import SUMMARY_MIN_TOKENS
from sessions.context.facts import report
from sessions.context.model_input import split_turns
from sessions.context.summarizers import extractive_digest
from sessions.ingest.append import append_messages
from sessions.models import Message, Session
from sessions.wire.tokens import count_text
from tests.transcripts import openai_conversations, to_ctxweb

pytestmark = pytest.mark.django_db

BATCH = 500


def compaction_budget(tokens: int) -> int:
    """sessions.context.compaction.summary_budget for a run replacing `tokens`."""
    return max(SUMMARY_MIN_TOKENS, min(settings.CTXWEB_SUMMARY_MAX_TOKENS, tokens // 2))


@pytest.fixture(scope="module")
def covered_sets(django_db_setup, django_db_blocker):
    """(label, covered messages) for every real conversation: what a compaction keeping only the last
    turn would cover."""
    from tests.conftest import seeded_for_module

    with seeded_for_module(django_db_blocker):
        from sessions.models import Project

        project, _ = Project.objects.get_or_create(name="facts")
        out = []
        for label, messages in openai_conversations():
            key = label[:180].replace(" ", "-")
            batch = [to_ctxweb(m) for m in messages]
            for start in range(0, len(batch), BATCH):
                append_messages(project, key, batch[start:start + BATCH], "test")
            session = Session.objects.get(project=project, key=key)
            visible = list(
                Message.objects.filter(session=session, include_in_messages=True).exclude(role="system").order_by("seq")
            )
            turns = split_turns(visible)
            # A one-turn agent run (mini-swe-agent) is never covered by compaction, which keeps the
            # current turn; it is summarized whole, as the summarizer tests do.
            out.append((label, [m for turn in turns[:-1] for m in turn] if len(turns) > 1 else visible))
        yield out


def share(covered_sets, budget_of, keep_facts: bool) -> tuple[int, int]:
    kept = total = 0
    for _, covered in covered_sets:
        budget = budget_of(sum(m.tokens for m in covered))
        digest = extractive_digest("", covered, budget, keep_facts=keep_facts)
        assert count_text(digest.text) <= budget
        facts = report(digest.text, covered)
        kept += facts.kept
        total += facts.kept + facts.lost_count
    return kept, total


BUDGETS = {
    "compaction budget (half of what is replaced, at most 2,000 tokens)": compaction_budget,
    "tight budget (a tenth of what is replaced)": lambda tokens: max(SUMMARY_MIN_TOKENS, tokens // 10),
}


@pytest.mark.parametrize("name", list(BUDGETS))
def test_keeping_facts_raises_the_share_of_salient_literals_the_extractive_summary_keeps(covered_sets, name):
    budget_of = BUDGETS[name]

    before_kept, total = share(covered_sets, budget_of, keep_facts=False)
    after_kept, after_total = share(covered_sets, budget_of, keep_facts=True)

    assert after_total == total
    before, after = before_kept / total, after_kept / total
    print(f"\n[fact share] {name}: {len(covered_sets)} conversations, {total} distinct salient literals; "
          f"kept before {before_kept} ({before:.1%}), after {after_kept} ({after:.1%})")
    assert len(covered_sets) == 203
    assert after > before + 0.05
