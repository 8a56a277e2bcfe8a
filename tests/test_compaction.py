"""Compaction: which turns a checkpoint covers, what the summarizer gets, what is recorded,
and what the model input (§2) looks like afterwards. Message sizes are exact (tests/builders.py)."""

import json
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sessions.context.compaction import current_turn, oversized_turn, run_attempt
from sessions.context.compaction_runs import compact, compact_if_needed, run_outcome
from sessions.context.model_input import (
    build_model_input,
    layout_model_input,
    stored_layout,
    summary_message_text,
)
from sessions.context.summarizers import SUMMARIZERS
from sessions.errors import Conflict
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, CompactionRun, Event, Message, Session
from sessions.wire.openai import to_openai
from sessions.wire.tokens import count_message, load_encoding
from tests.builders import (
    agent,
    assistant,
    call,
    compaction_events,
    event_types,
    input_tokens,
    openai_input_problems,
    raw_log,
    tool,
    user,
)
from tests.transcripts import DATA, openai_conversations, to_ctxweb

pytestmark = pytest.mark.django_db

STARTED, COMPLETED = "COMPACTION_STARTED", "COMPACTION_COMPLETED"
SKIPPED, FAILED = "COMPACTION_SKIPPED", "COMPACTION_FAILED"
FIGURES = {"trigger", "max_tokens", "keep_recent_tokens", "tokens_before"}
COMPLETED_FIGURES = FIGURES | {
    "checkpoint_id", "covered_seq_range", "replaced_tokens", "summary_tokens", "tokens_after",
    "still_over_threshold",
}


@dataclass
class SummarizerCall:
    previous: str
    messages: list
    budget: int

    @property
    def seqs(self) -> list[int]:
        return [m.seq for m in self.messages]


class FakeSummarizer:
    """Stands in for `extractive`: records what it receives, then runs `during` and answers `text`."""

    def __init__(self):
        self.text = "Short summary."
        self.calls: list[SummarizerCall] = []
        self.during = None

    def __call__(self, previous_summary, messages, budget):
        self.calls.append(SummarizerCall(previous_summary, list(messages), budget))
        if self.during is not None:
            result = self.during()
            if isinstance(result, str):
                return result
        return self.text


@pytest.fixture(autouse=True)
def compaction_defaults(settings):
    settings.CTXWEB_SUMMARIZER = "extractive"
    settings.CTXWEB_AUTO_COMPACT = True
    settings.CTXWEB_SUMMARY_MAX_TOKENS = 2000


@pytest.fixture
def summarizer(monkeypatch):
    fake = FakeSummarizer()
    monkeypatch.setitem(SUMMARIZERS, "extractive", fake)
    return fake


def fresh(session) -> Session:
    """The session as a new request (or a restarted server) would load it."""
    return Session.objects.select_related("project").get(pk=session.pk)


def model_input(session):
    return build_model_input(fresh(session))


def message_seqs(mi) -> list[int]:
    return [e.seq for e in mi.entries if e.kind == "message"]


def snapshot(mi) -> list[tuple]:
    return [
        (e.kind, e.role, json.dumps(e.content), e.tokens, e.seq, e.client_id, e.tool_calls, e.tool_call_id, e.name)
        for e in mi.entries
    ]


def configure(project, key, **compaction):
    update_session(project, key, {"compaction": compaction})


def two_old_turns_and_a_question(append, key):
    """Turns of 200, 200 and 30 tokens: seqs 1-2, 3-4 and 5. Model input: 433 tokens."""
    return append(key, [
        user(120, "first question"),
        assistant(80, "first answer"),
        user(120, "second question"),
        assistant(80, "second answer"),
        user(30, "current question"),
    ]).session


# --- when compaction runs ------------------------------------------------------------------------


def auto_compaction(session):
    """What an append does after storing its messages: enqueue automatic compaction when it is needed.
    The instant test worker (tests/conftest.py) runs it at once; this is the finished run's outcome."""
    run = compact_if_needed(session)
    if run is None:
        return None
    run.refresh_from_db()
    assert run.state not in ("queued", "running")
    return run_outcome(run)


def test_automatic_compaction_does_not_run_at_the_threshold_and_records_nothing(project, append, summarizer):
    session = two_old_turns_and_a_question(append, "at-threshold")
    assert model_input(session).tokens == input_tokens(200, 200, 30) == 433
    configure(project, "at-threshold", max_tokens=433, keep_recent_tokens=50)
    events_before = Event.objects.filter(session=session).count()

    outcome = auto_compaction(fresh(session))
    direct = compact(fresh(session), trigger="auto")

    assert outcome is None or outcome.status == "not_run"
    assert direct.status == "not_run"
    assert Event.objects.filter(session=session).count() == events_before
    assert not Checkpoint.objects.filter(session=session).exists()
    assert summarizer.calls == []
    assert message_seqs(model_input(session)) == [1, 2, 3, 4, 5]


def test_automatic_compaction_runs_one_token_over_the_threshold(project, append, summarizer):
    session = two_old_turns_and_a_question(append, "over-threshold")
    configure(project, "over-threshold", max_tokens=432, keep_recent_tokens=50)

    outcome = auto_compaction(fresh(session))

    assert outcome is not None and outcome.status == "completed"
    assert event_types(session) == [STARTED, COMPLETED]
    started, completed = compaction_events(session)
    assert started.data["trigger"] == completed.data["trigger"] == "auto"
    assert started.data["tokens_before"] == 433
    assert started.data["max_tokens"] == 432
    assert outcome.checkpoint.last_seq == 4


def test_requested_compaction_under_the_threshold_is_recorded_as_skipped(project, append, summarizer):
    session = two_old_turns_and_a_question(append, "under")

    outcome = compact(fresh(session), max_tokens=1000, keep_recent_tokens=50)

    assert (outcome.status, outcome.reason) == ("skipped", "under_threshold")
    assert event_types(session) == [STARTED, SKIPPED]
    started, skipped = compaction_events(session)
    assert skipped.data["reason"] == "under_threshold"
    assert FIGURES <= set(started.data) and FIGURES <= set(skipped.data)
    assert skipped.data["trigger"] == "request"
    assert skipped.data["tokens_before"] == 433
    assert not Checkpoint.objects.filter(session=session).exists()
    assert summarizer.calls == []


