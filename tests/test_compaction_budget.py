"""Bounded work per run (issue 15 item 3): a run covers at most CTXWEB_COMPACTION_RUN_MAX_TOKENS and
_BYTES, oldest whole turns first; a backlog is worked off by successive runs, each its own checkpoint
and events, and a run reads the content of the messages it covers only."""

import json
import tracemalloc
from io import StringIO
from itertools import pairwise

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.checks import check_compaction_defaults
from sessions.context.compaction import RunBudget, plan_compaction, resolve_settings
from sessions.context.compaction_runs import compact, work_off_backlog
from sessions.context.model_input import build_model_input
from sessions.context.summarizers import SUMMARIZERS, SummarizerError
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, Message, Session
from sessions.wire.openai import to_openai
from tests.builders import assistant, compaction_events, event_types, openai_input_problems, raw_log, user
from tests.transcripts import openai_conversations, to_ctxweb

pytestmark = pytest.mark.django_db

TURN = 200  # tokens of each old turn: a 120-token question and an 80-token answer
BUDGET = 3 * TURN  # a run covers three old turns


class RecordingSummarizer:
    """Stands in for `extractive`: records the previous summary and the messages of each run."""

    def __init__(self):
        self.calls: list[tuple[str, list[Message]]] = []
        self.error: Exception | None = None

    def __call__(self, previous, messages, budget):
        if self.error is not None:
            raise self.error
        self.calls.append((previous, list(messages)))
        return f"Summary {len(self.calls)}."


@pytest.fixture
def summarizer(monkeypatch, settings):
    settings.CTXWEB_SUMMARIZER = "extractive"
    settings.CTXWEB_SUMMARY_MAX_TOKENS = 2000
    fake = RecordingSummarizer()
    monkeypatch.setitem(SUMMARIZERS, "extractive", fake)
    return fake


@pytest.fixture
def small_budget(settings):
    settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS = BUDGET
    settings.CTXWEB_COMPACTION_RUN_MAX_BYTES = 10 * 1024 * 1024


def fresh(session) -> Session:
    return Session.objects.select_related("project").get(pk=session.pk)


def backlog(project, append, key, turns=20, max_tokens=1000, keep_recent_tokens=1) -> Session:
    """`turns` old turns of 200 tokens (seqs 1-2, 3-4, …) and a 30-token current question, stored with
    automatic compaction off, as an import would: the input is 4,033 tokens for 20 turns."""
    update_session(project, key, {"compaction": {
        "max_tokens": max_tokens, "keep_recent_tokens": keep_recent_tokens, "auto": False}})
    messages = []
    for n in range(1, turns + 1):
        messages += [user(120, f"question {n}"), assistant(80, f"answer {n}")]
    messages.append(user(30, "current question"))
    return append(key, messages).session


def covered_tokens(outcome) -> int:
    return outcome.plan.covered_tokens


# --- a backlog is worked off --------------------------------------------------------------------


def test_a_backlog_is_worked_off_by_successive_runs_each_its_own_checkpoint_and_events(
    project, append, summarizer, small_budget
):
    session = backlog(project, append, "backlog", turns=11)
    assert session.input_tokens > 2 * 1000

    outcomes = work_off_backlog(fresh(session))

    assert [o.status for o in outcomes] == ["completed"] * len(outcomes)
    assert len(outcomes) == 3  # 9 of the 11 old turns, three a run, leave 2 turns + the question
    assert event_types(session) == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"] * len(outcomes)
    checkpoints = list(Checkpoint.objects.filter(session=session).order_by("last_seq"))
    assert [c.pk for c in checkpoints] == [o.checkpoint.pk for o in outcomes]
    assert checkpoints[0].previous is None
    assert all(later.previous_id == earlier.pk for earlier, later in pairwise(checkpoints))
    completed = [e.data for e in compaction_events(session) if e.type == "COMPACTION_COMPLETED"]
    assert [d["still_over_threshold"] for d in completed] == [True, True, False]
    assert all(d["budget_reached"] is True for d in completed)
    assert fresh(session).input_tokens == build_model_input(fresh(session)).tokens <= 1000


