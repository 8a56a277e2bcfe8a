"""Request logs (sessions.ingest.importers.request_log): JSONL of Chat Completions request bodies with their
responses, imported through `import_transcripts`, the upload form and the runner into recorded requests
(sessions.ingest.recorded_requests), so the conversation and what the application dropped are rebuilt from them."""

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from sessions.context.explain import with_explanations
from sessions.ingest.importers import import_path, parse_transcript
from sessions.models import Membership, RecordedRequest, Session
from tests.importers.conftest import client_for, jsonl

pytestmark = pytest.mark.django_db

LOGS = Path(__file__).resolve().parent.parent / "data" / "request-logs"
SEPARATE = LOGS / "interactions_20251103_025309.jsonl"  # type request/response lines, SWE-agent `outputs`
NESTED = LOGS / "interactions_20251103_033709.jsonl"  # request_params, Chat Completions responses
SYSTEM = {"role": "system", "content": "Be brief."}


def user(text):
    return {"role": "user", "content": text}


def completion(text, prompt=10, completion_tokens=3):
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini", "created": 1764590000,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens}}


def requests_of(key):
    return list(RecordedRequest.objects.filter(session__key=key).order_by("number"))


def sent_lines(path):
    """The messages of each request line, in file order."""
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "request":
            out.append(record.get("request_params", record)["messages"])
    return out


@pytest.mark.parametrize("path", sorted(LOGS.glob("*.jsonl")), ids=lambda p: p.name)
def test_every_real_request_log_imports_with_its_requests_exactly_as_sent(project, path):
    report = import_path(project, path)

    assert report.error is None and report.format == "request-log"
    key = path.name.removesuffix(".jsonl")
    assert report.keys == [key] and report.sessions_created == 1
    session = Session.objects.get(key=key)
    recorded = requests_of(key)
    lines = sent_lines(path)
    assert session.request_count == len(recorded) == len(lines) == report.requests
    assert [r.messages for r in recorded] == lines, "each request's messages are stored exactly as sent"
    assert [json.dumps(r.messages) for r in recorded] == [json.dumps(m) for m in lines], "key order too"
    assert all(r.source == "request_log" and r.model == "gpt-3.5-turbo-0613" for r in recorded)
    assert [r.started_at for r in recorded] == sorted(r.started_at for r in recorded)
    assert recorded[0].started_at.isoformat().startswith("2025-11-03T0")
    assert recorded[0].usage_input_tokens == 410 and recorded[0].usage_output_tokens == 0
    assert all("api_key" not in r.parameters and "messages" not in r.parameters for r in recorded)
    assert recorded[0].parameters["temperature"] == 0.0
    assert session.instructions.startswith("You are a helpful assistant")
    assert session.message_count == report.messages > 0
    # A request retried before its response came has none; the others have the response's message.
    assert sum(1 for r in recorded if not r.response) == 1
    assert all(r.response[0]["role"] == "assistant" for r in recorded if r.response)


def test_a_request_log_imported_again_stores_nothing(project):
    first = import_path(project, NESTED)
    again = import_path(project, NESTED)
    assert again.error is None
    assert (again.requests, again.requests_duplicate, again.messages) == (0, first.requests, 0)
    assert RecordedRequest.objects.count() == first.requests


def test_what_the_real_application_dropped_is_explained(project):
    import_path(project, SEPARATE)
    session = Session.objects.get(key="interactions_20251103_025309")
    messages = with_explanations(session, list(session.messages.order_by("seq")))
    dropped = [m for m in messages if m.explanation.code == "dropped_by_application"]
    # The model's answer without a tool call (#8) and SWE-agent's nudge after it (#9), dropped by request 7;
    # request 8 sends the nudge again, after the newer messages: a raw message of its own (#13).
    assert [m.seq for m in dropped] == [8, 9]
    assert all((m.explanation.last_sent_request, m.explanation.first_missing_request) == (6, 7) for m in dropped)
    assert messages[12].text == messages[8].text and messages[12].explanation.request_position == 12
    carried = [m for m in messages if m.explanation.code == "in_input"]
    assert [m.seq for m in carried] == [1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13]
    assert all(m.explanation.request == 8 for m in carried)
    # Request 8's response is a tool call whose result the log does not hold: pending, as in any session.
    assert messages[13].explanation.code == "awaiting_tool_result"


