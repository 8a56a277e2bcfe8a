"""Summarizers: the offline extractive digest, and the `openai` summarizer talking over real
HTTP to an OpenAI-compatible endpoint started by the test (tests/openai_stub.py)."""

import re
import time

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.model_input import build_model_input
from sessions.context.summarizers import extractive, extractive_digest
from sessions.models import Checkpoint, Event, Message, Session
from sessions.wire.tokens import count_text
from tests.builders import assistant, call, event_types, raw_log, user
from tests.transcripts import openai_conversations, to_ctxweb

pytestmark = pytest.mark.django_db

FLIGHT_CHAT = [
    {"role": "user", "content": "Is flight UA123 on time tomorrow, and can you cancel booking ZX9?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("call_status", "get_flight_status", '{"flight": "UA123"}'),
            call("call_cancel", "cancel_booking", '{"booking": "ZX9"}'),
        ],
    },
    {"role": "tool", "tool_call_id": "call_status", "content": '{"flight": "UA123", "status": "on time"}'},
    {"role": "tool", "tool_call_id": "call_cancel", "content": "Error: booking ZX9 not found"},
    {"role": "assistant", "content": "UA123 is on time, but I could not find booking ZX9 to cancel it."},
]


def covered_messages(session) -> list[Message]:
    """The messages a summarizer gets: visible, not system, in seq order."""
    return list(
        Message.objects.filter(session=session, include_in_messages=True).exclude(role="system").order_by("seq")
    )


def line_with(summary: str, word: str) -> str:
    lines = [line for line in summary.splitlines() if word in line]
    assert len(lines) == 1, f"expected one line mentioning {word!r} in:\n{summary}"
    return lines[0]


@pytest.fixture
def flight_messages(append):
    return covered_messages(append("flight", FLIGHT_CHAT).session)


@pytest.fixture(scope="module")
def longest_conversation():
    return max(openai_conversations(), key=lambda c: sum(len(str(m.get("content"))) for m in c[1]))


# --- extractive ----------------------------------------------------------------------------------


def test_extractive_is_deterministic(append, flight_messages):
    again = covered_messages(append("flight-again", FLIGHT_CHAT).session)

    first = extractive("", flight_messages, 500)

    assert first
    assert extractive("", flight_messages, 500) == first
    assert extractive("", again, 500) == first
    assert extractive("Earlier: a refund.", flight_messages, 500) == extractive("Earlier: a refund.", again, 500)


def test_extractive_mentions_the_question_the_tools_with_their_outcome_and_the_conclusion(flight_messages):
    summary = extractive("", flight_messages, 500)

    assert "Is flight UA123 on time tomorrow, and can you cancel booking ZX9?" in summary
    assert re.search(r"\bok\b", line_with(summary, "get_flight_status"))
    assert not re.search(r"\berror\b", line_with(summary, "get_flight_status"))
    assert re.search(r"\berror\b", line_with(summary, "cancel_booking"))
    assert "UA123 is on time, but I could not find booking ZX9 to cancel it." in summary


def test_extractive_folds_in_the_previous_summary(flight_messages):
    summary = extractive("Earlier the user booked flight UA123 for 2 adults.", flight_messages, 500)

    assert "Earlier the user booked flight UA123 for 2 adults." in summary
    assert "cancel_booking" in summary