def test_each_run_covers_the_oldest_whole_turns_within_the_token_budget(project, append, summarizer, small_budget):
    session = backlog(project, append, "oldest-first")

    outcomes = work_off_backlog(fresh(session))

    ranges = [(o.checkpoint.first_seq, o.checkpoint.last_seq) for o in outcomes]
    assert ranges == [(1, 6), (7, 12), (13, 18), (19, 24), (25, 30), (31, 36)]
    assert all(covered_tokens(o) <= BUDGET for o in outcomes)
    assert [[m.seq for m in messages] for _, messages in summarizer.calls] == [
        list(range(first, last + 1)) for first, last in ranges
    ]
    # Each run summarizes the previous summary and the newly covered turns.
    assert [previous for previous, _ in summarizer.calls] == [""] + [f"Summary {n}." for n in range(1, 6)]


def test_a_run_within_the_budget_of_everything_the_rules_cover_does_not_say_the_budget_was_reached(
    project, append, summarizer, small_budget
):
    session = backlog(project, append, "within", turns=3, max_tokens=500)

    outcome = compact(fresh(session))

    assert outcome.status == "completed"
    assert (outcome.checkpoint.first_seq, outcome.checkpoint.last_seq) == (1, 6)
    assert compaction_events(session)[-1].data["budget_reached"] is False


def test_a_turn_larger_than_the_budget_is_covered_alone(project, append, summarizer, settings):
    settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS = 100
    session = backlog(project, append, "oversized-turn", turns=3, max_tokens=300)

    outcome = compact(fresh(session))

    assert outcome.status == "completed"
    assert (outcome.checkpoint.first_seq, outcome.checkpoint.last_seq) == (1, 2)
    assert covered_tokens(outcome) == TURN > 100
    assert outcome.plan.budget_reached


def test_the_byte_budget_cuts_a_run_before_the_token_budget_does(project, append, summarizer, settings):
    # A 200-token turn weighs about 800 bytes as stored (content and text, one byte a character each).
    settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS = 1_000_000
    settings.CTXWEB_COMPACTION_RUN_MAX_BYTES = 2000
    session = backlog(project, append, "bytes", turns=6)

    outcome = compact(fresh(session))

    assert (outcome.checkpoint.first_seq, outcome.checkpoint.last_seq) == (1, 4)
    assert outcome.plan.budget_reached
    assert 2 * 700 < outcome.plan.covered_bytes <= 2000
    read = sum(len(m.text.encode()) for m in summarizer.calls[0][1])
    assert read <= outcome.plan.covered_bytes


# --- what a run reads ---------------------------------------------------------------------------


def loaded_messages(monkeypatch) -> list[int | None]:
    """The seq of every Message row loaded as a model instance (which is how content is read); None for
    a load without its seq (a deferred field fetched afterwards, one query per row)."""
    seqs: list[int | None] = []
    original = Message.from_db.__func__

    def from_db(cls, db, field_names, values):
        seqs.append(dict(zip(field_names, values, strict=True)).get("seq"))
        return original(cls, db, field_names, values)

    monkeypatch.setattr(Message, "from_db", classmethod(from_db))
    return seqs


def test_planning_reads_no_message_content(project, append, small_budget, monkeypatch):
    session = backlog(project, append, "plan-reads")
    seqs = loaded_messages(monkeypatch)

    with CaptureQueriesContext(connection) as queries:
        plan = plan_compaction(fresh(session), resolve_settings(session), budget=RunBudget.from_settings())

    assert (plan.first_seq, plan.last_seq, plan.budget_reached) == (1, 6, True)
    assert seqs == []
    assert len(queries) <= 4


def test_a_run_reads_the_content_of_the_messages_it_covers_only(
    project, append, summarizer, small_budget, monkeypatch
):
    session = backlog(project, append, "run-reads", turns=40)
    seqs = loaded_messages(monkeypatch)

    outcome = compact(fresh(session))

    assert (outcome.checkpoint.first_seq, outcome.checkpoint.last_seq) == (1, 6)
    assert seqs == [1, 2, 3, 4, 5, 6]