def test_requested_compaction_exactly_at_the_threshold_is_skipped(project, append, summarizer):
    session = two_old_turns_and_a_question(append, "at-threshold-request")

    outcome = compact(fresh(session), max_tokens=433, keep_recent_tokens=50)

    assert (outcome.status, outcome.reason) == ("skipped", "under_threshold")
    assert event_types(session) == [STARTED, SKIPPED]


def test_forced_compaction_runs_under_the_threshold(project, append, summarizer):
    session = two_old_turns_and_a_question(append, "forced")

    outcome = compact(fresh(session), force=True, max_tokens=1000, keep_recent_tokens=50)

    assert outcome.status == "completed"
    assert event_types(session) == [STARTED, COMPLETED]
    assert compaction_events(session)[1].data["still_over_threshold"] is False
    assert outcome.checkpoint.last_seq == 4


# --- what is covered and what the model input looks like afterwards ------------------------------


def test_a_compaction_covers_old_turns_and_puts_the_summary_after_the_instructions(project, append, summarizer):
    update_session(project, "basic", {"instructions": "You are a careful assistant."})
    instructions = count_message("system", "You are a careful assistant.").total
    session = append("basic", [
        user(120, "first question"),
        assistant(80, "first answer"),
        user(120, "second question"),
        assistant(80, "second answer"),
        user(60, "third question"),
        assistant(40, "third answer"),
        user(30, "current question"),
    ]).session
    tokens_before = input_tokens(200, 200, 100, 30, instructions=instructions)
    assert model_input(session).tokens == tokens_before

    # Kept from the newest: 30 (current), +100 = 130 <= 150, +200 > 150: turns 1 and 2 are covered.
    outcome = compact(fresh(session), max_tokens=300, keep_recent_tokens=150)

    assert outcome.status == "completed", outcome
    checkpoint = Checkpoint.objects.get(session=session)
    assert (checkpoint.first_seq, checkpoint.last_seq, checkpoint.previous) == (1, 4, None)
    assert checkpoint.summary == "Short summary."
    assert [c.seqs for c in summarizer.calls] == [[1, 2, 3, 4]]
    assert summarizer.calls[0].previous == ""

    mi = model_input(session)
    assert [e.kind for e in mi.entries] == ["instructions", "summary", "message", "message", "message"]
    assert mi.entries[0].content == "You are a careful assistant."
    summary_entry = mi.entries[1]
    assert summary_entry.role == "user"
    assert summary_entry.content.startswith("Summary of the earlier conversation")
    assert summary_entry.content.endswith("Short summary.")
    assert summary_entry.content == summary_message_text("Short summary.", 4)
    summary_tokens = count_message("user", summary_entry.content).total
    assert summary_entry.tokens == checkpoint.summary_tokens == outcome.summary_tokens == summary_tokens
    assert message_seqs(mi) == [5, 6, 7]
    assert all(e.seq > checkpoint.last_seq for e in mi.entries if e.seq is not None)
    assert outcome.tokens_after == mi.tokens == input_tokens(summary_tokens, 100, 30, instructions=instructions)
    assert fresh(session).input_tokens == mi.tokens
    assert (checkpoint.replaced_tokens, checkpoint.tokens_before, checkpoint.tokens_after) == (
        400, tokens_before, mi.tokens
    )

    assert event_types(session) == [STARTED, COMPLETED]
    started, completed = compaction_events(session)
    assert FIGURES <= set(started.data)
    assert COMPLETED_FIGURES <= set(completed.data)
    assert completed.data["trigger"] == "request"
    assert completed.data["max_tokens"] == 300
    assert completed.data["keep_recent_tokens"] == 150
    assert completed.data["tokens_before"] == tokens_before
    assert completed.data["checkpoint_id"] == checkpoint.pk
    assert completed.data["covered_seq_range"] == [1, 4]
    assert completed.data["replaced_tokens"] == 400
    assert completed.data["summary_tokens"] == summary_tokens
    assert completed.data["tokens_after"] == mi.tokens
    assert completed.data["still_over_threshold"] is (mi.tokens > 300)
    assert completed.data["still_over_threshold"] is False


def tool_turn_session(append, key):
    """Turn 1 (200 tokens, seqs 1-2); turn 2 (170, seqs 3-6) with a tool call and its result; the
    current turn (30, seq 7)."""
    return append(key, [
        user(100, "first question"),
        assistant(100, "first answer"),
        user(40, "where is order seven"),
        assistant(30, "Checking.", tool_calls=[call("call_order", "get_order", '{"id": 7}')]),
        tool(60, "call_order", "order 7 shipped yesterday"),
        assistant(40, "Your order shipped yesterday."),
        user(30, "thanks"),
    ]).session


def test_a_turn_with_a_tool_call_is_covered_whole_when_only_part_of_it_would_fit(append, summarizer):
    session = tool_turn_session(append, "tool-partial")

    # 30 + the last three messages of turn 2 (130) would fit in 169, the whole turn (170) does not.
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=169)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 6
    assert summarizer.calls[0].seqs == [1, 2, 3, 4, 5, 6]
    mi = model_input(session)
    assert message_seqs(mi) == [7]
    assert mi.omitted == []
    assert openai_input_problems(to_openai(mi)) == []


def test_a_turn_with_a_tool_call_is_kept_whole_when_it_fits(append, summarizer):
    session = tool_turn_session(append, "tool-fits")

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=200)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 2
    mi = model_input(session)
    assert message_seqs(mi) == [3, 4, 5, 6, 7]
    call_entry, result_entry = mi.entries[2], mi.entries[3]
    assert call_entry.tool_calls == [call("call_order", "get_order", '{"id": 7}')]
    assert not call_entry.dropped_calls
    assert result_entry.tool_call_id == "call_order"
    assert mi.omitted == []
    assert openai_input_problems(to_openai(mi)) == []


