"""OpenAI Chat Completions transcripts, in each container real logs use, with their quirks."""

import pytest

from sessions.ingest.importers import parse_transcript
from sessions.models import Message, Session
from tests.importers.conftest import jsonl, openai_input, stored

CONVERSATION = [
    {"role": "system", "content": "You are a shell agent."},
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": None, "reasoning_content": "Start with ls.",
     "tool_calls": [{"id": "call_1", "type": "function", "index": 0,
                     "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}],
     "function_call": None, "provider_specific_fields": {"refusal": None}},
    {"role": "tool", "tool_call_id": "call_1", "name": "bash", "content": "a.py\nb.py", "extra": {"returncode": 0}},
    # The same call id used again for a different call: the result pairs with the nearest one.
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                          "function": {"name": "bash", "arguments": "{\"command\": \"cat a.py\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"},
    {"role": "assistant", "content": "There are two files.", "tool_calls": None},
    {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted"}},
]


def test_a_message_list_is_one_session_named_after_the_file(import_bytes):
    report = import_bytes("run-7.json", CONVERSATION)

    assert report.error is None and report.format == "openai"
    session = Session.objects.get(key="run-7")
    assert [m.role for m in stored(session)] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                  "assistant", "agent"]
    assert [m.client_id for m in stored(session)][:2] == ["run-7:0:0", "run-7:0:1"]


def test_quirks_are_kept_not_dropped(import_bytes):
    import_bytes("run.json", CONVERSATION)
    session = Session.objects.get(key="run")
    system, user, call, result, call_again, result_again, answer, exit_ = stored(session)

    assert session.instructions == "You are a shell agent."
    assert call.content == "" and call.tool_calls == [{"id": "call_1", "name": "bash", "arguments": '{"command": "ls"}'}]
    assert call.reasoning == "Start with ls."
    assert call.attributes == {"function_call": None, "provider_specific_fields": {"refusal": None}}
    assert result.name == "bash" and result.attributes == {"extra": {"returncode": 0}}
    assert (result.call_seq, result_again.call_seq) == (call.seq, call_again.seq)
    assert answer.tool_calls == [] and "tool_calls" not in answer.attributes
    assert exit_.role == "agent" and exit_.text == "Submitted"
    assert exit_.attributes["extra"] == {"exit_status": "Submitted"} and exit_.attributes["original_role"] == "exit"

    messages = openai_input(session)
    assert messages[0] == {"role": "system", "content": "You are a shell agent."}
    assert messages[-1] == {"role": "assistant", "content": "There are two files."}


def test_an_exit_record_is_kept_in_the_raw_log_but_never_sent(import_bytes):
    """mini-swe-agent writes `exit` after the run: the model never saw it, so it is not in the input."""
    import_bytes("run.json", CONVERSATION)
    exit_ = stored(Session.objects.get(key="run"))[-1]

    assert exit_.include_in_messages is False
    assert exit_.attributes["not_sent_reason"].startswith("written by mini-swe-agent after the run")


def test_an_object_with_messages_keeps_its_other_fields_as_metadata(import_bytes):
    import_bytes("traj.json", {"instance_id": "django-1", "info": {"cost": 0.02}, "messages": CONVERSATION[:2]})

    session = Session.objects.get(key="traj")
    assert session.metadata == {"instance_id": "django-1", "info": {"cost": 0.02},
                                "imported_from": {"file": "traj.json", "format": "openai"}}
    assert session.message_count == 2


@pytest.mark.parametrize("list_name", ["messages", "traj"])
def test_a_list_of_records_is_one_session_per_record(import_bytes, list_name):
    records = [
        {"task_id": "0", "reward": 1.0, list_name: CONVERSATION[:2]},
        {"task_id": "1", "reward": 0.0, "title": "Second task", list_name: CONVERSATION[:4]},
    ]

    report = import_bytes("bench.json", records)

    assert report.keys == ["bench:0", "bench:1"]
    first, second = Session.objects.get(key="bench:0"), Session.objects.get(key="bench:1")
    assert first.metadata == {"task_id": "0", "reward": 1.0,
                              "imported_from": {"file": "bench.json", "format": "openai", "record": 0}}
    assert second.title == "Second task"
    assert (first.message_count, second.message_count) == (2, 4)
    assert second.messages.get(seq=1).client_id == "bench:1:0"


def test_json_lines_of_messages_is_one_session(import_bytes):
    report = import_bytes("chat.jsonl", jsonl(*CONVERSATION[:4]))

    assert report.keys == ["chat"] and report.messages == 4


def test_json_lines_of_records_or_message_lists_is_one_session_per_line(import_bytes):
    report = import_bytes("runs.jsonl", jsonl({"id": "a", "messages": CONVERSATION[:2]}, CONVERSATION[:4]))

    assert report.keys == ["runs:0", "runs:1"]
    assert Session.objects.get(key="runs:0").metadata["id"] == "a"
    assert Session.objects.get(key="runs:1").message_count == 4


def test_parts_developer_role_and_unknown_parts(import_bytes):
    image = "https://example.com/cat.png"
    import_bytes("parts.json", [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     {"type": "image_url", "image_url": {"url": image, "detail": "low"}},
                                     {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}}]},
        {"role": "assistant", "content": "A cat.", "refusal": None},
    ])

    system, user, answer = stored(Session.objects.get(key="parts"))
    assert system.role == "system" and system.attributes == {"original_role": "developer"}
    assert Session.objects.get(key="parts").instructions == "Be brief."
    assert user.content == [{"type": "text", "text": "What is this?"}, {"type": "image", "url": image, "detail": "low"}]
    assert user.attributes["unsupported_parts"][0]["type"] == "input_audio"
    assert answer.attributes == {"refusal": None}