def test_a_runs_memory_is_bounded_by_its_budget_not_by_the_session(project, append, summarizer, settings):
    settings.CTXWEB_COMPACTION_RUN_MAX_BYTES = 200_000
    update_session(project, "big", {"compaction": {"max_tokens": 1000, "keep_recent_tokens": 1, "auto": False}})
    messages = []
    for n in range(60):  # 60 turns of about 80 KB as stored (content and text, 20 KB a message each)
        messages += [{"role": "user", "content": f"q{n} " + "lorem ipsum " * 1700},
                     {"role": "assistant", "content": f"a{n} " + "dolor sit " * 2000}]
    messages.append({"role": "user", "content": "And now?"})
    for start in range(0, len(messages), 50):
        session = append("big", messages[start:start + 50]).session

    tracemalloc.start()
    try:
        outcome = compact(fresh(session))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert (outcome.checkpoint.first_seq, outcome.checkpoint.last_seq) == (1, 4)
    assert outcome.plan.covered_bytes <= 200_000
    assert peak < 1_000_000, f"a run over a 4.8 MB session peaked at {peak:,} bytes"


# --- when the loop stops ------------------------------------------------------------------------


def test_the_loop_stops_when_a_run_covered_everything_it_could(project, append, summarizer, small_budget):
    # keep_recent_tokens keeps 18 old turns: only two can be covered, and the input stays over.
    session = backlog(project, append, "nothing-more", keep_recent_tokens=18 * TURN + 30)

    outcomes = work_off_backlog(fresh(session))

    assert [o.status for o in outcomes] == ["completed"]
    assert not outcomes[0].plan.budget_reached
    assert compaction_events(session)[-1].data["still_over_threshold"] is True
    assert event_types(session) == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]


def test_the_loop_stops_when_nothing_can_be_covered(project, append, summarizer, small_budget):
    update_session(project, "one-turn", {"compaction": {"max_tokens": 100, "auto": False}})
    session = append("one-turn", [user(120, "one long question"), assistant(80, "its answer")]).session

    outcomes = work_off_backlog(fresh(session))

    assert [(o.status, o.reason) for o in outcomes] == [("skipped", "nothing_to_compact")]
    assert summarizer.calls == []


def test_the_loop_stops_at_a_failed_run_and_changes_nothing_more(project, append, summarizer, small_budget):
    session = backlog(project, append, "failing")
    summarizer.error = SummarizerError("model unavailable")

    outcomes = work_off_backlog(fresh(session))

    assert [o.status for o in outcomes] == ["failed"]
    assert not Checkpoint.objects.filter(session=session).exists()


def test_max_runs_limits_the_runs(project, append, summarizer, small_budget):
    session = backlog(project, append, "two-runs")

    outcomes = work_off_backlog(fresh(session), max_runs=2)

    assert [o.checkpoint.last_seq for o in outcomes] == [6, 12]


# --- the rules that stay ------------------------------------------------------------------------


def test_a_supplied_summary_covers_everything_the_rules_cover_whatever_the_budget(
    project, append, summarizer, small_budget
):
    session = backlog(project, append, "supplied")

    outcome = compact(fresh(session), summary="What the application summarized.")

    assert (outcome.checkpoint.first_seq, outcome.checkpoint.last_seq) == (1, 40)
    assert not outcome.plan.budget_reached
    assert summarizer.calls == []


def test_the_default_budget_is_larger_than_the_default_threshold(settings):
    assert settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS == 200_000 > settings.CTXWEB_MAX_TOKENS
    assert settings.CTXWEB_COMPACTION_RUN_MAX_BYTES == 4 * 1024 * 1024