PARALLEL_CALLS = [call("call_zeta", "get_flight", '{"flight": "UA1"}'), call("call_alpha", "get_weather", '{"city": "SFO"}')]


def parallel_calls_session(append, key):
    """Turn 1 (250, seqs 1-2); turn 2 (seqs 3-7): two calls in one message, their results stored in the
    other order; the current turn (30, seq 8)."""
    return append(key, [
        user(150, "first question"),
        assistant(100, "first answer"),
        user(40, "is my flight on time and what is the weather"),
        assistant(40, "Let me check both.", tool_calls=PARALLEL_CALLS),
        tool(50, "call_alpha", "sunny, 21 degrees"),
        tool(50, "call_zeta", "UA1 is on time"),
        assistant(40, "It is on time and sunny."),
        user(30, "great, book it"),
    ]).session


def test_parallel_tool_calls_are_kept_intact_with_their_ids_and_order(append, summarizer):
    session = parallel_calls_session(append, "parallel-kept")
    stored = raw_log(session)

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=250)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 2
    mi = model_input(session)
    assert message_seqs(mi) == [3, 4, 5, 6, 7, 8]
    calls, first, second = mi.entries[2], mi.entries[3], mi.entries[4]
    assert calls.tool_calls == PARALLEL_CALLS == stored[3]["tool_calls"]
    assert [first.tool_call_id, second.tool_call_id] == ["call_alpha", "call_zeta"]
    assert [first.content, second.content] == [stored[4]["content"], stored[5]["content"]]
    rendered = to_openai(mi)
    assert [m["role"] for m in rendered] == ["user", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert [c["id"] for c in rendered[2]["tool_calls"]] == ["call_zeta", "call_alpha"]
    assert [c["function"]["arguments"] for c in rendered[2]["tool_calls"]] == [c["arguments"] for c in PARALLEL_CALLS]
    assert [m["tool_call_id"] for m in rendered[3:5]] == ["call_alpha", "call_zeta"]
    assert mi.omitted == []
    assert openai_input_problems(rendered) == []


def test_parallel_tool_calls_are_covered_together_with_both_results(append, summarizer):
    session = parallel_calls_session(append, "parallel-covered")

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=100)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 7
    received = summarizer.calls[0].messages
    assert [m.seq for m in received] == [1, 2, 3, 4, 5, 6, 7]
    assert received[3].tool_calls == PARALLEL_CALLS
    assert [m.tool_call_id for m in received[4:6]] == ["call_alpha", "call_zeta"]
    mi = model_input(session)
    assert message_seqs(mi) == [8]
    assert mi.omitted == []


def test_an_agent_continuation_is_never_a_cut_point(append, summarizer):
    session = append("agent", [
        user(50, "first question"),
        assistant(50, "first answer"),
        user(200, "a long second question"),
        assistant(40, "working on it"),
        agent(20, "continue with the next step"),
        assistant(20, "done"),
        user(30, "current question"),
    ]).session

    # If `agent` started a turn, seqs 5-6 (40) and the current turn (30) would fit in 80 and the cut
    # would fall after seq 4. Turn 2 runs from seq 3 to seq 6 (300 tokens) and does not fit.
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=80)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 6
    assert summarizer.calls[0].seqs == [1, 2, 3, 4, 5, 6]
    mi = model_input(session)
    assert message_seqs(mi) == [7]
    assert mi.entries[1].role == "user" and mi.entries[1].seq == 7


def test_an_agent_continuation_stays_with_its_turn_when_the_turn_is_kept(append, summarizer):
    session = append("agent-kept", [
        user(200, "first question"),
        assistant(50, "first answer"),
        user(40, "second question"),
        assistant(40, "working on it"),
        agent(20, "continue with the next step"),
        assistant(20, "done"),
        user(30, "current question"),
    ]).session

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=150)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 2
    mi = model_input(session)
    assert message_seqs(mi) == [3, 4, 5, 6, 7]
    assert [e.role for e in mi.message_entries] == ["user", "assistant", "agent", "assistant", "user"]
    assert [m["role"] for m in to_openai(mi)[1:]] == ["user", "assistant", "user", "assistant", "user"]


def hidden_messages_session(append, key):
    """Turn 1: seqs 1-3 with a hidden draft at 2; turn 2: seqs 4-6 ending with a hidden draft at 6;
    the current turn: seq 7. Visible sizes: 200, 200, 30."""
    return append(key, [
        user(100, "first question"),
        assistant(100, "secret draft one", include_in_messages=False),
        assistant(100, "first answer"),
        user(100, "second question"),
        assistant(100, "second answer"),
        assistant(50, "secret draft two", include_in_messages=False),
        user(30, "current question"),
    ]).session


def test_a_hidden_message_in_the_covered_range_is_not_summarized_and_never_comes_back(append, summarizer):
    session = hidden_messages_session(append, "hidden")
    assert model_input(session).tokens == input_tokens(200, 200, 30)

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=100)

    assert outcome.status == "completed"
    # The cut is the last seq of the last covered turn, the hidden message that ends it included.
    assert outcome.checkpoint.last_seq == 6
    assert outcome.checkpoint.replaced_tokens == 400
    assert summarizer.calls[0].seqs == [1, 3, 4, 5]
    assert all("secret" not in m.text for m in summarizer.calls[0].messages)
    hidden = Message.objects.filter(session=session, include_in_messages=False).order_by("seq")
    assert [(m.seq, m.text.split(" a")[0]) for m in hidden] == [(2, "secret draft one"), (6, "secret draft two")]

    # Later turns and a second compaction: the hidden messages never reach a model input.
    append("hidden", [assistant(30, "current answer"), user(30, "next question")])
    compact(fresh(session), force=True, max_tokens=100, keep_recent_tokens=0)
    session = fresh(session)
    inputs = [build_model_input(session)] + [
        build_model_input(session, as_of=n) for n in range(1, session.message_count + 1)
    ]
    for mi in inputs:
        seqs = {e.seq for e in mi.entries}
        assert not seqs & {2, 6}, mi.as_of
        assert all("secret" not in json.dumps(e.content) for e in mi.entries)