def test_a_message_the_api_would_refuse_fails_the_file_with_the_reason(import_bytes):
    report = import_bytes("bad.json", [{"role": "tool", "tool_call_id": "nope", "content": "x"}])

    assert report.error == ("session bad, message bad:0:0: tool_call_id 'nope' does not match a tool call of an "
                            "earlier assistant message")
    assert not Session.objects.filter(key="bad").exists()
    assert Message.objects.count() == 0


def test_forcing_a_format_on_a_file_of_another_shape_fails_cleanly(import_bytes):
    report = import_bytes("chat.json", CONVERSATION, fmt="claude-code")

    assert report.error == ("line 1: not a Claude Code entry (it has no type) (the file looks like openai: "
                            "import it as openai, or let the format be detected with auto)")
    assert import_bytes("chat.json", {"messages": CONVERSATION}, fmt="claude-code").error == (
        "a Claude Code log is JSON Lines: one entry per line (the file looks like openai: import it as openai, or "
        "let the format be detected with auto)"
    )


def test_parsing_stores_nothing(db):
    parsed = parse_transcript("chat.json", b'{"messages": [{"role": "user", "content": "hi"}]}')

    assert parsed.format == "openai" and parsed.sessions[0].messages[0]["content"] == "hi"
    assert Session.objects.count() == 0


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "the file is empty"),
    (b"{not json", "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
    (b'{"a": 1}', "a JSON object needs a `messages` (or `traj`) list"),
    (b'[1, 2]', "record 0 is neither a message nor a record with a `messages` or `traj` list"),
    (b"\xff\xfe", "not UTF-8 text (invalid start byte at byte 0)"),
])
def test_files_that_are_not_transcripts_fail_with_the_reason(import_bytes, data, reason):
    assert import_bytes("x.json", data).error == reason


@pytest.mark.parametrize(("message", "reason"), [
    ({"role": "robot", "content": "beep"},
     "role 'robot' is not an OpenAI Chat Completions role; OpenAI's are system, developer, user, assistant, tool "
     "and function (and mini-swe-agent logs add exit)"),
    ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "24°C"}]},
     "content part type 'tool_result' is not an OpenAI Chat Completions part; OpenAI's are text, image_url, "
     "input_audio, file and refusal"),
    ({"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]},
     "content part type 'image' is not an OpenAI Chat Completions part; OpenAI's are text, image_url, "
     "input_audio, file and refusal"),
])
def test_a_record_that_is_not_openai_fails_the_file_and_stores_nothing(import_bytes, message, reason):
    report = import_bytes("mixed.json", [*CONVERSATION[:4], message], fmt="openai")

    assert report.error.startswith(f"record 0, message 4: {reason}")  # then what detection would read it as
    assert Session.objects.count() == 0 and Message.objects.count() == 0


@pytest.mark.parametrize("name", ["..json", "...json"])
def test_a_file_whose_name_would_make_the_key_dot_or_dot_dot_imports_under_a_reachable_key(import_bytes, name):
    report = import_bytes(name, [{"role": "user", "content": "hi"}])

    assert report.error is None, report.error
    assert list(Session.objects.values_list("key", flat=True)) == ["transcript"]
