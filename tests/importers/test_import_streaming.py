"""Large files are read as a stream: memory does not grow with the file, a bad file stores nothing, the
messages are stored a chunk per transaction, and an import stopped midway is completed by running it
again (client ids make the re-run store nothing twice)."""

import json
import tracemalloc
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from sessions.errors import Conflict
from sessions.ingest.append import append_messages
from sessions.ingest.import_jobs import create_job, run_job
from sessions.ingest.importers import import_path, runner
from sessions.ingest.importers.stream import open_stream
from sessions.ingest.session_store import get_session
from sessions.models import ImportJob, Membership, Message, Project, Session
from sessions.store.search import SearchFilters, search_messages
from tests.importers.conftest import client_for, counts

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"


@pytest.fixture(autouse=True)
def stream_everything(settings):
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    settings.CTXWEB_IMPORT_CHUNK_MESSAGES = 50


def conversation_lines(count: int) -> bytes:
    """JSON Lines of one OpenAI conversation: a system prompt, then questions, tool calls and answers."""
    lines = [{"role": "system", "content": "Answer briefly."}]
    for n in range(1, count):
        if n % 4 == 1:
            lines.append({"role": "user", "content": f"question {n}: what is {n} squared?"})
        elif n % 4 == 2:
            lines.append({"role": "assistant", "content": None,
                          "tool_calls": [{"id": f"c{n}", "type": "function",
                                          "function": {"name": "square", "arguments": json.dumps({"x": n})}}]})
        elif n % 4 == 3:
            lines.append({"role": "tool", "tool_call_id": f"c{n - 1}", "content": str((n - 1) ** 2)})
        else:
            lines.append({"role": "assistant", "content": f"It is {(n - 2) ** 2}."})
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def parse_peak(path) -> int:
    """Peak Python memory of reading every message of a file through the streaming parser."""
    tracemalloc.start()
    with path.open("rb") as file:
        stream = open_stream(path, file, path.name)
        for session in stream.sessions(file):
            for _ in session.messages:
                pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_reading_a_file_ten_times_larger_takes_no_more_memory(tmp_path):
    small = write(tmp_path, "small.jsonl", conversation_lines(1_000))
    large = write(tmp_path, "large.jsonl", conversation_lines(10_000))

    small_peak, large_peak = parse_peak(small), parse_peak(large)

    assert large.stat().st_size > 9 * small.stat().st_size
    assert large_peak < 1.5 * small_peak + 64 * 1024, (small_peak, large_peak)


def test_a_json_document_is_read_item_by_item_too(tmp_path):
    def document(count):
        return json.dumps({"title": "Run", "model": "m", "messages": [
            {"role": "user", "content": f"message {n} " + "x" * 200} for n in range(count)]}).encode()

    small = write(tmp_path, "small.json", document(500))
    large = write(tmp_path, "large.json", document(5_000))

    assert parse_peak(large) < 1.5 * parse_peak(small) + 64 * 1024


def test_a_streamed_conversation_is_stored_like_one_read_whole(project, other_project, tmp_path, settings):
    path = write(tmp_path, "talk.jsonl", conversation_lines(203))

    streamed = import_path(project, path)
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 10**9
    whole = import_path(other_project, path)

    assert streamed.error is None and whole.error is None
    assert (streamed.format, streamed.messages, streamed.tool_calls, streamed.tool_results) == (
        whole.format, whole.messages, whole.tool_calls, whole.tool_results) == ("openai", 203, 51, 50)
    one, other = (Session.objects.get(project=p, key="talk") for p in (project, other_project))
    assert one.instructions == other.instructions == "Answer briefly."
    assert (one.message_count, one.raw_tokens, one.input_tokens) == (
        other.message_count, other.raw_tokens, other.input_tokens)
    assert one.metadata == other.metadata