LATE_RESULT = [
    user(100, "first question"),
    assistant(60, "Let me look that up.", tool_calls=[call("call_late", "slow_lookup")]),
    user(100, "second question"),
    tool(40, "call_late", "the slow lookup finally answered"),
    assistant(60, "second answer"),
    user(30, "current question"),
]
LATE_CALL_TOKENS = count_message("assistant", "", tool_calls=[call("call_late", "slow_lookup")]).tool_calls[0]


def test_a_tool_result_whose_call_was_covered_stays_in_the_raw_log_and_out_of_the_input(append, summarizer):
    # The call (seq 2) got no answer before the user spoke again; its result arrived later (seq 4).
    session = append("late-result", LATE_RESULT).session
    stored = raw_log(session)

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=200)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 2
    # What it replaces is what the model saw: the call was already left out of the input.
    assert outcome.checkpoint.replaced_tokens == 100 + 60 - LATE_CALL_TOKENS
    mi = model_input(session)
    assert message_seqs(mi) == [3, 5, 6]
    assert [(o.seq, o.reason) for o in mi.omitted] == [(4, "orphan_tool_result")]
    assert openai_input_problems(to_openai(mi)) == []
    assert raw_log(session) == stored


def test_the_summarizer_gets_only_what_the_model_saw_of_the_covered_turns(append, summarizer):
    session = append("late-result-covered", LATE_RESULT).session

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=100)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 5
    assert summarizer.calls[0].seqs == [1, 2, 3, 5]
    assert outcome.checkpoint.replaced_tokens == 100 + 60 - LATE_CALL_TOKENS + 100 + 60
    assert model_input(session).omitted == []


def test_one_oversized_current_turn_with_no_history_is_skipped_without_summarizing(project, append, summarizer):
    session = append("oversized", [user(500, "a huge question"), assistant(300, "a huge answer")]).session
    configure(project, "oversized", max_tokens=400, keep_recent_tokens=100)
    stored = raw_log(session)

    outcome = auto_compaction(fresh(session))

    assert outcome is not None
    assert (outcome.status, outcome.reason) == ("skipped", "nothing_to_compact")
    assert event_types(session) == [STARTED, SKIPPED]
    assert compaction_events(session)[1].data["reason"] == "nothing_to_compact"
    assert compaction_events(session)[1].data["trigger"] == "auto"
    assert summarizer.calls == []
    assert not Checkpoint.objects.filter(session=session).exists()
    assert raw_log(session) == stored


def test_one_oversized_current_turn_with_history_covers_the_history_and_stays_over(project, append, summarizer):
    session = append("oversized-history", [
        user(100, "first question"),
        assistant(100, "first answer"),
        user(100, "second question"),
        assistant(100, "second answer"),
        user(600, "a huge question"),
        assistant(200, "a huge answer"),
    ]).session
    configure(project, "oversized-history", max_tokens=500, keep_recent_tokens=100)

    outcome = auto_compaction(fresh(session))

    assert outcome is not None and outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 4
    assert summarizer.calls[0].seqs == [1, 2, 3, 4]
    mi = model_input(session)
    assert message_seqs(mi) == [5, 6]
    assert [e.tokens for e in mi.message_entries] == [600, 200]
    assert mi.tokens == outcome.tokens_after > 500
    completed = compaction_events(session)[-1]
    assert completed.type == COMPLETED
    assert completed.data["still_over_threshold"] is True


# --- an oversized current turn: said once per turn ------------------------------------------------

AGENT_RUN = DATA / "openai-chat" / "mini-swe-agent-deepseek_chat_test_1-100__django__django-13660.traj.json"
RUN_MAX_TOKENS, RUN_KEEP_RECENT = 3000, 1000


def agent_run_steps() -> list[list[dict]]:
    """A real mini-swe-agent run (one user prompt, then assistant and tool messages) as an agent loop
    appends it: the system message, the prompt and the first step; then one step (the assistant's
    command and its output) per append."""
    messages = [to_ctxweb(m) for m in json.loads(AGENT_RUN.read_text())["messages"]]
    assert [m["role"] for m in messages].count("user") == 1
    steps = [messages[:4]]
    for start in range(4, len(messages), 2):
        steps.append(messages[start:start + 2])
    return steps


def append_and_compact(project, key, messages):
    """What POST .../messages does: store the batch, which enqueues automatic compaction when it is
    needed (ingest.append.compact_after_write; the instant test worker runs it at once); the finished
    run's outcome, or None."""
    run = append_messages(project, key, messages).compaction
    if run is None:
        return None
    run.refresh_from_db()
    assert run.state not in ("queued", "running")
    return run_outcome(run)


def skips(session) -> list[dict]:
    return [e.data for e in compaction_events(session) if e.type == SKIPPED]


