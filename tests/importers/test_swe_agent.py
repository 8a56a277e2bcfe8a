"""SWE-agent trajectories (`.traj`): the history is what SWE-agent sent its model; tool results pair with
their calls by `tool_call_ids`, and the file's other fields are session metadata."""

import json
from pathlib import Path

import pytest

from sessions.ingest.importers import import_file, parse_transcript
from sessions.models import Message, Session
from tests.importers.conftest import anthropic_input, jsonl, openai_input, stored

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "swe-agent"
FUNCTION_CALLING = DATA / "function_calling_simple.traj"
THOUGHT_ACTION = DATA / "ctf_pwn_warmup.traj"


def history(path: Path) -> list[dict]:
    return json.loads(path.read_text())["history"]


@pytest.mark.parametrize("path", [FUNCTION_CALLING, THOUGHT_ACTION], ids=lambda p: p.name)
def test_a_trajectory_is_recognised_and_named_after_the_file(project, path):
    report = import_file(project, path)

    assert report.error is None and report.format == "swe-agent"
    assert report.keys == [path.name.removesuffix(".traj")]


@pytest.mark.parametrize("path", [FUNCTION_CALLING, THOUGHT_ACTION], ids=lambda p: p.name)
def test_the_model_input_is_the_history_sent_to_the_model(project, path):
    items = history(path)

    import_file(project, path)

    session = Session.objects.get(project=project)
    system = items[0]
    assert system["role"] == "system" and session.instructions == system["content"]
    sent = openai_input(session)
    assert sent[0] == {"role": "system", "content": system["content"]}
    # After the instructions, every history item in order, as SWE-agent's litellm call sends it.
    want = []
    for item in items[1:]:
        message = {"role": item["role"], "content": item["content"]}
        if item.get("tool_calls"):
            message["tool_calls"] = item["tool_calls"]
        if item["role"] == "tool":
            message["tool_call_id"] = item["tool_call_ids"][0]
        want.append(message)
    assert [{k: m[k] for k in ("role", "content", "tool_calls", "tool_call_id") if k in m} for m in sent[1:]] == want


def test_tool_results_are_paired_with_their_calls_by_id(project):
    import_file(project, FUNCTION_CALLING)

    session = Session.objects.get(project=project)
    results = list(session.messages.filter(role="tool").order_by("seq"))
    assert len(results) == 5
    for result in results:
        call = session.messages.get(seq=result.call_seq)
        assert call.role == "assistant" and result.tool_call_id in [c["id"] for c in call.tool_calls]
        assert call.seq == result.seq - 1
    task, call, result = anthropic_input(session)["messages"][:3]  # the system prompt is separate
    assert call["content"][-1] == {"type": "tool_use", "id": results[0].tool_call_id, "name": "find_file",
                                   "input": {"file_name": "missing_colon.py"}}
    assert result["content"][0]["type"] == "tool_result"
    assert result["content"][0]["tool_use_id"] == results[0].tool_call_id


def test_swe_agent_fields_are_kept_in_attributes_and_metadata(project):
    items = history(FUNCTION_CALLING)

    import_file(project, FUNCTION_CALLING)

    session = Session.objects.get(project=project)
    system, task, action, observation = stored(session)[:4]
    assert session.metadata == {"agent": "main",
                                "imported_from": {"file": FUNCTION_CALLING.name, "format": "swe-agent"}}
    assert system.attributes == {"message_type": "system_prompt"}
    assert task.role == "user" and task.attributes == {"message_type": "observation"}
    assert action.attributes == {"message_type": "action", "thought": items[2]["thought"], "action": items[2]["action"]}
    assert action.tool_calls == [{"id": "call_PbWErNIge3YTrli3fiVvmIid", "name": "find_file",
                                  "arguments": '{"file_name":"missing_colon.py"}'}]
    assert observation.tool_call_id == "call_PbWErNIge3YTrli3fiVvmIid"
    assert [m.client_id for m in (system, task)] == ["function_calling_simple:0:0", "function_calling_simple:0:1"]


