"""Codex CLI rollouts: Responses items as messages with their tool calls paired, reasoning on the assistant
message after it, the base instructions as the session's, the session meta, latest turn context and token
usage in metadata, and a compaction Codex made as a checkpoint, after which the model input is what Codex
sent: the summary, the items of its replacement history, then the later lines."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from sessions.context.explain import explain_messages
from sessions.context.model_input import Reason, build_model_input, summary_message_text
from sessions.ingest.importers import import_file
from sessions.ingest.importers.detect import detect, load
from sessions.models import Checkpoint, Session
from tests.importers.conftest import counts, jsonl, openai_input, stored

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "data" / "transcripts"
DATA = TRANSCRIPTS / "codex"
COMPACTED = DATA / "rollout-2025-09-14T10-00-00-fixture-0199462a-3c1e-7d50-9b2f-5e8a61c4d7f3.jsonl"
PLAIN = DATA / "rollout-2025-09-14T11-00-00-fixture-5b1e9c2a-7d43-4f0e-9a61-0c8d2f3e4b15.jsonl"
OTHER_FILES = sorted(p for p in (TRANSCRIPTS.parent).rglob("*") if p.suffix in (".json", ".jsonl", ".traj")
                     and DATA not in p.parents)
NOTHING = {"sessions": 0, "messages": 0, "tool_calls": 0, "tool_results": 0, "events": 0}


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def payloads(path: Path, kind: str) -> list[dict]:
    return [line["payload"] for line in lines_of(path) if line["type"] == kind]


def text_of_item(item: dict) -> str:
    return "".join(part["text"] for part in item["content"])


def rollout_line(second: int, kind: str, payload: dict) -> dict:
    return {"timestamp": f"2025-09-14T12:00:{second:02d}.000Z", "type": kind, "payload": payload}


def message(role: str, text: str) -> dict:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


META = rollout_line(0, "session_meta", {"id": "0199aaaa-0000-7000-8000-000000000001", "timestamp": "2025-09-14T12:00:00Z",
                                        "cwd": "/tmp/w", "originator": "codex_cli_rs", "cli_version": "0.58.0",
                                        "source": "cli", "model_provider": "openai"})
SUMMARY = ("Another language model started to solve this problem and produced a summary of its thinking process.\n"
           "The user wants a greeting script; hello.sh prints hello.")


def short_rollout(*later: dict) -> list[dict]:
    return [META,
            rollout_line(1, "response_item", message("user", "<environment_context>\n  <cwd>/tmp/w</cwd>\n"
                                                               "</environment_context>")),
            rollout_line(2, "response_item", message("user", "Write hello.sh")),
            rollout_line(3, "response_item", message("assistant", "Done: hello.sh prints hello.")),
            *later]


def run_command(*paths) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_transcripts", *map(str, paths), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def compacted(project):
    out, _ = run_command(COMPACTED)
    assert "Imported 1 of 1 file(s): 1 session(s) (1 new), 22 message(s) stored" in out
    assert "1 checkpoint(s); skipped 8 (0 message(s) already stored, 8 entries without a message)" in out
    return Session.objects.get(key=COMPACTED.stem)


@pytest.fixture
def plain(project):
    report = import_file(project, PLAIN)
    assert report.error is None, report.error
    assert (report.format, report.messages, report.entries_skipped) == ("codex", 6, 2)
    return Session.objects.get(key=PLAIN.stem)


def test_messages_keep_the_rollout_order_with_each_tool_result_after_its_call(compacted):
    messages = stored(compacted)

    assert [(m.client_id.split(":", 1)[1], m.role) for m in messages] == [
        ("1:0", "system"), ("2:0", "system"), ("3:0", "user"), ("4:0", "user"), ("6:0", "user"),
        ("10:0", "assistant"), ("11:0", "tool"), ("13:0", "assistant"),
        ("17:0", "user"), ("20:0", "assistant"), ("21:0", "tool"), ("22:0", "assistant"), ("23:0", "tool"),
        ("24:0", "assistant"),
        ("27:1", "user"), ("27:2", "user"),
        ("30:0", "system"), ("31:0", "user"), ("33:0", "user"), ("36:0", "assistant"), ("37:0", "tool"),
        ("38:0", "assistant"),
    ]
    calls = {}
    for m in messages:
        for call in m.tool_calls:
            calls[call["id"]] = m.seq
        if m.role == "tool":
            assert calls[m.tool_call_id] == m.seq - 1
    assert [c["name"] for m in messages for c in m.tool_calls] == ["shell", "apply_patch", "local_shell", "shell"]


def test_codex_tool_items_become_tool_calls_and_results(compacted):
    items = {line["payload"]["call_id"]: line["payload"] for line in lines_of(COMPACTED)
             if line["type"] == "response_item" and "call_id" in line["payload"]
             and line["payload"]["type"] in ("custom_tool_call", "local_shell_call")}
    patch, shell = compacted.messages.get(seq=10), compacted.messages.get(seq=12)

    patch_call = patch.tool_calls[0]
    assert patch_call == {"id": "call_Vt7pA2mXq9Ld", "name": "apply_patch",
                          "arguments": items["call_Vt7pA2mXq9Ld"]["input"]}  # free-form text, as the model wrote it
    assert patch.attributes["function_call_fields"] == [
        {"call_id": "call_Vt7pA2mXq9Ld", "status": "completed", "codex_type": "custom_tool_call"}]
    assert compacted.messages.get(seq=11).attributes == {"codex_type": "custom_tool_call_output"}
    shell_call = shell.tool_calls[0]
    assert (shell_call["id"], shell_call["name"]) == ("call_R3sKe8uYb0Jc", "local_shell")
    assert json.loads(shell_call["arguments"]) == items["call_R3sKe8uYb0Jc"]["action"]
    assert compacted.messages.get(seq=13).text == "...\n3 passed in 0.12s\n"


def test_reasoning_summaries_are_the_reasoning_of_the_next_assistant_message(compacted):
    reasoning = payloads(COMPACTED, "response_item")
    summaries = [r["summary"][0]["text"] for r in reasoning if r["type"] == "reasoning"]

    assert [m.reasoning for m in compacted.messages.filter(role="assistant").exclude(reasoning="")] == summaries
    first = compacted.messages.get(seq=6)
    assert first.attributes["reasoning_items"] == [{"encrypted_content": "gAAAAABoxk3Rfixture-encrypted-reasoning-1"}]


def test_the_base_instructions_are_the_session_instructions(compacted):
    base = payloads(COMPACTED, "session_meta")[0]["base_instructions"]["text"]

    assert compacted.instructions == base
    first = compacted.messages.get(seq=1)
    assert (first.role, first.text, first.attributes) == ("system", base,
                                                          {"codex_source": "session_meta.base_instructions"})
    developer = compacted.messages.get(seq=2)
    assert developer.role == "system" and developer.attributes == {"original_role": "developer"}
    assert developer.text.startswith("<permissions instructions>")


def test_metadata_keeps_the_session_meta_the_latest_turn_context_and_token_usage(compacted):
    meta = payloads(COMPACTED, "session_meta")[0]
    last_turn = payloads(COMPACTED, "turn_context")[-1]
    last_usage = payloads(COMPACTED, "event_msg")[-1]["info"]

    metadata = compacted.metadata
    assert metadata["imported_from"] == {"file": COMPACTED.name, "format": "codex"}
    assert metadata["codex"] == {k: v for k, v in meta.items() if k != "base_instructions"}
    assert metadata["codex"]["git"]["branch"] == "main"
    assert metadata["codex_turn_context"] == {k: v for k, v in last_turn.items() if k != "user_instructions"}
    assert metadata["codex_turn_context"]["effort"] == "high"
    assert metadata["codex_token_usage"] == last_usage
    assert metadata["codex_token_usage"]["model_context_window"] == 272000


def test_the_title_is_the_first_prompt_not_the_injected_context(compacted, plain):
    assert compacted.title == text_of_item(payloads(COMPACTED, "response_item")[3])
    assert compacted.title.startswith("The cart total is off by a cent")
    assert plain.title == "Who wrote the last commit in this repository?"


def test_the_compaction_is_a_checkpoint_covering_everything_before_it(compacted):
    summary = payloads(COMPACTED, "compacted")[0]["message"]

    checkpoint = Checkpoint.objects.get(session=compacted)
    assert (checkpoint.summarizer, checkpoint.trigger, checkpoint.previous) == ("codex", "import", None)
    assert (checkpoint.first_seq, checkpoint.last_seq, checkpoint.created_at_seq) == (1, 14, 14)
    assert checkpoint.summary == summary.strip()
    assert checkpoint.created_at.isoformat() == "2025-09-14T10:01:20.960000+00:00"


def test_the_model_input_starts_from_the_summary_then_what_codex_sent_again(compacted):
    replacement = payloads(COMPACTED, "compacted")[0]["replacement_history"]
    summary = compacted.checkpoints.get().summary

    messages = openai_input(compacted)

    assert messages[0] == {"role": "system", "content": compacted.instructions}
    assert messages[1] == {"role": "user", "content": summary_message_text(summary, 14)}
    # The user messages Codex kept in its replacement history (all but the summary), then the later lines.
    kept = [text_of_item(item) for item in replacement[:-1]]
    assert [m["content"][0]["text"] for m in messages[2:4]] == kept
    assert [m["role"] for m in messages[4:]] == ["user", "user", "assistant", "tool", "assistant"]
    assert messages[4]["content"][0]["text"].startswith("<environment_context>")
    assert messages[5]["content"][0]["text"].startswith("Now show the receipt total")
    replayed = compacted.messages.filter(seq__in=(15, 16))
    assert all(m.attributes == {"codex_replacement_history": True} for m in replayed)


def test_the_coverage_view_shows_the_checkpoint_and_the_instructions(compacted):
    explained = explain_messages(stored(compacted), build_model_input(compacted), list(compacted.checkpoints.all()))

    # System messages (the base instructions, developer messages) are never stored model input: the session's
    # instructions are.
    assert [explained[seq].code for seq in (1, 2, 17)] == [Reason.INSTRUCTIONS_ROLE] * 3
    assert [explained[seq].code for seq in range(3, 15)] == [Reason.COVERED] * 12
    assert {explained[seq].code for seq in (15, 16, 18, 19, 20, 21, 22)} == {Reason.IN_INPUT}


def test_importing_a_rollout_again_stores_nothing(compacted):
    before = counts()

    out, _ = run_command(COMPACTED)

    assert "0 message(s) stored" in out and "22 message(s) already stored" in out
    assert counts() == before
    assert Checkpoint.objects.count() == 1


def test_a_plain_rollout_keeps_the_context_codex_injected_in_the_model_input(plain):
    messages = openai_input(plain)

    assert plain.instructions == ""  # no base instructions in an older meta, and no developer message
    assert plain.metadata["codex"]["instructions"] == "Answer in one sentence."
    assert plain.metadata["codex_turn_context"]["model"] == "gpt-5"
    assert plain.metadata["codex_token_usage"]["total_token_usage"]["total_tokens"] == 5291
    assert [m["role"] for m in messages] == ["user", "user", "user", "assistant", "tool", "assistant"]
    assert messages[0]["content"][0]["text"].startswith("<user_instructions>")
    assert messages[1]["content"][0]["text"].startswith("<environment_context>")
    call = messages[3]["tool_calls"][0]
    assert (call["id"], call["function"]["name"]) == ("call_Zp2mQ7rTa4Xe", "shell")
    assert messages[4] == {"role": "tool", "tool_call_id": "call_Zp2mQ7rTa4Xe", "content": "Ada Lovelace\n"}
    assert plain.messages.get(seq=4).created_at.isoformat() == "2025-09-14T11:00:02.311000+00:00"


def test_the_command_takes_codex_as_the_format(project):
    out, _ = run_command(PLAIN, "--format", "codex")

    assert "Imported 1 of 1 file(s): 1 session(s) (1 new), 6 message(s) stored" in out


def test_a_rollout_above_the_streaming_size_is_read_whole(project, settings):
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 1000

    report = import_file(project, COMPACTED)

    assert report.error is None and (report.format, report.messages, report.checkpoints) == ("codex", 22, 1)


def test_format_detection_picks_codex_for_rollouts():
    for path in (COMPACTED, PLAIN):
        assert detect(*load(path.name, path.read_bytes())) == "codex"


@pytest.mark.parametrize("path", OTHER_FILES, ids=[p.name[:40] for p in OTHER_FILES])
def test_format_detection_does_not_take_other_files_for_rollouts(path):
    assert detect(*load(path.name, path.read_bytes())) != "codex"


def test_a_rollout_written_before_the_line_wrapper_imports(import_bytes):
    report = import_bytes("rollout-2025-05-07T17-24-21-legacy.jsonl", jsonl(
        {"id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "timestamp": "2025-05-07T17:24:21.123Z",
         "instructions": "Be brief."},
        {"type": "message", "id": None, "role": "user", "content": [{"type": "input_text", "text": "List files"}]},
        {"type": "local_shell_call", "id": None, "call_id": "call_1", "status": "completed",
         "action": {"type": "exec", "command": ["ls"], "timeout_ms": None, "working_directory": None, "env": None,
                    "user": None}},
        {"type": "function_call_output", "call_id": "call_1", "output": "README.md\n"},
        {"record_type": "state"},
        {"type": "message", "id": None, "role": "assistant", "content": [{"type": "output_text", "text": "README.md"}]},
    ))

    assert report.error is None, report.error
    assert (report.format, report.messages, report.entries_skipped) == ("codex", 4, 1)
    session = Session.objects.get(key="rollout-2025-05-07T17-24-21-legacy")
    assert session.title == "List files"
    assert session.metadata["codex"]["instructions"] == "Be brief."
    assert [m["role"] for m in openai_input(session)] == ["user", "assistant", "tool", "assistant"]


def test_items_codex_never_sends_and_other_events_are_skipped_and_counted(import_bytes):
    report = import_bytes("skips.jsonl", jsonl(*short_rollout(
        rollout_line(4, "response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc", "parent": None}}),
        rollout_line(5, "response_item", {"type": "something_new", "data": 1}),
        rollout_line(6, "event_msg", {"type": "agent_message", "message": "Done: hello.sh prints hello."}),
        rollout_line(7, "event_msg", {"type": "token_count", "info": None, "rate_limits": None}),
        rollout_line(8, "session_meta", META["payload"]),
    )))

    assert report.error is None, report.error
    assert (report.messages, report.entries_skipped) == (3, 4)


def test_a_compaction_without_a_message_takes_its_summary_from_the_replacement_history(import_bytes):
    report = import_bytes("remote.jsonl", jsonl(*short_rollout(
        rollout_line(4, "compacted", {"message": "", "replacement_history": [
            message("user", "Write hello.sh"), message("user", SUMMARY)]}),
        rollout_line(5, "response_item", message("user", "Now make it executable")),
    )))

    assert report.error is None and report.checkpoints == 1
    session = Session.objects.get(key="remote")
    assert session.checkpoints.get().summary == SUMMARY
    assert [m["content"] for m in openai_input(session)] == [
        summary_message_text(SUMMARY, 3),
        [{"type": "text", "text": "Write hello.sh"}],
        [{"type": "text", "text": "Now make it executable"}],
    ]


def test_a_compaction_of_older_codex_sends_the_user_prompts_again(import_bytes):
    """Without replacement_history, Codex rebuilt its history from the real user messages it held and the
    summary: those prompts are stored again after the checkpoint, the injected context is not."""
    import_bytes("older.jsonl", jsonl(*short_rollout(
        rollout_line(4, "compacted", {"message": SUMMARY}),
        rollout_line(5, "response_item", message("user", "Now make it executable")),
    )))

    session = Session.objects.get(key="older")
    messages = openai_input(session)
    assert [m["content"] for m in messages[1:]] == [[{"type": "text", "text": "Write hello.sh"}],
                                                   [{"type": "text", "text": "Now make it executable"}]]
    assert session.messages.get(seq=4).attributes == {"codex_replacement_history": True}


def test_a_thread_rollback_leaves_the_dropped_turn_out_of_the_model_input(import_bytes):
    import_bytes("rollback.jsonl", jsonl(*short_rollout(
        rollout_line(4, "response_item", message("user", "Also delete README.md")),
        rollout_line(5, "response_item", message("assistant", "Deleted.")),
        rollout_line(6, "event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
        rollout_line(7, "response_item", message("user", "Add a comment to hello.sh instead")),
    )))

    session = Session.objects.get(key="rollback")
    dropped = session.messages.filter(seq__in=(4, 5))
    assert all(not m.include_in_messages and m.attributes["not_sent_reason"].startswith("Codex dropped this turn")
               for m in dropped)
    texts = [m["content"][0]["text"] for m in openai_input(session)]
    assert "Also delete README.md" not in texts and texts[-1] == "Add a comment to hello.sh instead"


REFUSALS = [
    ("a truncated line", b'{"timestamp": "2025-09-14T12:00:04.000Z", "type": "response_item", "payload": {"type": "mes',
     "line 5 is not valid JSON: Unterminated string starting at (column 88)"),
    ("a payload that is not an object", rollout_line(4, "response_item", ["not", "an", "object"]),
     "line 5: the payload of a response_item line must be a JSON object"),
    ("a line without a payload", {"timestamp": "2025-09-14T12:00:04.000Z", "type": "response_item"},
     "line 5 is not a Codex rollout line: it needs a `type` and a `payload`"),
    ("a compaction with no summary", rollout_line(4, "compacted", {"message": "", "replacement_history": [
        message("user", "Write hello.sh")]}),
     "line 5: the compaction has no summary: its message is empty and its replacement_history holds no summary "
     "message"),
    ("a compaction the server encrypted", rollout_line(4, "compacted", {"message": "", "replacement_history": [
        message("user", "Write hello.sh"), {"type": "compaction", "encrypted_content": "gAAAA..."}]}),
     "line 5: the compaction has no summary: its message is empty and its replacement_history holds an encrypted "
     "compaction item (a summary made by the server, which ctxweb cannot show)"),
    ("a web search the model ran", rollout_line(4, "response_item", {
        "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "bash shebang"}}),
     "line 5: Codex sent the model a web_search_call item, which ctxweb cannot show (it takes message, "
     "function_call, function_call_output, reasoning, local_shell_call, custom_tool_call, custom_tool_call_output "
     "items)"),
    ("a tool result without a call id", rollout_line(4, "response_item", {
        "type": "custom_tool_call_output", "output": "ok"}), "line 5: call_id must be a string"),
]


@pytest.mark.parametrize(("last", "sentence"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_a_rollout_that_cannot_be_read_fails_with_a_sentence_storing_nothing(import_bytes, project, last, sentence):
    data = jsonl(*short_rollout()) + (last if isinstance(last, bytes) else jsonl(last))

    report = import_bytes("broken.jsonl", data)

    assert report.error == sentence
    assert counts(project) == NOTHING


@pytest.mark.parametrize("data", [
    jsonl({"role": "user", "content": "Hi"}),
    jsonl({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "Hi"}}),
    json.dumps({"messages": [{"role": "user", "content": "Hi"}]}).encode(),
    jsonl(META),  # a session meta and nothing the model got
], ids=["chat-lines", "claude-code-line", "json-object", "no-messages"])
def test_other_files_forced_as_codex_fail_with_a_sentence(import_bytes, project, data):
    report = import_bytes("other.jsonl", data, fmt="codex")

    assert report.error and "Traceback" not in report.error and "unexpected error" not in report.error
    assert counts(project) == NOTHING