def test_an_oversized_agent_turn_records_nothing_to_compact_once_per_turn_and_settings(project, summarizer):
    key = "agent-run"
    configure(project, key, max_tokens=RUN_MAX_TOKENS, keep_recent_tokens=RUN_KEEP_RECENT, auto=True)
    steps = agent_run_steps()
    first_half, second_half = steps[: len(steps) // 2], steps[len(steps) // 2:]
    over = 0
    for step in first_half[:12]:
        append_and_compact(project, key, step)
        over += fresh(Session.objects.get(key=key)).input_tokens > RUN_MAX_TOKENS
    session = Session.objects.get(key=key)

    assert over >= 8  # most of these appends were over max_tokens...
    assert event_types(session) == [STARTED, SKIPPED]  # ...and said so once
    assert skips(session)[0]["reason"] == "nothing_to_compact"
    assert skips(session)[0]["turn_seq"] == 2  # the prompt: the system message is not part of any turn

    # New settings: said once more, for them.
    configure(project, key, max_tokens=RUN_MAX_TOKENS - 500)
    for step in first_half[12:]:
        append_and_compact(project, key, step)
    assert event_types(session) == [STARTED, SKIPPED] * 2
    assert skips(session)[1]["max_tokens"] == RUN_MAX_TOKENS - 500

    # A forced compaction still runs and is recorded; it says nothing new to the automatic runs.
    forced = compact(fresh(session), force=True)
    assert (forced.status, forced.reason) == ("skipped", "nothing_to_compact")
    append_and_compact(project, key, second_half[0])
    assert event_types(session) == [STARTED, SKIPPED] * 3

    # A new user message starts a new turn: the old one is covered; when the new turn alone grows over
    # max_tokens, that is said once for it.
    follow_up = {"role": "user", "content": "Thanks. Now check the other call sites the same way."}
    outcome = append_and_compact(project, key, [follow_up])
    assert outcome.status == "completed"
    new_turn = fresh(session).message_count
    for step in second_half[1:]:
        append_and_compact(project, key, step)
    assert fresh(session).input_tokens > RUN_MAX_TOKENS - 500
    assert event_types(session) == [STARTED, SKIPPED] * 3 + [STARTED, COMPLETED, STARTED, SKIPPED]
    assert skips(session)[-1]["turn_seq"] == new_turn
    assert Checkpoint.objects.filter(session=session).count() == 1


def test_the_current_turn_from_stored_figures_equals_the_laid_out_one(project, append, summarizer):
    session = append("turn-figures", [
        user(100, "first question"),
        assistant(50, "Looking.", tool_calls=[call("c1", "lookup")]),  # never answered: dropped
        user(200, "second question"),
        assistant(60, "Checking both.", tool_calls=[call("c2", "lookup"), call("c3", "lookup")]),
        tool(40, "c2", "found"),  # c3 is never answered: dropped from a message that stays
        tool(30, "c1", "a late result of c1: an orphan here"),
        agent(30, "a continuation"),
        assistant(70, "One more.", tool_calls=[call("c4", "lookup")]),  # the newest: its call awaits its result
    ]).session
    session = fresh(session)
    mi = model_input(session)
    assert {o.reason for o in mi.omitted} == {"dropped_tool_call", "orphan_tool_result", "awaiting_tool_result"}

    from_layout = current_turn(layout_model_input(session))
    from_figures = current_turn(stored_layout(session))

    assert from_layout == from_figures
    assert from_figures.first_seq == 3
    assert from_figures.tokens == sum(e.tokens for e in mi.message_entries if e.seq >= 3)


def test_a_current_turn_alone_over_max_tokens_is_oversized(project, append):
    session = append("oversized-turn", [user(100, "question"), assistant(50, "answer"), user(300, "huge")]).session
    configure(project, "oversized-turn", max_tokens=299)
    assert oversized_turn(stored_layout(fresh(session)), fresh(session).compaction_settings()).tokens == 300
    configure(project, "oversized-turn", max_tokens=300)
    assert oversized_turn(stored_layout(fresh(session)), fresh(session).compaction_settings()) is None


def test_an_existing_summary_alone_is_never_re_summarized(append, summarizer):
    session = two_old_turns_and_a_question(append, "summary-alone")
    assert compact(fresh(session), max_tokens=100, keep_recent_tokens=50).status == "completed"

    outcome = compact(fresh(session), force=True, max_tokens=10, keep_recent_tokens=0)

    assert (outcome.status, outcome.reason) == ("skipped", "nothing_to_compact")
    assert len(summarizer.calls) == 1
    assert Checkpoint.objects.filter(session=session).count() == 1


# --- when the summary does not help, or the summarizer fails -------------------------------------


def summary_costing(tokens: int, last_seq: int) -> str:
    """Summary text whose summary message (prefix included) costs exactly `tokens`."""
    text = "Recap"
    while count_message("user", summary_message_text(text, last_seq)).total < tokens:
        text += " a"
    assert count_message("user", summary_message_text(text, last_seq)).total == tokens
    return text


def small_history_session(append, key):
    """Turn 1: 120 tokens (seqs 1-2); the current turn: seq 3."""
    return append(key, [user(60, "first question"), assistant(60, "first answer"), user(30, "next question")]).session


def test_a_summary_as_large_as_what_it_replaces_is_skipped_and_changes_nothing(append, summarizer):
    session = small_history_session(append, "not-smaller")
    before, stored, tokens = snapshot(model_input(session)), raw_log(session), fresh(session).input_tokens

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50, summary=summary_costing(120, 2))

    assert (outcome.status, outcome.reason) == ("skipped", "not_smaller")
    assert event_types(session) == [STARTED, SKIPPED]
    skipped = compaction_events(session)[1]
    assert skipped.data["reason"] == "not_smaller"
    assert FIGURES <= set(skipped.data)
    assert not Checkpoint.objects.filter(session=session).exists()
    assert snapshot(model_input(session)) == before
    assert fresh(session).input_tokens == tokens
    assert raw_log(session) == stored
    assert summarizer.calls == []


def test_a_summary_one_token_smaller_than_what_it_replaces_completes(append, summarizer):
    session = small_history_session(append, "one-smaller")
    text = summary_costing(119, 2)

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50, summary=text)

    assert outcome.status == "completed"
    checkpoint = outcome.checkpoint
    assert (checkpoint.summary, checkpoint.summary_tokens, checkpoint.replaced_tokens) == (text, 119, 120)
    assert (checkpoint.first_seq, checkpoint.last_seq) == (1, 2)
    assert model_input(session).tokens == input_tokens(119, 30)
    assert summarizer.calls == []