def test_the_run_info_is_session_metadata(project):
    data = json.loads(THOUGHT_ACTION.read_text())

    import_file(project, THOUGHT_ACTION)

    session = Session.objects.get(project=project)
    assert session.metadata["info"] == data["info"] and session.metadata["info"]["exit_status"] == "submitted"
    assert session.metadata["environment"] == "swe_main" and session.metadata["agent"] == "primary"
    assert "trajectory" not in session.metadata and "history" not in session.metadata


def test_each_agent_is_a_session_of_its_own(import_bytes):
    """An agent sends its model only the history items with its own name."""
    items = history(FUNCTION_CALLING)
    reviewer = [{**items[0], "agent": "reviewer"}, {**items[1], "agent": "reviewer"},
                {"role": "assistant", "content": "The patch adds the colon: accept.", "agent": "reviewer",
                 "message_type": "assistant"}]
    data = {"history": [*items[:2], *reviewer, *items[2:]]}

    report = import_bytes("review.traj", json.dumps(data))

    assert report.error is None and report.keys == ["review:main", "review:reviewer"]
    main, review = Session.objects.get(key="review:main"), Session.objects.get(key="review:reviewer")
    assert (main.message_count, review.message_count) == (len(items), 3)
    assert review.metadata["agent"] == "reviewer"
    assert openai_input(review)[-1] == {"role": "assistant", "content": "The patch adds the colon: accept."}


def test_importing_again_stores_nothing(project):
    import_file(project, FUNCTION_CALLING)

    again = import_file(project, FUNCTION_CALLING)

    assert again.error is None and again.messages == 0 and again.duplicates == len(history(FUNCTION_CALLING))


def test_the_format_can_be_named(project, tmp_path):
    renamed = tmp_path / "run.json"
    renamed.write_bytes(FUNCTION_CALLING.read_bytes())

    report = import_file(project, renamed, fmt="swe-agent")

    assert report.error is None and report.keys == ["run"]


@pytest.mark.parametrize(("item", "reason"), [
    ({"role": "exit", "content": "submitted", "agent": "main"},
     "history item 12: role 'exit' is not a SWE-agent history role; SWE-agent's are system, user, assistant and tool"),
    ({"role": "tool", "content": "done", "agent": "main", "message_type": "observation"},
     "history item 12: a tool item needs tool_call_ids, a list of the call ids it answers"),
    ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "y"}], "agent": "main"},
     "history item 12: content part type 'tool_result' is not an OpenAI Chat Completions part; OpenAI's are text, "
     "image_url, input_audio, file and refusal"),
])
def test_an_item_swe_agent_would_not_send_fails_the_file(import_bytes, item, reason):
    report = import_bytes("bad.traj", json.dumps({"history": [*history(FUNCTION_CALLING), item]}))

    assert report.error == reason
    assert Message.objects.count() == 0


@pytest.mark.parametrize("data", [
    json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
    jsonl({"type": "user", "message": {"role": "user", "content": "hi"}, "uuid": "u1"}),
], ids=["openai", "claude-code"])
def test_another_format_named_swe_agent_fails(import_bytes, data):
    report = import_bytes("other.jsonl" if data.startswith(b'{"type"') else "other.json", data, fmt="swe-agent")

    assert report.error.startswith("a SWE-agent trajectory is a JSON object with a `history` list (the file "
                                   "looks like ")


def test_parsing_keeps_content_given_as_text_parts(db):
    items = [{"role": "system", "content": "Solve it.", "agent": "main", "message_type": "system_prompt"},
             {"role": "user", "content": [{"type": "text", "text": "The issue:", "cache_control": {"type": "ephemeral"}},
                                          {"type": "text", "text": "division fails"}],
              "agent": "main", "message_type": "observation"}]

    parsed = parse_transcript("parts.traj", json.dumps({"history": items}).encode())

    task = parsed.sessions[0].messages[1]
    assert task["content"] == [{"type": "text", "text": "The issue:"}, {"type": "text", "text": "division fails"}]
