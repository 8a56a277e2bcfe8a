"""The stored model-input size (Session.input_tokens) is kept up to date incrementally on append; it
must always equal a full rebuild, whatever the mix of roles, tool calls, hidden messages, checkpoints
and batch sizes."""

import random

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.model_input import build_model_input, layout_model_input, stored_layout
from sessions.ingest.message_edits import update_message
from sessions.models import Session


def random_conversation(rng: random.Random, length: int) -> list[dict]:
    messages, open_calls, n = [], [], 0
    while len(messages) < length:
        n += 1
        kind = rng.random()
        if open_calls and kind < 0.45:
            call_id = open_calls.pop(rng.randrange(len(open_calls)))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": f"result {n} " * rng.randint(1, 5)})
        elif kind < 0.6:
            calls = [{"id": f"c{n}_{i}", "name": "lookup", "arguments": f'{{"q": "{n}-{i}"}}'} for i in range(rng.randint(1, 3))]
            open_calls = [c["id"] for c in calls] if rng.random() < 0.8 else open_calls + [c["id"] for c in calls]
            content = None if rng.random() < 0.5 else f"calling {n}"
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
        elif kind < 0.75:
            messages.append({"role": "assistant", "content": f"answer {n} " * rng.randint(1, 8)})
        elif kind < 0.9:
            messages.append({"role": "user", "content": f"question {n} " * rng.randint(1, 6)})
        elif kind < 0.95:
            messages.append({"role": "agent", "content": f"note {n}"})
        else:
            messages.append({"role": "system", "content": f"old prompt {n}"})
        if rng.random() < 0.07:
            messages[-1]["include_in_messages"] = False
    return messages


def assert_size_is_exact(session: Session):
    session.refresh_from_db()
    layout = layout_model_input(session)
    assert session.input_tokens == layout.tokens
    assert build_model_input(session).tokens == layout.tokens
    assert session.input_messages == layout.message_count
    assert session.input_left_out == [o.as_dict() for o in layout.omitted]
    assert session.checkpoint_last_seq == (layout.checkpoint.last_seq if layout.checkpoint else 0)
    # Positions and explanations read from the stored figures agree with a full layout.
    stored = stored_layout(session)
    messages = list(session.messages.order_by("seq"))
    for window in (messages, messages[: len(messages) // 2], messages[len(messages) // 3:]):
        assert stored.positions(window) == layout.positions(window)
    assert stored.entry_count == layout.entry_count


@pytest.mark.parametrize("seed", range(25))
def test_input_tokens_stay_exact_through_appends_flags_and_checkpoints(project, append, seed):
    rng = random.Random(seed)
    messages = random_conversation(rng, 120)
    key = f"bookkeeping-{seed}"
    position = 0
    while position < len(messages):
        size = rng.choice([1, 1, 2, 3, 5, 8, 13])
        append(key, messages[position:position + size])
        position += size
        session = Session.objects.get(project=project, key=key)
        assert_size_is_exact(session)
        roll = rng.random()
        if roll < 0.08:
            compact(session, force=True, keep_recent_tokens=rng.choice([20, 60, 200]))
            assert_size_is_exact(session)
        elif roll < 0.14 and session.message_count:
            seq = rng.randint(1, session.message_count)
            update_message(project, key, seq, {"include_in_messages": rng.random() < 0.5})
            assert_size_is_exact(session)


@pytest.mark.parametrize("results_before", [3, 15, 16, 17, 40])
def test_the_newest_assistant_message_is_found_however_far_back_it_is(project, append, results_before):
    """An append reads the last RECENT_ROWS rows to find the newest assistant message, and further back
    only when they hold none: both ways give the size a full rebuild gives."""
    calls = [{"id": f"c{i}", "name": "lookup", "arguments": "{}"} for i in range(results_before + 2)]
    append("far", [{"role": "user", "content": "Look these up."}, {"role": "assistant", "content": None,
                                                                     "tool_calls": calls}])
    append("far", [{"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"} for i in range(results_before)])
    append("far", [{"role": "tool", "tool_call_id": f"c{results_before}", "content": "one more"}])
    assert_size_is_exact(Session.objects.get(key="far"))

    append("far", [{"role": "user", "content": f"question {i}"} for i in range(results_before)])
    append("far", [{"role": "assistant", "content": "answer"}])
    assert_size_is_exact(Session.objects.get(key="far"))


@pytest.mark.parametrize("users", [3, 20])
def test_a_session_without_an_assistant_message_keeps_its_size_exact(project, append, users):
    append("users", [{"role": "user", "content": f"question {i}"} for i in range(users)])
    append("users", [{"role": "user", "content": "and another"}])
    assert_size_is_exact(Session.objects.get(key="users"))