def test_a_failing_summarizer_is_recorded_and_changes_nothing(append, monkeypatch):
    session = two_old_turns_and_a_question(append, "fails")
    before, stored = snapshot(model_input(session)), raw_log(session)

    def broken(previous_summary, messages, budget):
        raise RuntimeError("the summarizer exploded")

    monkeypatch.setitem(SUMMARIZERS, "extractive", broken)
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50)

    assert outcome.status == "failed"
    assert "the summarizer exploded" in outcome.error
    assert event_types(session) == [STARTED, FAILED]
    failed = compaction_events(session)[1]
    assert FIGURES <= set(failed.data)
    assert "the summarizer exploded" in failed.data["error"]
    assert not Checkpoint.objects.filter(session=session).exists()
    assert snapshot(model_input(session)) == before
    assert raw_log(session) == stored


def test_a_summarizer_returning_no_text_is_a_failure(append, summarizer):
    session = two_old_turns_and_a_question(append, "empty-summary")
    summarizer.text = "   \n"

    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50)

    assert outcome.status == "failed" and outcome.error
    assert event_types(session) == [STARTED, FAILED]
    assert not Checkpoint.objects.filter(session=session).exists()


def test_a_summarizer_timeout_is_recorded_and_changes_nothing(append, openai_stub, settings):
    session = two_old_turns_and_a_question(append, "timeout")
    before, stored = snapshot(model_input(session)), raw_log(session)
    openai_stub.delay = 10
    settings.CTXWEB_OPENAI_TIMEOUT = 0.5

    started_at = time.monotonic()
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50, summarizer="openai")
    elapsed = time.monotonic() - started_at

    assert outcome.status == "failed"
    assert elapsed < openai_stub.delay  # it gave up before the answer came (retries included)
    assert len(openai_stub.received) == 1
    assert event_types(session) == [STARTED, FAILED]
    failed = compaction_events(session)[1]
    assert FIGURES <= set(failed.data)
    assert failed.data["error"] == outcome.error and "time" in outcome.error.lower()
    assert not Checkpoint.objects.filter(session=session).exists()
    assert snapshot(model_input(session)) == before
    assert raw_log(session) == stored


# --- checkpoints over checkpoints, restarts ------------------------------------------------------


def test_a_second_compaction_extends_the_first_and_never_resends_what_it_covered(append, summarizer):
    session = append("second", [
        user(100, "first question"),
        assistant(100, "first answer"),
        user(30, "second question"),
        assistant(30, "second answer"),
    ]).session
    summarizer.text = "First summary."
    first = compact(fresh(session), max_tokens=100, keep_recent_tokens=70).checkpoint
    assert (first.first_seq, first.last_seq) == (1, 2)

    append("second", [user(100, "third question"), assistant(100, "third answer"), user(30, "fourth question")])
    summarizer.text = "Second summary."
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=70)

    assert outcome.status == "completed"
    second = outcome.checkpoint
    assert second.previous_id == first.pk
    assert (second.first_seq, second.last_seq) == (3, 6)
    assert second.replaced_tokens == first.summary_tokens + 260
    assert summarizer.calls[1].previous == "First summary."
    assert summarizer.calls[1].seqs == [3, 4, 5, 6]
    assert all(seq > first.last_seq for seq in summarizer.calls[1].seqs)
    mi = model_input(session)
    assert [e.kind for e in mi.entries] == ["summary", "message"]
    assert mi.entries[0].content == summary_message_text("Second summary.", 6)
    assert message_seqs(mi) == [7]
    assert mi.tokens == outcome.tokens_after == input_tokens(second.summary_tokens, 30)
    completed = compaction_events(session)[-1]
    assert completed.data["covered_seq_range"] == [3, 6]
    assert completed.data["replaced_tokens"] == first.summary_tokens + 260


def test_the_model_input_is_the_same_after_a_restart(project, append, summarizer):
    update_session(project, "restart", {"instructions": "Be brief."})
    session = append("restart", [
        {"role": "system", "content": "a stored system prompt"},
        user(100, "first question"),
        assistant(100, "first answer", tool_calls=[call("call_1", "lookup")]),
        tool(40, "call_1", "looked up"),
        user(40, "second question"),
        assistant(40, "second answer", tool_calls=[call("call_2", "lookup")]),
        tool(40, "call_2", "looked up again"),
        user(30, "current question"),
    ]).session
    assert compact(fresh(session), max_tokens=100, keep_recent_tokens=150).status == "completed"
    before = build_model_input(fresh(session))

    load_encoding.cache_clear()
    restored = build_model_input(Session.objects.get(pk=session.pk))

    assert snapshot(restored) == snapshot(before)
    assert restored.tokens == before.tokens == fresh(session).input_tokens
    assert to_openai(restored) == to_openai(before)
    assert restored.checkpoint.pk == before.checkpoint.pk


def test_new_instructions_appear_after_a_restart_and_stored_system_messages_do_not(project, append, summarizer):
    update_session(project, "new-instructions", {"instructions": "Be brief."})
    session = append("new-instructions", [
        {"role": "system", "content": "a stored system prompt"},
        user(100, "first question"),
        assistant(100, "first answer"),
        {"role": "system", "content": "another stored system prompt"},
        user(30, "current question"),
    ]).session
    assert compact(fresh(session), max_tokens=100, keep_recent_tokens=50).checkpoint.last_seq == 4

    update_session(project, "new-instructions", {"instructions": "Answer in French."})
    load_encoding.cache_clear()
    mi = build_model_input(Session.objects.get(pk=session.pk))

    system = [e for e in mi.entries if e.role == "system"]
    assert [(e.kind, e.content) for e in system] == [("instructions", "Answer in French.")]
    assert mi.entries[0] is system[0]
    assert system[0].tokens == count_message("system", "Answer in French.").total
    assert mi.entries[1].kind == "summary"
    assert message_seqs(mi) == [5]
    assert all("stored system prompt" not in json.dumps(e.content) for e in mi.entries)
    assert mi.tokens == fresh(session).input_tokens
    assert to_openai(mi)[0] == {"role": "system", "content": "Answer in French."}


