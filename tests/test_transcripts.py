"""Real transcripts (tests/data/transcripts) store as they are and give a valid model input."""

import re

import pytest

from sessions.context.explain import explain_messages
from sessions.context.figures import refresh_input_tokens
from sessions.context.model_input import Reason, build_model_input, summary_message_tokens
from sessions.models import Checkpoint, Message, Session
from sessions.wire.openai import to_openai
from tests.transcripts import openai_conversations, to_ctxweb

CONVERSATIONS = openai_conversations()
BATCH = 500
NOT_IN_INPUT = {Reason.COVERED, Reason.EXCLUDED, Reason.INSTRUCTIONS_ROLE, Reason.ORPHAN, Reason.DROPPED}


def test_all_the_conversations_are_there():
    labels = [label for label, _ in CONVERSATIONS]
    assert sum(label.startswith("tau-bench") for label in labels) == 200
    assert sum(label.startswith("mini-swe-agent") for label in labels) == 3


def assert_valid_openai(messages: list[dict]):
    """Chat Completions rules: known roles; each tool result answers a call of the assistant message
    before it with only tool results between; every call answered, except in the last assistant message."""
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in messages)
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    open_calls: set[str] | None = None
    answered: dict[int, set[str]] = {}
    current = None
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            current = i
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
            answered[i] = set()
            assert message.get("tool_calls") is None or message["tool_calls"], "empty tool_calls list"
        elif message["role"] == "tool":
            assert open_calls is not None, f"tool message {i} does not follow an assistant message"
            assert message["tool_call_id"] in open_calls, f"tool message {i} answers no call before it"
            assert message["tool_call_id"] not in answered[current], f"call answered twice at {i}"
            answered[current].add(message["tool_call_id"])
        else:
            open_calls = None
    for i in assistants[:-1]:
        calls = {c["id"] for c in messages[i].get("tool_calls") or ()}
        assert calls == answered[i], f"assistant message {i} has unanswered calls {calls - answered[i]}"


@pytest.mark.parametrize(("label", "raw"), CONVERSATIONS, ids=[label for label, _ in CONVERSATIONS])
def test_a_real_conversation_stores_and_gives_a_valid_input(append, label, raw):
    key = re.sub(r"[^A-Za-z0-9._:@-]", "-", label)[:200]
    messages = [to_ctxweb(m) for m in raw]
    for start in range(0, len(messages), BATCH):
        append(key, messages[start : start + BATCH])

    session = Session.objects.get(key=key)
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert len(stored) == session.message_count == len(raw)
    assert [m.seq for m in stored] == list(range(1, len(raw) + 1))

    assert_valid_input_and_explained(session, stored)

    # A checkpoint that splits a tool call from its results: the input must stay valid.
    split = next((m.seq for m in stored if m.tool_calls and m.seq < len(stored)), None)
    if split is not None:
        summary = "Earlier turns, summarised."
        Checkpoint.objects.create(
            session=session, summary=summary, first_seq=1, last_seq=split, created_at_seq=len(stored),
            summary_tokens=summary_message_tokens(summary, split), summarizer="test",
        )
        refresh_input_tokens(session)
        model_input = assert_valid_input_and_explained(Session.objects.get(pk=session.pk), stored)
        if stored[split].role == "tool":  # the message right after the checkpoint
            assert (Reason.ORPHAN, split + 1) in [(o.reason, o.seq) for o in model_input.omitted]


def assert_valid_input_and_explained(session, stored):
    model_input = build_model_input(session)
    assert session.input_tokens == model_input.tokens
    assert_valid_openai(to_openai(model_input))

    in_input = {e.seq for e in model_input.entries if e.seq is not None}
    omitted_seqs = {o.seq for o in model_input.omitted if o.whole_message}
    explained = explain_messages(stored, model_input, list(session.checkpoints.all()))
    for message in stored:
        explanation = explained[message.seq]
        assert explanation.sentence.strip()
        if message.seq in in_input:
            assert explanation.code == Reason.IN_INPUT, (message.seq, explanation)
        else:
            assert explanation.code in NOT_IN_INPUT, (message.seq, explanation)
            if explanation.code in (Reason.ORPHAN, Reason.DROPPED):
                assert message.seq in omitted_seqs
    return model_input
