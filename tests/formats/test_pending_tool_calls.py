"""While the newest assistant message has tool calls without results, both providers refuse a request
that holds them. Replaying the real runs in tests/data (each state right after an assistant message
made its calls, the model input as of that message): the `openai` and `anthropic` formats leave the
unanswered calls out, `omitted` says `awaiting_tool_result`, `pending_tool_calls` lists them, and the
`ctxweb` format still shows them; the token total is a recount of what the `openai` format sends."""

from pathlib import Path

import pytest

from sessions.context.model_input import build_model_input
from sessions.context.provider_input import model_input_response
from sessions.ingest.importers import import_file
from sessions.ingest.message_edits import update_message
from sessions.models import Session
from sessions.wire.validation import count_openai_messages
from tests.builders import openai_input_problems
from tests.test_projection_properties import anthropic_problems

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl"))
MINI_SWE_AGENT = DATA / "openai-chat" / "mini-swe-agent-deepseek_chat_test_1-100__django__django-14752.traj.json"


def awaiting_states(session):
    """(seq, call ids) of each assistant message that made tool calls, with the input as of it."""
    rows = session.messages.filter(role="assistant").exclude(call_ids=[]).values_list("seq", "call_ids")
    for seq, call_ids in rows:
        yield seq, call_ids, build_model_input(session, as_of=seq)


@pytest.mark.parametrize("path", FILES, ids=[p.name[:40] for p in FILES])
def test_calls_awaiting_their_results_are_left_out_of_both_provider_formats(project, path):
    report = import_file(project, path)
    states = 0
    for key in report.keys:
        session = Session.objects.get(project=project, key=key)
        for seq, call_ids, model_input in awaiting_states(session):
            openai = model_input_response(model_input, "openai")
            anthropic = model_input_response(model_input, "anthropic")
            ctxweb = model_input_response(model_input, "ctxweb")

            assert openai_input_problems(openai["messages"]) == [], (key, seq)
            assert anthropic_problems({"system": anthropic["system"], "messages": anthropic["messages"]}
                                      if anthropic["system"] else {"messages": anthropic["messages"]}) == []
            for body in (openai, anthropic, ctxweb):
                assert [(c["seq"], c["id"]) for c in body["pending_tool_calls"]] == [(seq, c) for c in call_ids]
                assert {(o.reason, o.seq) for o in body["omitted"]} >= {("awaiting_tool_result", seq)}
            shown = next(e for e in ctxweb["messages"] if e.get("seq") == seq)
            assert [c["id"] for c in shown["pending_tool_calls"]] == call_ids
            assert openai["tokens"]["total"] == count_openai_messages(openai["messages"])[0], (key, seq)
            states += 1
    assert states  # every file holds runs with tool calls


def test_a_finished_mini_swe_agent_run_whose_exit_record_is_hidden_ends_awaiting_its_last_call(project):
    """mini-swe-agent's last assistant message makes a call (the submit command) whose result never
    came: the run ended with an `exit` record instead. With that record out of the model input, the
    last call awaits its result; the message's text is still sent."""
    report = import_file(project, MINI_SWE_AGENT)
    session = Session.objects.get(project=project, key=report.keys[0])
    last = session.messages.order_by("-seq").first()
    update_message(project, session.key, last.seq, {"include_in_messages": False})
    call = session.messages.get(seq=last.seq - 1)
    assert call.role == "assistant" and call.text and len(call.tool_calls) == 1

    body = model_input_response(build_model_input(Session.objects.get(pk=session.pk)), "openai")

    assert body["messages"][-1] == {"role": "assistant", "content": call.text}
    assert [(o.reason, o.seq, o.whole_message) for o in body["omitted"]] == [
        ("awaiting_tool_result", call.seq, False)]
    assert [c["id"] for c in body["pending_tool_calls"]] == [call.tool_calls[0]["id"]]
    assert openai_input_problems(body["messages"]) == []