# --- concurrency ---------------------------------------------------------------------------------


def race_two_compactions(session, monkeypatch) -> list:
    """Run two attempts of one compaction run of `session` in two threads whose summarizers wait for each
    other, so both have planned from the same base before either creates its checkpoint. The session's
    one active run keeps a second compaction from starting at all (see
    test_a_second_compaction_is_refused_while_one_runs); these attempts go round that rule, as a worker
    judged dead and still working would, to show that the checkpoint's link alone still makes one."""
    barrier = threading.Barrier(2, timeout=30)
    now = timezone.now()
    shared = CompactionRun.objects.create(session=session, in_process=True, state="running", attempts=1,
                                          started_at=now, lease_expires_at=now + timedelta(seconds=60))

    def waiting(previous_summary, messages, budget):
        barrier.wait()
        return "A summary written by one of two racing compactions."

    monkeypatch.setitem(SUMMARIZERS, "extractive", waiting)
    outcomes, errors = [None, None], []

    def run(index):
        try:
            outcomes[index] = run_attempt(shared, fresh(session), max_tokens=100, keep_recent_tokens=50,
                                          actor=f"racer-{index}")
        except Exception as exc:  # reported below, with the thread's traceback lost but not its message
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert all(not thread.is_alive() for thread in threads)
    return outcomes


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_first_compactions_make_one_checkpoint(project, monkeypatch):
    session = append_messages(project, "race-first", [
        user(120, "first question"), assistant(80, "first answer"),
        user(120, "second question"), assistant(80, "second answer"),
        user(30, "current question"),
    ]).session

    outcomes = race_two_compactions(session, monkeypatch)

    assert sorted(o.status for o in outcomes) == ["completed", "failed"]
    failed = next(o for o in outcomes if o.status == "failed")
    assert failed.error
    assert Checkpoint.objects.filter(session=session).count() == 1
    types = event_types(session)
    assert sorted(types) == sorted([STARTED, STARTED, COMPLETED, FAILED])
    assert fresh(session).input_tokens == model_input(session).tokens


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_compactions_over_a_checkpoint_make_one_checkpoint(project, monkeypatch, summarizer):
    session = append_messages(project, "race-next", [
        user(120, "first question"), assistant(80, "first answer"), user(30, "second question"),
    ]).session
    base = compact(fresh(session), max_tokens=100, keep_recent_tokens=50).checkpoint
    assert base is not None
    append_messages(project, "race-next", [
        assistant(80, "second answer"), user(120, "third question"), assistant(80, "third answer"),
        user(30, "current question"),
    ])

    outcomes = race_two_compactions(session, monkeypatch)

    assert sorted(o.status for o in outcomes) == ["completed", "failed"]
    assert Checkpoint.objects.filter(session=session).count() == 2
    assert Checkpoint.objects.filter(session=session, previous=base).count() == 1
    assert sorted(event_types(session)) == sorted([STARTED, COMPLETED] + [STARTED, STARTED, COMPLETED, FAILED])


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_second_compaction_is_refused_while_one_runs(project, summarizer):
    """The session's CompactionRun is the one record of a compaction under way: a second one asked for
    while the first summarizes is refused (409 over the API), an automatic one is not run, and neither
    records an event."""
    session = two_old_turns_and_a_question(lambda key, messages: append_messages(project, key, messages), "busy")
    seen = {}

    def during():
        def second():
            try:
                seen["auto"] = compact(fresh(session), trigger="auto", max_tokens=100, keep_recent_tokens=50).status
                compact(fresh(session), max_tokens=100, keep_recent_tokens=50)
            except Conflict as exc:
                seen["requested"] = exc.code
            finally:
                connection.close()

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=30)

    summarizer.during = during
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50)

    assert outcome.status == "completed"
    assert seen == {"auto": "not_run", "requested": "compaction_in_progress"}
    assert sorted(event_types(session)) == sorted([STARTED, COMPLETED])
    assert list(CompactionRun.objects.filter(session=session).values_list("state", flat=True)) == ["completed"]


@pytest.mark.django_db(transaction=True)
def test_a_message_appended_while_the_summarizer_runs_stays_after_the_cut(project, append, summarizer):
    session = two_old_turns_and_a_question(append, "late")

    def append_late():
        # The summarizer runs on a thread of its own, with its own database connection.
        try:
            append_messages(project, "late", [user(25, "a late question")])
        finally:
            connection.close()

    summarizer.during = append_late
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50)

    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 4
    late = Message.objects.get(session=session, seq=6)
    assert late.text.startswith("a late question")
    mi = model_input(session)
    assert message_seqs(mi) == [5, 6]
    assert outcome.tokens_after == mi.tokens == input_tokens(outcome.summary_tokens, 30, 25)
    assert outcome.checkpoint.created_at_seq == 6
    assert fresh(session).input_tokens == mi.tokens


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_message_appended_from_another_connection_while_the_summarizer_runs_is_kept(project, summarizer):
    session = append_messages(project, "late-thread", [
        user(120, "first question"), assistant(80, "first answer"),
        user(120, "second question"), assistant(80, "second answer"),
        user(30, "current question"),
    ]).session
    errors = []

    def append_late():
        try:
            append_messages(project, "late-thread", [user(25, "a late question")])
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    def during():
        thread = threading.Thread(target=append_late)
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the append was blocked while the summarizer ran"

    summarizer.during = during
    outcome = compact(fresh(session), max_tokens=100, keep_recent_tokens=50)

    assert not errors, errors
    assert outcome.status == "completed"
    assert outcome.checkpoint.last_seq == 4
    mi = model_input(session)
    assert message_seqs(mi) == [5, 6]
    assert outcome.tokens_after == mi.tokens == fresh(session).input_tokens


# --- the raw log ---------------------------------------------------------------------------------