def test_records_and_objects_stream_with_their_fields(project, other_project, tmp_path, settings):
    records = [{"task_id": n, "traj": [{"role": "user", "content": f"task {n}"},
                                       {"role": "assistant", "content": "done"}]} for n in range(3)]
    files = [write(tmp_path, "runs.json", json.dumps(records).encode()),
             write(tmp_path, "runs2.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in records)),
             write(tmp_path, "one.json", json.dumps({"title": "One", "messages": records[0]["traj"],
                                                     "model": "m"}).encode())]

    reports = [import_path(project, path) for path in files]
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 10**9
    for path in files:
        import_path(other_project, path)

    assert [r.error for r in reports] == [None, None, None]
    assert [r.sessions for r in reports] == [3, 3, 1]
    streamed = list(Session.objects.filter(project=project).order_by("key").values("key", "title", "metadata"))
    whole = list(Session.objects.filter(project=other_project).order_by("key").values("key", "title", "metadata"))
    assert streamed == whole
    assert Session.objects.get(project=project, key="one").title == "One"
    assert Session.objects.get(project=project, key="runs:2").metadata["task_id"] == 2


@pytest.mark.parametrize("tail, reason", [
    (b'{"role": "user", "content": "cut off\n', "line 151 is not valid JSON"),
    (b'{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}\n',
     "line 151: content part type 'tool_result' is not an OpenAI Chat Completions part"),
    (b'{"messages": []}\n', "line 151 is not a message, though the lines before it are"),
])
def test_a_file_bad_near_its_end_fails_in_plain_words_and_stores_nothing(project, tmp_path, tail, reason):
    path = write(tmp_path, "bad.jsonl", conversation_lines(150) + tail)

    report = import_path(project, path)

    assert reason in report.error, report.error
    assert counts(project)["sessions"] == 0 and counts(project)["messages"] == 0


def test_the_messages_are_stored_a_chunk_per_transaction(project, tmp_path, monkeypatch):
    chunks = []
    original = runner.append_chunk
    monkeypatch.setattr(runner, "append_chunk", lambda *a, **k: chunks.append(len(a[2])) or original(*a, **k))

    import_path(project, write(tmp_path, "talk.jsonl", conversation_lines(120)))

    assert chunks == [50, 50, 20]


class Killed(Exception):
    pass


def test_an_import_stopped_midway_is_completed_by_running_it_again(project, tmp_path, monkeypatch, settings,
                                                                   django_capture_on_commit_callbacks):
    settings.CTXWEB_IMPORT_DIR = tmp_path / "imports"
    data = conversation_lines(203)
    with django_capture_on_commit_callbacks():
        job = create_job(project, None, SimpleUploadedFile("talk.jsonl", data))
    original, calls = runner.append_chunk, []

    def dies_after_two_chunks(*args, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise Killed("the worker was killed")
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "append_chunk", dies_after_two_chunks)
    run_job(job)

    job.refresh_from_db()
    assert job.state == "failed" and "Killed" in job.error and job.stored_name
    part = Session.objects.get(project=project, key="talk")
    assert part.message_count == 100  # whole chunks only...
    assert part.being_imported  # ...and nothing of them to see until the import completes them
    editor = client_for(project, Membership.Role.EDITOR, "editor")
    assert editor.get(part.get_absolute_url()).status_code == 404
    assert "talk" not in editor.get(reverse("sessions")).content.decode()
    assert not search_messages("squared", SearchFilters(project_ids=[project.pk]))
    with pytest.raises(Conflict, match="is being imported"):
        get_session(project, "talk")
    with pytest.raises(Conflict, match="is being imported"):
        append_messages(project, "talk", [{"role": "user", "content": "an application's message"}])

    monkeypatch.setattr(runner, "append_chunk", original)
    page = editor.get(reverse("import_job", args=[job.pk])).content.decode()
    assert "What was stored before the failure stays hidden until the import completes it" in page
    assert "Running it again completes the import" in page
    assert "Run again</button>" in page
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert editor.post(reverse("import_job_retry", args=[job.pk])).status_code == 302
    assert ImportJob.objects.get(pk=job.pk).state == "queued" and len(callbacks) == 1
    run_job(ImportJob.objects.get(pk=job.pk))

    job.refresh_from_db()
    assert (job.state, job.messages, job.duplicates) == ("completed", 103, 100)
    session = Session.objects.get(project=project, key="talk")
    assert session.message_count == 203 and session.instructions == "Answer briefly."
    assert not session.being_imported and editor.get(session.get_absolute_url()).status_code == 200
    assert search_messages("squared", SearchFilters(project_ids=[project.pk]))
    seqs = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 204))


def test_the_command_streams_large_files_too(project, tmp_path, capsys):
    call_command("import_transcripts", str(write(tmp_path, "talk.jsonl", conversation_lines(80))))

    assert "80 message(s) stored" in capsys.readouterr().out
    assert Session.objects.get(project=Project.objects.get(name="default"), key="talk").message_count == 80


def test_a_file_of_records_stopped_midway_leaves_whole_sessions_and_a_hidden_part_of_one(project, tmp_path,
                                                                                      monkeypatch, settings):
    """Each record's session is stored a chunk per transaction too (issue 37, item 10: a record may be as
    large as a file), hidden until its last chunk is stored, as a streamed conversation is."""
    settings.CTXWEB_MAX_BATCH_MESSAGES = 50  # each record's 120 messages are appended in three chunks
    lines = [json.loads(line) for line in conversation_lines(121).splitlines()[1:]]
    records = [{"task_id": n, "messages": lines} for n in range(3)]
    path = write(tmp_path, "runs.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in records))
    original, calls = runner.append_chunk, []

    def dies_in_the_second_record(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:  # the second chunk of record 1
            raise Killed("the worker was killed")
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "append_chunk", dies_in_the_second_record)
    report = import_path(project, path)

    assert "Killed" in report.error
    stored = Session.objects.filter(project=project)
    assert dict(stored.values_list("key", "message_count")) == {"runs:0": 120, "runs:1": 50}
    assert dict(stored.values_list("key", "being_imported")) == {"runs:0": False, "runs:1": True}
    assert (report.sessions, report.messages) == (2, 170)  # what is stored, shown or not

    monkeypatch.setattr(runner, "append_chunk", original)
    again = import_path(project, path)
    assert again.error is None and (again.messages, again.duplicates) == (190, 170)
    assert sorted(stored.values_list("message_count", "being_imported")) == [(120, False)] * 3


def test_large_files_of_the_formats_read_whole_still_import(project, other_project, tmp_path, settings):
    """Above the streaming threshold, a SWE-agent trajectory (an object with `history`) and a Responses
    request body (an object with `input`) are read whole, as below it (they failed with 'a JSON object
    needs a `messages` (or `traj`) list')."""
    traj = DATA / "swe-agent" / "function_calling_simple.traj"
    body = {"model": "gpt-4.1", "instructions": "Be brief.", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "18 C, cloudy"}]}
    files = [traj, write(tmp_path, "responses.json", json.dumps(body).encode())]

    streamed = [import_path(project, path) for path in files]
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 10**9
    whole = [import_path(other_project, path) for path in files]

    assert [r.error for r in streamed] == [None, None]
    assert [(r.format, r.messages, r.tool_calls) for r in streamed] == [(r.format, r.messages, r.tool_calls) for r in whole]
    assert streamed[1].format == "openai-responses" and streamed[1].tool_calls == 1
