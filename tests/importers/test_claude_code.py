"""Claude Code session logs: messages split over lines joined back, tool results as tool messages,
sub-agent threads as linked sessions, summaries as titles, isMeta lines sent to the model but marked as
hidden in Claude Code's view, and compactions as checkpoints at the place they happened."""

import copy
from pathlib import Path

import pytest
from django.urls import reverse

from sessions.context.explain import explain_messages
from sessions.context.model_input import Reason, build_model_input, summary_message_text
from sessions.ingest.importers import import_file
from sessions.models import Checkpoint, Event, EventType, Membership, Session
from tests.importers.conftest import anthropic_input, client_for, counts, jsonl, openai_input, stored

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "claude-code"
WITH_AGENTS = DATA / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
COMPACT_SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. The conversation "
    "is summarized below:\nThe user reported that the login page crashes on submit. Claude read login.py and "
    "found a missing None check in login()."
)


def line(uuid, parent, kind, message=None, **extra):
    entry = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/work/app",
             "sessionId": "sample", "version": "1.0.108", "gitBranch": "main", "type": kind,
             "uuid": uuid, "timestamp": f"2025-09-07T10:00:{int(uuid[1:]):02d}.000Z", **extra}
    if message is not None:
        entry["message"] = message
    return entry


def assistant(uuid, parent, message_id, *blocks):
    return line(uuid, parent, "assistant", {"id": message_id, "type": "message", "role": "assistant",
                                             "model": "claude-sonnet-4", "content": list(blocks)}, requestId="req_1")


def user(uuid, parent, content, **extra):
    return line(uuid, parent, "user", {"role": "user", "content": content}, **extra)


def boundary(uuid, logical_parent, trigger="manual"):
    return line(uuid, None, "system", subtype="compact_boundary", content="Conversation compacted", level="info",
                logicalParentUuid=logical_parent, compactMetadata={"trigger": trigger, "preTokens": 48213})