def test_compaction_never_changes_a_raw_message(project, append, summarizer, monkeypatch):
    update_session(project, "raw", {"instructions": "Be brief."})
    session = append("raw", [
        {"role": "system", "content": "a stored system prompt"},
        user(100, "first question", attributes={"trace": "t-1"}),
        assistant(60, "first answer", tool_calls=[call("call_1", "lookup", '{"q": "x"}')], reasoning="thinking"),
        tool(40, "call_1", "found x", name="lookup"),
        assistant(50, "a hidden draft", include_in_messages=False),
        agent(30, "continue"),
        assistant(40, "first conclusion"),
        user(100, "second question"),
        assistant(100, "second answer", tool_calls=[call("call_2", "lookup")]),
        user(30, "current question"),
    ]).session
    stored = raw_log(session)
    assert len(stored) == 10

    assert compact(fresh(session), max_tokens=10_000, keep_recent_tokens=50).reason == "under_threshold"
    assert raw_log(session) == stored
    not_smaller = compact(fresh(session), max_tokens=100, keep_recent_tokens=50, summary="x " * 1000)
    assert not_smaller.reason == "not_smaller"
    assert raw_log(session) == stored
    monkeypatch.setitem(SUMMARIZERS, "extractive", lambda *args: 1 / 0)
    assert compact(fresh(session), max_tokens=100, keep_recent_tokens=50).status == "failed"
    assert raw_log(session) == stored
    monkeypatch.setitem(SUMMARIZERS, "extractive", summarizer)
    assert compact(fresh(session), max_tokens=100, keep_recent_tokens=50).status == "completed"
    assert raw_log(session) == stored
    append("raw", [assistant(30, "current answer"), user(30, "next question")])
    assert compact(fresh(session), force=True, max_tokens=100, keep_recent_tokens=0).status == "completed"
    assert raw_log(session)[:10] == stored
    assert Message.objects.filter(session=session).count() == 12


# --- real transcripts ----------------------------------------------------------------------------

CONVERSATIONS = openai_conversations()
LONGEST = max(CONVERSATIONS, key=lambda c: len(json.dumps(c[1])))[0]
LONGEST_TAU = max((c for c in CONVERSATIONS if c[0].startswith("tau-bench")), key=lambda c: len(json.dumps(c[1])))[0]
REAL_MAX_TOKENS, REAL_KEEP_RECENT = 200, 100


def single_turn(messages: list[dict]) -> bool:
    return sum(1 for m in messages if m["role"] == "user") == 1


def assert_valid_after(session, checkpoint):
    mi = model_input(session)
    assert all(e.seq > checkpoint.last_seq for e in mi.entries if e.seq is not None)
    assert [e.kind for e in mi.entries[:1]] == ["summary"]
    assert openai_input_problems(to_openai(mi)) == []
    return mi


@pytest.mark.parametrize("label, messages", CONVERSATIONS, ids=[c[0] for c in CONVERSATIONS])
def test_compaction_of_a_real_transcript(project, label, messages):
    key = label[:200]
    session = append_messages(project, key, [to_ctxweb(m) for m in messages]).session
    stored = raw_log(session)
    assert openai_input_problems(to_openai(model_input(session))) == []

    outcome = compact(fresh(session), max_tokens=REAL_MAX_TOKENS, keep_recent_tokens=REAL_KEEP_RECENT)

    if single_turn(messages):
        # An agent run is one turn (one user message, then assistant and tool messages): nothing older
        # to cover until the user says something again.
        assert (outcome.status, outcome.reason) == ("skipped", "nothing_to_compact")
        assert not Checkpoint.objects.filter(session=session).exists()
        assert raw_log(session) == stored
        append_messages(project, key, [
            {"role": "user", "content": "Thanks. Can you summarise what you changed?"},
            {"role": "assistant", "content": "I changed the code as described above."},
        ])
        stored_with_follow_up = raw_log(session)
        assert stored_with_follow_up[: len(stored)] == stored
        stored = stored_with_follow_up
        outcome = compact(fresh(session), max_tokens=REAL_MAX_TOKENS, keep_recent_tokens=REAL_KEEP_RECENT)

    assert outcome.status == "completed", (outcome.status, outcome.reason, outcome.error)
    checkpoint = outcome.checkpoint
    mi = assert_valid_after(session, checkpoint)
    assert outcome.tokens_after == mi.tokens == fresh(session).input_tokens
    assert outcome.summary_tokens < checkpoint.replaced_tokens
    if checkpoint.replaced_tokens >= 2000:
        assert outcome.summary_tokens < 0.6 * checkpoint.replaced_tokens
    assert raw_log(session) == stored
    if label in (LONGEST, LONGEST_TAU):
        print(
            f"\n{label}: {len(stored)} messages, tokens_before={checkpoint.tokens_before}, "
            f"replaced_tokens={checkpoint.replaced_tokens}, summary_tokens={checkpoint.summary_tokens}, "
            f"tokens_after={outcome.tokens_after}, covered seqs {checkpoint.first_seq}-{checkpoint.last_seq}"
        )


def test_an_unpersisted_question_is_the_current_turn_so_the_stored_turns_can_be_covered(project, append):
    """A request whose new user message is not stored: that message starts the current turn, so when
    the request crosses max_tokens every stored turn may be covered."""
    from sessions.ingest.next_request import build_request
    from sessions.ingest.session_store import update_session

    from .builders import assistant, user

    update_session(project, "pending", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 150, "auto": True}})
    append("pending", [user(100, "What is the refund policy for damaged items?"),
                       assistant(103, "Damaged items are refunded in full within 30 days of delivery.")])
    built = build_request(project, "pending", messages=[user(120, "And for items bought on sale?", persist=False)])
    assert built.compaction is not None and built.compaction.state == "completed"
    checkpoint = run_outcome(built.compaction).checkpoint
    assert (checkpoint.first_seq, checkpoint.last_seq) == (1, 2)
    entries = built.model_input.entries
    assert [e.kind for e in entries] == ["summary", "request"]
    assert built.model_input.tokens < 3 + 100 + 103 + 120
    assert built.event.data["unpersisted"] == {"count": 1, "tokens": 120}