@pytest.mark.parametrize("budget", [48, 100, 300, 2000])
@pytest.mark.parametrize("with_previous", [False, True], ids=["fresh", "with-previous"])
def test_extractive_stays_within_its_budget(append, longest_conversation, budget, with_previous):
    label, messages = longest_conversation
    covered = covered_messages(append("long", [to_ctxweb(m) for m in messages]).session)
    assert sum(m.tokens for m in covered) > 5 * 2000
    previous = extractive("", covered[: len(covered) // 2], 1500) if with_previous else ""

    summary = extractive(previous, covered, budget)

    assert summary.strip()
    assert count_text(summary) <= budget, f"{label}: {count_text(summary)} tokens for a budget of {budget}"


def test_extractive_says_one_line_left_out_in_the_singular():
    # Three lines that do not fit, even cut short, though their start and end do: the long one in
    # between is left out.
    budget = count_text("First line.\n… 1 line left out …\nThird line.")
    summary = extractive("First line.\n" + "漢" * 200 + "\nThird line.", [], budget=budget)

    assert summary.splitlines() == ["First line.", "… 1 line left out …", "Third line."]


def test_extractive_says_lines_left_out_in_the_plural():
    previous = "\n".join(f"Line {n} of the earlier summary." for n in range(1, 21))

    summary = extractive(previous, [], budget=1)

    assert re.search(r"… (\d+) lines left out …", summary)
    assert int(re.search(r"… (\d+) lines left out …", summary).group(1)) > 1


# --- openai --------------------------------------------------------------------------------------


def summarized_session(append):
    """Two turns to cover (seqs 1-5, a hidden draft at 3) and the current turn (seq 6)."""
    return append("llm", [
        user(60, "Please plan a trip to Reykjavik"),
        assistant(60, "Reykjavik in June is bright all night"),
        assistant(40, "a hidden draft about Oslo", include_in_messages=False),
        user(60, "Add a day at the Blue Lagoon"),
        assistant(60, "Blue Lagoon added on day two"),
        user(30, "What should I pack?"),
    ]).session


def test_the_openai_summary_becomes_the_checkpoint_summary(append, openai_stub):
    session = summarized_session(append)
    openai_stub.reply = "The user plans a Reykjavik trip in June with a Blue Lagoon day."

    outcome = compact(session, max_tokens=100, keep_recent_tokens=40, summarizer="openai")

    assert outcome.status == "completed", outcome.error
    checkpoint = Checkpoint.objects.get(session=session)
    assert checkpoint.summary == "The user plans a Reykjavik trip in June with a Blue Lagoon day."
    assert checkpoint.summarizer == "openai"
    assert checkpoint.last_seq == 5
    mi = build_model_input(Session.objects.get(pk=session.pk))
    assert mi.entries[0].content.endswith(checkpoint.summary)

    [request] = openai_stub.received
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"].get("authorization") == "Bearer sk-test"
    assert request["body"]["model"] == "stub-model"
    prompt = "\n".join(openai_stub.user_prompts())
    for covered in ("Please plan a trip to Reykjavik", "Reykjavik in June is bright all night",
                    "Add a day at the Blue Lagoon", "Blue Lagoon added on day two"):
        assert covered in prompt
    assert "hidden draft" not in prompt
    assert "What should I pack?" not in prompt


def test_the_openai_summarizer_receives_the_previous_summary(append, openai_stub):
    session = summarized_session(append)
    openai_stub.reply = "FIRST-SUMMARY: a Reykjavik trip."
    assert compact(session, max_tokens=100, keep_recent_tokens=40, summarizer="openai").status == "completed"
    append("llm", [assistant(60, "Pack layers and a swimsuit"), user(30, "And shoes?")])
    openai_stub.reply = "SECOND-SUMMARY: a Reykjavik trip, packing advice given."

    outcome = compact(session, max_tokens=100, keep_recent_tokens=20, summarizer="openai")

    assert outcome.status == "completed", outcome.error
    assert outcome.checkpoint.previous.summary == "FIRST-SUMMARY: a Reykjavik trip."
    second_prompt = openai_stub.user_prompts()[-1]
    assert "FIRST-SUMMARY: a Reykjavik trip." in second_prompt
    assert "Pack layers and a swimsuit" in second_prompt
    assert "Please plan a trip to Reykjavik" not in second_prompt


def test_an_openai_error_status_fails_the_compaction(append, openai_stub):
    session = summarized_session(append)
    stored = raw_log(session)
    openai_stub.status = 500

    outcome = compact(session, max_tokens=100, keep_recent_tokens=40, summarizer="openai")

    assert outcome.status == "failed"
    assert "500" in outcome.error
    assert event_types(session) == ["COMPACTION_STARTED", "COMPACTION_FAILED"]
    failed = Event.objects.get(session=session, type="COMPACTION_FAILED")
    assert "500" in failed.data["error"]
    assert not Checkpoint.objects.filter(session=session).exists()
    assert raw_log(session) == stored
    assert len(openai_stub.received) == 1


def test_an_openai_timeout_fails_the_compaction(append, openai_stub, settings):
    session = summarized_session(append)
    stored = raw_log(session)
    openai_stub.delay = 10
    settings.CTXWEB_OPENAI_TIMEOUT = 0.5

    started_at = time.monotonic()
    outcome = compact(session, max_tokens=100, keep_recent_tokens=40, summarizer="openai")

    assert time.monotonic() - started_at < 5
    assert outcome.status == "failed"
    assert outcome.error
    assert event_types(session) == ["COMPACTION_STARTED", "COMPACTION_FAILED"]
    assert Event.objects.get(session=session, type="COMPACTION_FAILED").data["error"] == outcome.error
    assert not Checkpoint.objects.filter(session=session).exists()
    assert raw_log(session) == stored


def test_an_empty_openai_answer_fails_the_compaction(append, openai_stub):
    session = summarized_session(append)
    openai_stub.reply = ""

    outcome = compact(session, max_tokens=100, keep_recent_tokens=40, summarizer="openai")

    assert outcome.status == "failed"
    assert outcome.error
    assert event_types(session) == ["COMPACTION_STARTED", "COMPACTION_FAILED"]
    assert not Checkpoint.objects.filter(session=session).exists()


# --- salient literals ----------------------------------------------------------------------------

LONG_ASK = (
    "Hello, I am writing because the delivery of my last purchase has been a long story and I would like it "
    "sorted out today. " * 6
    + "The order number is W9609649, I paid $1,250.00 on 2024-05-03 and the invoice went to mia.li@example.com."
)


@pytest.fixture
def long_ask_messages(append):
    return covered_messages(append("long-ask", [
        {"role": "user", "content": LONG_ASK},
        {"role": "assistant", "content": "I am sorry to hear that; let me look into it right away for you. " * 4
         + "Ticket #48213 is open for it."},
    ]).session)


def test_the_plain_digest_cuts_the_facts_off_a_long_message(long_ask_messages):
    plain = extractive_digest("", long_ask_messages, 160, keep_facts=False).text

    assert "W9609649" not in plain
    assert "$1,250.00" not in plain


def test_extractive_keeps_the_salient_literals_the_digest_cut_off_within_its_budget(long_ask_messages):
    digest = extractive_digest("", long_ask_messages, 160)

    assert count_text(digest.text) <= 160
    for literal in ("W9609649", "$1,250.00", "2024-05-03", "mia.li@example.com", "#48213"):
        assert literal in digest.text
    assert digest.text.splitlines()[-1].startswith("Facts: ")
    assert digest.dropped == []
    assert extractive("", long_ask_messages, 160) == digest.text


def test_extractive_reports_the_literals_it_had_to_drop(long_ask_messages):
    digest = extractive_digest("", long_ask_messages, 60)

    assert count_text(digest.text) <= 60
    assert digest.dropped
    for literal in digest.dropped:
        assert literal not in digest.text


def test_extractive_keeps_the_most_repeated_literals_first(append):
    messages = covered_messages(append("repeat", [
        {"role": "user", "content": "x " * 300 + "Order W1111111 and W2222222."},
        {"role": "assistant", "content": "y " * 300 + "Order W2222222 is the one."},
        {"role": "user", "content": "z " * 300 + "Yes, W2222222."},
    ]).session)

    digest = extractive_digest("", messages, 70)

    assert "W2222222" in digest.text
    assert digest.dropped == [] or "W2222222" not in digest.dropped