def compacted_log() -> list[dict]:
    return [
        {"type": "summary", "summary": "Fix the login crash", "leafUuid": "u13"},
        user("u01", None, "The login page crashes when I submit the form."),
        assistant("u02", "u01", "msg_A", {"type": "text", "text": "Let me read the login code."}),
        assistant("u03", "u02", "msg_A", {"type": "tool_use", "id": "toolu_A", "name": "Read",
                                          "input": {"file_path": "/work/app/login.py"}}),
        user("u04", "u03", [{"type": "tool_result", "tool_use_id": "toolu_A",
                             "content": "def login(user):\n    return user.name.lower()"}]),
        assistant("u05", "u04", "msg_B", {"type": "text", "text": "Found it: login() has no None check."}),
        {"type": "file-history-snapshot", "messageId": "u05", "snapshot": {}},
        boundary("u06", "u05"),
        user("u07", "u06", COMPACT_SUMMARY, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        user("u08", "u07", "Please fix it and add a test."),
        assistant("u09", "u08", "msg_C",
                  {"type": "thinking", "thinking": "Guard against None, then test.", "signature": "s"}),
        assistant("u10", "u09", "msg_C", {"type": "tool_use", "id": "toolu_B", "name": "Edit",
                                          "input": {"file_path": "/work/app/login.py", "old_string": "return",
                                                    "new_string": "if user is None:\n        return ''\n    return"}}),
        user("u11", "u10", [{"type": "tool_result", "tool_use_id": "toolu_B",
                             "content": [{"type": "text", "text": "The file has been updated."}]}]),
        assistant("u12", "u11", "msg_D", {"type": "text", "text": "Fixed, with a guard for a missing user."}),
        user("u13", "u12", "Thanks!"),
    ]


@pytest.fixture
def compacted(import_bytes):
    report = import_bytes("sample.jsonl", jsonl(*compacted_log()))
    assert report.error is None, report.error
    return Session.objects.get(key="sample")


def test_a_compaction_boundary_becomes_a_checkpoint_before_it(compacted):
    messages = stored(compacted)
    assert [(m.seq, m.role, m.client_id) for m in messages] == [
        (1, "user", "u01"), (2, "assistant", "msg_A"), (3, "tool", "u04"), (4, "assistant", "msg_B"),
        (5, "user", "u07"), (6, "user", "u08"), (7, "assistant", "msg_C"), (8, "tool", "u11"),
        (9, "assistant", "msg_D"), (10, "user", "u13"),
    ]
    checkpoint = Checkpoint.objects.get(session=compacted)
    assert (checkpoint.first_seq, checkpoint.last_seq, checkpoint.created_at_seq) == (1, 4, 4)
    assert checkpoint.summary == COMPACT_SUMMARY
    assert (checkpoint.summarizer, checkpoint.trigger, checkpoint.previous) == ("claude-code", "import", None)
    assert compacted.checkpoint_count == 1
    # The summary line stays in the raw log, hidden: the checkpoint gives the model that text.
    summary_line = messages[4]
    assert summary_line.include_in_messages is False
    assert summary_line.attributes["isCompactSummary"] is True
    assert summary_line.attributes["compactMetadata"] == {"trigger": "manual", "preTokens": 48213}
    assert summary_line.attributes["not_sent_reason"].startswith("the model gets this summary from the checkpoint")


def test_the_model_input_starts_from_the_claude_code_summary(compacted):
    messages = openai_input(compacted)

    assert messages[0] == {"role": "user", "content": summary_message_text(COMPACT_SUMMARY, 4)}
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert messages[1]["content"] == "Please fix it and add a test."


def test_the_coverage_view_shows_what_the_compaction_covered(compacted):
    model_input = build_model_input(compacted)
    explained = explain_messages(stored(compacted), model_input, list(compacted.checkpoints.all()))

    assert [explained[seq].code for seq in range(1, 11)] == (
        [Reason.COVERED] * 4 + [Reason.EXCLUDED] + [Reason.IN_INPUT] * 5
    )


def test_the_compaction_is_recorded_with_its_figures(compacted):
    event = Event.objects.get(session=compacted, type=EventType.COMPACTION_COMPLETED)
    checkpoint = compacted.checkpoints.get()

    assert event.actor == "import"
    assert event.data["trigger"] == "import"
    assert event.data["checkpoint_id"] == checkpoint.pk
    assert event.data["covered_seq_range"] == [1, 4]
    assert event.data["at_seq"] == 4
    assert event.data["summary_tokens"] == checkpoint.summary_tokens
    assert event.data["replaced_tokens"] == checkpoint.replaced_tokens == sum(m.tokens for m in stored(compacted)[:4])
    assert event.data["tokens_after"] == checkpoint.tokens_after < event.data["tokens_before"]


def test_importing_the_log_again_makes_no_second_checkpoint(import_bytes, compacted):
    before = counts()

    again = import_bytes("sample.jsonl", jsonl(*compacted_log()))

    assert again.error is None and again.checkpoints == 0 and again.messages == 0
    assert counts() == before
    assert Checkpoint.objects.count() == 1


def test_a_second_compaction_extends_the_first(import_bytes):
    log = compacted_log()
    log += [boundary("u14", "u13", trigger="auto"),
            user("u15", "u14", "Summary two: the crash is fixed and tested.", isCompactSummary=True),
            user("u16", "u15", "Now deploy it.")]

    import_bytes("twice.jsonl", jsonl(*log))

    first, second = Checkpoint.objects.filter(session__key="twice").order_by("last_seq")
    assert second.previous == first
    assert (second.first_seq, second.last_seq) == (5, 10)
    assert [m["content"] for m in openai_input(Session.objects.get(key="twice"))[1:]] == ["Now deploy it."]


def test_a_summary_with_nothing_before_it_stays_visible(import_bytes):
    """A log that starts with a compact summary (the earlier conversation is in another file): there is
    nothing to cover, so the summary is kept as the user message the model saw."""
    import_bytes("continued.jsonl", jsonl(user("u01", None, COMPACT_SUMMARY, isCompactSummary=True),
                                          assistant("u02", "u01", "msg_A", {"type": "text", "text": "Go on."})))

    session = Session.objects.get(key="continued")
    assert session.checkpoint_count == 0
    assert openai_input(session)[0] == {"role": "user", "content": COMPACT_SUMMARY}


def test_summary_lines_give_the_title_and_other_entries_are_skipped(compacted, import_bytes):
    assert compacted.title == "Fix the login crash"
    report = import_bytes("sample.jsonl", jsonl(*compacted_log()))
    assert report.entries_skipped == 1  # the file-history-snapshot line


def test_lines_of_one_api_message_are_joined(compacted):
    msg_c = compacted.messages.get(client_id="msg_C")

    assert msg_c.reasoning == "Guard against None, then test."
    assert [c["id"] for c in msg_c.tool_calls] == ["toolu_B"]
    assert msg_c.content == ""
    assert msg_c.attributes["uuid"] == "u09" and msg_c.attributes["merged_uuids"] == ["u10"]
    assert msg_c.attributes["message"]["model"] == "claude-sonnet-4"
    assert msg_c.attributes["requestId"] == "req_1"
    # What every line repeats is kept once, in the session's metadata.
    assert not {"sessionId", "cwd", "gitBranch", "version", "userType", "isSidechain"} & set(msg_c.attributes)
    assert msg_c.created_at.isoformat() == "2025-09-07T10:00:09+00:00"  # its first line


def test_the_anthropic_rendering_gives_the_tool_blocks_back(compacted):
    rendered = anthropic_input(compacted)

    tool_use = rendered["messages"][1]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["id"] == "toolu_B"
    assert rendered["messages"][2]["content"][0] == {
        "type": "tool_result", "tool_use_id": "toolu_B", "content": [{"type": "text", "text": "The file has been updated."}],
    }


def test_sub_agent_threads_are_sessions_linked_to_the_main_one(project):
    import_file(project, WITH_AGENTS)

    main = Session.objects.get(key=WITH_AGENTS.stem)
    agents = list(Session.objects.filter(key__startswith=WITH_AGENTS.stem + ":agent-").order_by("key"))
    assert len(agents) == 2
    assert main.metadata["sidechains"] == [a.key for a in agents]
    assert {a.metadata["parent_tool_call_id"] for a in agents} == {"toolu_014YF9TXhDRR7BnpasNJ7gjC",
                                                                   "toolu_01LKfUwrsnof18CpWZQcJH44"}
    for agent in agents:
        assert agent.metadata["parent_session"] == main.key and agent.metadata["sidechain"] is True
        assert agent.title.startswith("Sub-agent: ")
        assert any(call["id"] == agent.metadata["parent_tool_call_id"] and call["name"] == "Task"
                   for m in main.messages.filter(role="assistant") for call in m.tool_calls)
        first = agent.messages.get(seq=1)
        assert first.role == "user" and first.text.startswith(("Examine", "Analyze"))
        assert not agent.messages.filter(client_id__in=main.messages.values("client_id")).exists()
    assert main.metadata["claude_code"] == {"sessionId": WITH_AGENTS.stem, "cwd": "/path/to/Demo",
                                            "gitBranch": "main", "version": "1.0.108"}


@pytest.mark.parametrize("path", sorted(DATA.glob("*.jsonl")), ids=lambda p: p.name[:8])
def test_is_meta_lines_are_in_the_model_input_marked_hidden_in_the_source_ui(project, path):
    """A slash command's expansion is hidden in Claude Code's transcript view but is the prompt the model
    acted on: it is in the model input, and marked in the raw log."""
    import_file(project, path)
    session = Session.objects.get(key=path.stem)

    command, expansion = session.messages.get(seq=1), session.messages.get(seq=2)
    assert expansion.include_in_messages is True
    assert expansion.attributes["isMeta"] is True and expansion.attributes["hidden_in_source_ui"] is True
    assert expansion.text.startswith(("Split complex tasks", "Please analyze this codebase"))
    assert "hidden_in_source_ui" not in command.attributes
    assert openai_input(session)[:2] == [{"role": "user", "content": command.text},
                                         {"role": "user", "content": expansion.text}]
    explained = explain_messages(stored(session), build_model_input(session), [])
    assert explained[2].code == Reason.IN_INPUT


CAVEAT = ("Caveat: The messages below were generated by the user while running local commands. DO NOT respond "
          "to these messages or otherwise consider them in your response unless the user explicitly asks you to.")


def local_command_log() -> list[dict]:
    """A session that starts with a local command (/cost), as Claude Code logs it: the isMeta caveat
    addressed to the model, the command, its output, then the user's first prompt."""
    return [
        user("u01", None, CAVEAT, isMeta=True),
        user("u02", "u01", "<command-name>/cost</command-name>\n<command-message>cost</command-message>\n"
                           "<command-args></command-args>"),
        user("u03", "u02", "<local-command-stdout>Total cost: $0.0000</local-command-stdout>"),
        user("u04", "u03", "Why does the login page crash?"),
        assistant("u05", "u04", "msg_A", {"type": "text", "text": "Let me look at login.py."}),
    ]


def test_the_caveat_line_is_sent_to_the_model_it_addresses(import_bytes):
    import_bytes("local.jsonl", jsonl(*local_command_log()))
    session = Session.objects.get(key="local")

    assert openai_input(session)[0] == {"role": "user", "content": CAVEAT}
    caveat = session.messages.get(seq=1)
    assert caveat.include_in_messages is True and caveat.attributes["hidden_in_source_ui"] is True
    assert session.title == "Why does the login page crash?"  # not the caveat, the command or its output


def test_the_session_page_badges_lines_hidden_in_the_source_ui(project):
    import_file(project, WITH_AGENTS)
    client = client_for(project, Membership.Role.VIEWER)

    page = client.get(reverse("session", args=[project.name, WITH_AGENTS.stem])).content.decode()

    command, expansion = (page.split(f'id="m-{seq}"', 1)[1].split("</header>", 1)[0] for seq in (1, 2))
    assert 'class="badge source-hidden"' in expansion and ">hidden in source UI<" in expansion
    assert "source-hidden" not in command
    assert 'class="badge in"' in expansion  # and it is in the input


def test_a_file_with_only_one_sub_agent_thread_is_that_session(import_bytes):
    log = copy.deepcopy(compacted_log()[1:6])
    for entry in log:
        entry["isSidechain"] = True

    report = import_bytes("agent-abc123.jsonl", jsonl(*log))

    assert report.keys == ["agent-abc123"]
    assert Session.objects.get(key="agent-abc123").metadata["parent_session"] == "sample"


@pytest.mark.parametrize(("entry", "reason"), [
    ({"role": "user", "content": "Thanks!"}, "line 16: not a Claude Code entry (it has no type)"),
    (user("u14", "u13", [{"type": "input_text", "text": "Thanks!"}]),
     "line 16: content block type 'input_text' is not an Anthropic Messages block"),
    (line("u14", "u13", "user", {"role": "assistant", "content": "Thanks!"}),
     "line 16: a user entry holds a message of role 'assistant'"),
])
def test_a_line_that_is_not_claude_code_fails_the_file(import_bytes, entry, reason):
    report = import_bytes("mixed.jsonl", jsonl(*compacted_log(), entry))

    assert report.error == reason
    assert counts()["messages"] == 0