def test_bodies_with_their_response_at_the_top_level_or_under_request(project, import_bytes):
    data = jsonl(
        {"model": "gpt-4o-mini", "temperature": 0, "messages": [SYSTEM, user("hi")], "response": completion("Hello.")},
        {"request": {"model": "gpt-4o-mini", "messages": [SYSTEM, user("hi"), {"role": "assistant", "content": "Hello."},
                                                           user("bye")]},
         "response": completion("Bye.", 20, 2)},
    )
    report = import_bytes("app.jsonl", data)
    assert report.error is None and report.format == "request-log"
    first, second = requests_of("app")
    assert first.parameters == {"model": "gpt-4o-mini", "temperature": 0}
    assert first.response == [{"role": "assistant", "content": "Hello."}]
    assert (second.usage_input_tokens, second.usage_output_tokens) == (20, 2)
    assert second.message_seqs == [None, 1, 2, 3]
    assert [m.text for m in Session.objects.get(key="app").messages.order_by("seq")] == ["hi", "Hello.", "bye", "Bye."]


def test_lines_without_times_keep_their_order(project, import_bytes):
    history, lines = [], []
    for n in range(3):
        history.append(user(f"q{n}"))
        lines.append({"messages": list(history), "response": completion(f"a{n}")})
        history.append({"role": "assistant", "content": f"a{n}"})
    import_bytes("untimed.jsonl", jsonl(*lines))
    assert [r.messages[-1]["content"] for r in requests_of("untimed")] == ["q0", "q1", "q2"]


def test_unrelated_requests_in_one_file_are_threads_of_their_own(project, import_bytes):
    data = jsonl(*[{"messages": [user(f"q{n}")], "response": completion(f"a{n}")} for n in range(3)])
    report = import_bytes("untimed.jsonl", data)
    assert report.keys == ["untimed", "untimed:2", "untimed:3"]
    assert [requests_of(key)[0].messages[0]["content"] for key in report.keys] == ["q0", "q1", "q2"]


def test_a_conversation_id_makes_a_session_of_its_own(project, import_bytes):
    data = jsonl(
        {"type": "request", "timestamp": "2026-01-01T10:00:00Z", "messages": [user("a")],
         "metadata": {"conversation_id": "alpha"}, "response": completion("A")},
        {"type": "request", "timestamp": "2026-01-01T10:00:01Z", "messages": [user("b")], "user": "bob",
         "response": completion("B")},
        {"type": "request", "timestamp": "2026-01-01T10:00:02Z", "conversation_id": "alpha",
         "messages": [user("a"), {"role": "assistant", "content": "A"}, user("a2")], "response": completion("A2")},
    )
    report = import_bytes("multi.jsonl", data, key_prefix="log-")
    assert report.error is None
    assert sorted(report.keys) == ["log-alpha", "log-bob"]
    assert [m.text for m in Session.objects.get(key="log-alpha").messages.order_by("seq")] == ["a", "A", "a2", "A2"]
    assert len(requests_of("log-bob")) == 1


def test_other_records_are_skipped_and_a_plain_transcript_is_not_a_request_log(project, import_bytes):
    data = jsonl({"type": "error", "message": "rate limited"},
                 {"type": "request", "messages": [user("hi")]},
                 {"type": "response", "response": completion("Hello.")})
    assert import_bytes("mixed.jsonl", data).error is None
    assert requests_of("mixed")[0].response == [{"role": "assistant", "content": "Hello."}]
    plain = parse_transcript("records.jsonl", jsonl({"messages": [user("hi")]}, {"messages": [user("yo")]}))
    assert plain.format == "openai"