@pytest.mark.parametrize("name", ["CTXWEB_COMPACTION_RUN_MAX_TOKENS", "CTXWEB_COMPACTION_RUN_MAX_BYTES"])
def test_a_budget_under_one_is_a_configuration_error(settings, name):
    setattr(settings, name, 0)

    errors = check_compaction_defaults(None)

    assert [e.msg for e in errors] == [f"{name} must be at least 1{' byte' if name.endswith('BYTES') else ''}."]


def test_the_compact_command_works_off_a_backlog_and_prints_each_run(project, append, small_budget, settings):
    settings.CTXWEB_SUMMARIZER = "extractive"
    session = backlog(project, append, "command")
    out = StringIO()

    call_command("compact", "command", stdout=out)

    text = out.getvalue()
    assert text.startswith("run 1: completed")
    assert "budget_reached: True" in text
    assert fresh(session).input_tokens <= 1000
    assert Checkpoint.objects.filter(session=session).count() == text.count(": completed") > 1


# --- a real transcript --------------------------------------------------------------------------

TAU = max((c for c in openai_conversations() if c[0].startswith("tau-bench")), key=lambda c: len(json.dumps(c[1])))


def test_a_real_transcript_is_worked_off_in_whole_turns_and_its_model_input_stays_valid(project, settings):
    settings.CTXWEB_SUMMARIZER = "extractive"
    settings.CTXWEB_SUMMARY_MAX_TOKENS = 2000
    settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS = 400
    label, messages = TAU
    update_session(project, "tau", {"compaction": {"max_tokens": 600, "keep_recent_tokens": 100, "auto": False}})
    session = append_messages(project, "tau", [to_ctxweb(m) for m in messages]).session
    stored = raw_log(session)

    outcomes = work_off_backlog(fresh(session))

    assert len(outcomes) > 1, label
    assert [o.status for o in outcomes] == ["completed"] * len(outcomes), [(o.status, o.reason) for o in outcomes]
    visible = Message.objects.filter(session=session, include_in_messages=True).exclude(role="system")
    for outcome in outcomes:
        checkpoint = outcome.checkpoint
        covered_users = visible.filter(seq__range=(checkpoint.first_seq, checkpoint.last_seq), role="user").count()
        assert outcome.plan.covered_tokens <= 400 or covered_users <= 1, "over the budget only for one turn"
        after = visible.filter(seq__gt=checkpoint.last_seq).order_by("seq").first()
        assert after is None or after.role == "user", "a turn is never split"
    assert openai_input_problems(to_openai(build_model_input(fresh(session)))) == []
    assert raw_log(session) == stored
    # What is left over max_tokens is the current turn, which no run may cover.
    left = plan_compaction(fresh(session), resolve_settings(fresh(session)), budget=RunBudget.from_settings())
    assert left.last_seq is None


def test_with_automatic_compaction_on_the_queue_works_off_a_backlog_run_after_run(
    project, append, summarizer, small_budget
):
    """A session whose backlog was imported with automatic compaction off, then turned on: the next
    append enqueues one run; each completed run that its budget cut short enqueues the next, until the
    input is under max_tokens (the worker here is instant, tests/conftest.py)."""
    from sessions.access.api_keys import create_api_key
    from sessions.models import CompactionRun
    from tests.api.conftest import Api

    session = backlog(project, append, "queued-backlog", turns=11)
    api = Api(create_api_key(project, "backlog")[1])
    api.put("/sessions/queued-backlog", {"compaction": {"auto": True}})

    response = api.post("/sessions/queued-backlog/messages", {"messages": [assistant(20, "an answer")]})

    assert response.status_code == 200 and response.json()["compaction"]["status"] == "completed"

    runs = list(CompactionRun.objects.filter(session=session).order_by("pk"))
    assert [run.state for run in runs] == ["completed"] * 3
    assert [run.outcome["budget_reached"] for run in runs] == [True, True, True]
    assert [run.outcome["still_over_threshold"] for run in runs] == [True, True, False]
    assert event_types(session) == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"] * 3
    assert fresh(session).input_tokens == build_model_input(fresh(session)).tokens <= 1000