@pytest.mark.parametrize(("lines", "error"), [
    (['{"type": "request", "messages": [{"role": "user", "content": "hi"}]}', "{not json"],
     "line 2 is not valid JSON"),
    (['{"type": "request", "messages": [{"role": "user", "content": "hi"}]}', '{"type": "request", "messages": "hi"}'],
     "line 2: messages must be a list of message objects"),
    (['{"type": "request", "messages": [{"role": "user", "content": "hi"}]}', '[1, 2]'], "line 2 is not a JSON object"),
    (['{"type": "request", "messages": [{"role": "user", "content": "hi"}]}',
      '{"type": "response", "response": {"choices": "x"}}'], "line 2: response must be"),
    (['{"type": "request", "messages": [{"role": "user", "content": "hi"}]}',
      '{"type": "request", "messages": [{"role": "wizard", "content": "hi"}]}'], "line 2: "),
    (['{"type": "request", "messages": [{"role": "user", "content": "hi"}], "response": {"usage": {}, '
      '"choices": [], "prompt_tokens": 1}, "input_tokens": -1}'], "line 1: input tokens must be"),
])
def test_a_bad_line_fails_the_file_naming_the_line_and_stores_nothing(project, import_bytes, lines, error):
    report = import_bytes("bad.jsonl", "\n".join(lines) + "\n", fmt="request-log")
    assert report.error is not None and error in report.error, report.error
    assert not Session.objects.exists() and not RecordedRequest.objects.exists()


def test_a_forced_request_log_format_on_a_transcript_says_so(project, import_bytes):
    report = import_bytes("chat.json", [user("hi")], fmt="request-log")
    assert "no line holds a request" in report.error


def test_the_import_command_takes_request_logs(project, tmp_path, capsys):
    for path in LOGS.glob("*.jsonl"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    call_command("import_transcripts", str(tmp_path))
    out = capsys.readouterr().out
    assert "Imported 2 of 2 file(s): 2 session(s) (2 new)" in out
    assert "Recorded 15 request(s) from request logs and trajectories (0 already recorded)." in out
    call_command("import_transcripts", str(tmp_path), "--format", "request-log")
    assert "Recorded 0 request(s) from request logs and trajectories (15 already recorded)." in capsys.readouterr().out


def test_the_upload_form_imports_a_request_log(project, django_capture_on_commit_callbacks, immediate_tasks):
    editor = client_for(project, Membership.Role.EDITOR, "editor")
    assert b"<option>request-log</option>" in editor.get(reverse("import")).content
    upload = SimpleUploadedFile(NESTED.name, NESTED.read_bytes(), content_type="application/x-ndjson")
    with django_capture_on_commit_callbacks(execute=True):
        posted = editor.post(reverse("import"), {"project": "default", "files": [upload]})
    assert posted.status_code == 302
    session = Session.objects.get(key="interactions_20251103_033709")
    assert session.request_count == 7
    page = editor.get(posted["Location"], follow=True)
    assert b"interactions_20251103_033709" in page.content


@pytest.mark.parametrize("fmt", ["auto", "request-log"])
def test_a_request_log_above_the_streaming_size_is_read_whole(project, settings, fmt):
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 1000
    report = import_path(project, NESTED, fmt=fmt)
    assert report.error is None and report.format == "request-log"
    assert Session.objects.get(key="interactions_20251103_033709").request_count == 7


def test_a_request_log_s_sessions_say_where_they_were_imported_from(project, import_bytes):
    data = jsonl({"messages": [user("q0")], "response": completion("a0")},
                 {"messages": [user("another task")], "response": completion("a1")})
    report = import_bytes("two-tasks.jsonl", data)
    assert report.keys == ["two-tasks", "two-tasks:2"]
    for key in report.keys:
        session = Session.objects.get(key=key)
        assert session.metadata["imported_from"] == {"file": "two-tasks.jsonl", "format": "request-log"}
        assert session.import_source == "two-tasks.jsonl"
    page = client_for(project, Membership.Role.VIEWER).get(Session.objects.get(key="two-tasks:2").get_absolute_url())
    assert b"Imported from <code>two-tasks.jsonl</code> \xc2\xb7 format request-log" in page.content
    # Imported again: nothing changes, and the metadata is written once.
    again = import_bytes("two-tasks.jsonl", data)
    assert (again.requests, again.requests_duplicate) == (0, 2)


def test_a_request_log_never_writes_into_a_session_the_application_made(project, import_bytes, append):
    append("live", [user("the application's own question")])
    data = jsonl({"conversation_id": "live", "messages": [{"role": "system", "content": "forged"}, user("forged")],
                  "response": completion("forged")})
    report = import_bytes("forged.jsonl", data)
    assert report.error is not None and "created by the application" in report.error
    session = Session.objects.get(key="live")
    assert (session.message_count, session.instructions, session.request_count) == (1, "", 0)
