"""Claude Code logs above CTXWEB_IMPORT_STREAM_ABOVE are read as a stream: the same sessions, messages,
checkpoints and links as the file read whole, with memory that does not grow with the lines' content."""

import json
import tracemalloc
from pathlib import Path

from sessions.ingest.importers import import_path, runner
from sessions.ingest.importers.stream import open_stream
from sessions.models import Checkpoint, Message, Session
from sessions.wire.parsed import ImportedCheckpoint
from tests.importers.conftest import counts, jsonl
from tests.importers.test_claude_code import COMPACT_SUMMARY, assistant, boundary, user
from tests.importers.test_claude_code_sessions import split_files  # noqa: F401 (a fixture)

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "claude-code"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "claude-code"
SESSION_FIELDS = (
    "key", "title", "metadata", "instructions", "instructions_tokens", "created_at", "last_activity_at",
    "message_count", "raw_tokens", "input_tokens", "input_messages", "input_left_out", "checkpoint_last_seq",
    "checkpoint_count", "import_source", "written_by_application", "being_imported",
)
REPORT_FIELDS = ("format", "keys", "sessions_created", "messages", "duplicates", "tool_calls", "tool_results",
                 "checkpoints", "entries_skipped", "error")
TASK_PROMPT = "Examine login.py and say where it can fail."


def side(entry: dict) -> dict:
    return {**entry, "isSidechain": True}


def task(uuid, parent, message_id, call_id, prompt):
    return assistant(uuid, parent, message_id, {"type": "tool_use", "id": call_id, "name": "Task",
                                                "input": {"description": "Check login", "prompt": prompt}})


def tricky_log() -> list[dict]:
    """A log with what a stream must get right: a sub-agent thread interleaved with the main one, an API
    message whose lines are not consecutive, a compaction with a message between its boundary and its
    summary, a summary with no boundary, a boundary replaced by the next, a last boundary never answered,
    a line without uuid, a summary titling the session and one of another session, skipped entries."""
    no_uuid = user("u00", "u03", "A line Claude Code wrote without a uuid.")
    del no_uuid["uuid"]
    return [
        {"type": "summary", "summary": "Another session", "leafUuid": "elsewhere"},
        user("u01", None, "<command-name>/review</command-name>\n<command-args>login</command-args>"),
        user("u02", "u01", "Review the login code.", isMeta=True),
        user("u03", "u02", "Why does the login page crash?"),
        no_uuid,
        assistant("u04", "u03", "msg_A", {"type": "thinking", "thinking": "Ask a sub-agent.", "signature": "s"}),
        task("u05", "u04", "msg_A", "toolu_T", TASK_PROMPT),
        side(user("u06", "u05", TASK_PROMPT)),
        side(assistant("u07", "u06", "msg_S1", {"type": "text", "text": "login() has no None check."})),
        assistant("u08", "u05", "msg_A", {"type": "text", "text": "Waiting for the sub-agent."}),
        {"type": "file-history-snapshot", "messageId": "u08", "snapshot": {}},
        user("u09", "u08", [{"type": "tool_result", "tool_use_id": "toolu_T", "content": "No None check."}]),
        side(user("u10", "u07", COMPACT_SUMMARY, isCompactSummary=True)),  # no boundary before it
        side(assistant("u11", "u10", "msg_S2", {"type": "text", "text": "Done."})),
        boundary("u12", "u09"),
        user("u13", None, "A prompt queued while compacting."),
        user("u14", "u13", COMPACT_SUMMARY, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        assistant("u15", "u14", "msg_B", {"type": "text", "text": "Adding the check."}),
        boundary("u16", "u15", trigger="auto"),
        boundary("u17", "u15", trigger="auto"),  # replaces u16 before any summary line
        user("u18", "u17", "Summary two: the check is added.", isCompactSummary=True),
        user("u19", "u18", "Now add a test."),
        assistant("u20", "u19", "msg_C", {"type": "text", "text": "Test added."}),
        boundary("u21", "u20"),  # never answered: the checkpoint is made of the boundary itself
        user("u22", "u21", "Thanks!"),
        {"type": "summary", "summary": "Fix the login crash", "leafUuid": "u22"},
    ]


def claude_files(tmp_path) -> list[Path]:
    files = {path.name: path for path in [*sorted(DATA.glob("*.jsonl")), *sorted(SHARED.glob("*.jsonl"))]}
    tricky = tmp_path / "tricky.jsonl"
    tricky.write_bytes(jsonl(*tricky_log()))
    return [*files.values(), tricky]


def stored(project) -> dict:
    """Everything an import stores of a project's sessions (but events, which count its transactions)."""
    message_fields = [f.name for f in Message._meta.concrete_fields if f.name not in ("id", "session")]
    checkpoint_fields = [f.name for f in Checkpoint._meta.concrete_fields if f.name not in ("id", "session", "previous")]
    return {
        "sessions": list(Session.objects.filter(project=project).order_by("key").values(*SESSION_FIELDS)),
        "messages": list(Message.objects.filter(session__project=project).order_by("session__key", "seq")
                         .values("session__key", *message_fields)),
        "checkpoints": list(Checkpoint.objects.filter(session__project=project).order_by("session__key", "last_seq")
                            .values("session__key", "previous__last_seq", *checkpoint_fields)),
    }


def import_both_ways(project, other_project, settings, monkeypatch, paths):
    streamed_sessions = []
    original = runner.store_streamed
    monkeypatch.setattr(runner, "store_streamed",
                        lambda *a, **k: streamed_sessions.append(a[1].key) or original(*a, **k))
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    streamed = [import_path(project, path) for path in paths]
    assert streamed_sessions == [key for report in streamed for key in report.keys]  # every one streamed
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 10**9
    whole = [import_path(other_project, path) for path in paths]
    assert len(streamed_sessions) == sum(len(report.keys) for report in streamed)  # and none of these
    return streamed, whole


def test_a_streamed_claude_code_log_is_stored_like_one_read_whole(project, other_project, settings, monkeypatch,
                                                                  tmp_path):
    settings.CTXWEB_IMPORT_CHUNK_MESSAGES = 4  # several chunks, and checkpoints between them
    paths = claude_files(tmp_path)

    streamed, whole = import_both_ways(project, other_project, settings, monkeypatch, paths)

    assert [r.error for r in streamed] == [None] * len(paths)
    assert [[getattr(r, f) for f in REPORT_FIELDS] for r in streamed] == [
        [getattr(r, f) for f in REPORT_FIELDS] for r in whole]
    one, other = stored(project), stored(other_project)
    assert one == other
    # What the comparison covers: sub-agents linked both ways, compactions, joined lines, titles.
    tricky = {s["key"]: s for s in one["sessions"] if s["key"].startswith("tricky")}
    assert tricky["tricky"]["title"] == "Fix the login crash"
    assert tricky["tricky"]["metadata"]["sidechains"] == ["tricky:agent-u06"]
    agent = tricky["tricky:agent-u06"]
    assert agent["metadata"]["parent_session"] == "tricky" and agent["metadata"]["parent_tool_call_id"] == "toolu_T"
    assert agent["title"] == "Sub-agent: Check login"
    assert [(c["session__key"], c["last_seq"], c["created_at_seq"]) for c in one["checkpoints"]
            if c["session__key"].startswith("tricky")] == [
        ("tricky", 6, 6), ("tricky", 9, 9), ("tricky", 12, 12), ("tricky:agent-u06", 2, 2)]
    msg_a = next(m for m in one["messages"] if m["session__key"] == "tricky" and m["client_id"] == "msg_A")
    assert msg_a["attributes"]["merged_uuids"] == ["u05", "u08"] and msg_a["text"] == "Waiting for the sub-agent."
    assert sum(len(s["metadata"].get("sidechains", ())) for s in one["sessions"]) == 3


def test_sub_agent_files_stream_and_link_like_files_read_whole(project, other_project, settings, monkeypatch,
                                                              split_files):  # noqa: F811
    main, agents = split_files

    streamed, whole = import_both_ways(project, other_project, settings, monkeypatch, [agents[0], main, agents[1]])

    assert [r.error for r in streamed] == [None] * 3
    assert [r.keys for r in streamed] == [r.keys for r in whole] == [[agents[0].stem], [main.stem], [agents[1].stem]]
    one = stored(project)
    assert one == stored(other_project)
    assert next(s for s in one["sessions"] if s["key"] == main.stem)["metadata"]["sidechains"] == sorted(
        path.stem for path in agents)


def test_the_claude_code_format_named_streams_too(project, settings, tmp_path, monkeypatch):
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    path = claude_files(tmp_path)[-1]
    streamed = []
    original = runner.store_streamed
    monkeypatch.setattr(runner, "store_streamed", lambda *a, **k: streamed.append(a[1].key) or original(*a, **k))

    report = import_path(project, path, fmt="claude-code", key_prefix="cc/")

    assert report.error is None and report.format == "claude-code"
    assert streamed == report.keys == ["cc-tricky", "cc-tricky:agent-u06"]


def test_a_log_whose_first_hundred_lines_are_no_messages_streams_too(project, other_project, settings, monkeypatch,
                                                                    tmp_path):
    """Claude Code writes file-history snapshots and queue operations between the messages; the format is
    still recognised when the first lines the stream looks at are all such entries."""
    path = tmp_path / "snapshots.jsonl"
    snapshots = [{"type": "file-history-snapshot", "messageId": f"m{n}", "snapshot": {}} for n in range(150)]
    path.write_bytes(jsonl(*snapshots, *tricky_log()))

    streamed, whole = import_both_ways(project, other_project, settings, monkeypatch, [path])

    assert streamed[0].error is None and streamed[0].format == "claude-code"
    assert (streamed[0].keys, streamed[0].entries_skipped) == (whole[0].keys, whole[0].entries_skipped)
    assert streamed[0].entries_skipped == 151
    assert stored(project) == stored(other_project)


def test_a_line_separator_inside_a_message_is_no_line_end_either_way(project, other_project, settings, monkeypatch,
                                                                     tmp_path):
    """Node's JSON.stringify leaves U+2028 and U+0085 unescaped inside strings; JSON Lines end at \\n only."""
    path = tmp_path / "separators.jsonl"
    log = tricky_log()
    log[3] = user("u03", "u02", "Why does the login page crash?\u2028It says\x85 None.")
    path.write_bytes("".join(json.dumps(entry, ensure_ascii=False) + "\r\n" for entry in log).encode())

    streamed, whole = import_both_ways(project, other_project, settings, monkeypatch, [path])

    assert streamed[0].error is None and whole[0].error is None
    assert stored(project) == stored(other_project)
    assert Message.objects.get(session__project=project, client_id="u03").text.endswith("\u2028It says\x85 None.")


def test_a_streamed_log_reports_its_progress_in_order(project, settings, tmp_path, monkeypatch):
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    settings.CTXWEB_IMPORT_CHUNK_MESSAGES = 2
    monkeypatch.setattr(runner, "PROGRESS_EVERY", 0)
    path = claude_files(tmp_path)[-1]
    size, seen = path.stat().st_size, []

    report = import_path(project, path, on_progress=lambda report, checked, stored: seen.append((checked, stored)))

    assert report.error is None
    checked = [c for c, stored in seen if stored == 0]
    stored_part = [stored for c, stored in seen if stored]
    assert checked == sorted(checked) and 0 < checked[0] < size and checked[-1] == size
    assert stored_part == sorted(stored_part) and 0 < stored_part[0] < size and stored_part[-1] == size
    assert all(c == size for c, stored in seen if stored)


def test_a_claude_code_import_stopped_midway_is_completed_like_one_read_whole(project, other_project, settings,
                                                                             monkeypatch, tmp_path):
    settings.CTXWEB_IMPORT_CHUNK_MESSAGES = 3
    path = claude_files(tmp_path)[-1]
    original, calls = runner.append_chunk, []

    def dies_at_the_third_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the worker was killed")
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "append_chunk", dies_at_the_third_chunk)
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    stopped = import_path(project, path)
    assert "the worker was killed" in stopped.error
    part = Session.objects.get(project=project, key="tricky")
    assert part.being_imported and part.message_count == 6 and part.checkpoint_count == 1
    monkeypatch.setattr(runner, "append_chunk", original)

    again = import_path(project, path)
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 10**9
    whole = import_path(other_project, path)

    assert again.error is None and (again.messages, again.duplicates) == (whole.messages - 6, 6)
    assert stored(project) == stored(other_project)


def test_importing_a_streamed_log_again_changes_nothing(project, settings, tmp_path):
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    settings.CTXWEB_IMPORT_CHUNK_MESSAGES = 4
    path = claude_files(tmp_path)[-1]
    with path.open("rb") as file:
        assert open_stream(path, file, path.name).format == "claude-code"
    assert import_path(project, path).error is None
    before, rows = counts(project), list(Session.objects.order_by("pk").values())

    again = import_path(project, path)

    assert again.error is None and (again.messages, again.sessions_created, again.checkpoints) == (0, 0, 0)
    assert again.duplicates == Message.objects.filter(session__project=project).count()
    assert counts(project) == before  # no rows, no events
    assert list(Session.objects.order_by("pk").values()) == rows


def test_a_bad_line_near_the_end_fails_the_streamed_log_and_stores_nothing(project, settings, tmp_path):
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(jsonl(*tricky_log(), user("u23", "u22", [{"type": "input_text", "text": "Thanks!"}])))
    with path.open("rb") as file:
        assert open_stream(path, file, path.name).format == "claude-code"

    report = import_path(project, path)

    assert report.error == "line 27: content block type 'input_text' is not an Anthropic Messages block"
    assert counts(project)["sessions"] == 0 and counts(project)["messages"] == 0


def claude_code_log(turns: int) -> bytes:
    """A Claude Code log of `turns` turns, each of a prompt, an API message over two lines, a tool result,
    and, every tenth, a sub-agent thread interleaved with the main one."""
    def entry(uuid, parent, role, content, sidechain=False, message_id=None):
        message = {"role": role, "content": content, **({"id": message_id} if message_id else {})}
        return {"parentUuid": parent, "isSidechain": sidechain, "sessionId": "long", "type": role, "uuid": uuid,
                "timestamp": "2025-09-07T10:00:00.000Z", "message": message}

    entries, parent = [], None
    for n in range(turns):
        entries.append(entry(f"{n}a", parent, "user", f"turn {n}: " + "please look at this. " * 100))
        entries.append(entry(f"{n}b", f"{n}a", "assistant", [{"type": "text", "text": "Reading. " * 40}],
                             message_id=f"msg_{n}"))
        entries.append(entry(f"{n}c", f"{n}b", "assistant", [{"type": "tool_use", "id": f"toolu_{n}", "name": "Read",
                                                               "input": {"path": f"f{n}"}}], message_id=f"msg_{n}"))
        if n % 10 == 0:
            entries.append(entry(f"{n}s", None, "user", f"sub-agent {n}: " + "check it. " * 100, sidechain=True))
            entries.append(entry(f"{n}t", f"{n}s", "assistant", [{"type": "text", "text": "ok"}], sidechain=True,
                                 message_id=f"msg_s{n}"))
        entries.append(entry(f"{n}d", f"{n}c", "user", [{"type": "tool_result", "tool_use_id": f"toolu_{n}",
                                                        "content": f"line {n}\n" * 600}]))
        parent = f"{n}d"
    return jsonl(*entries)


def parse_peak(path) -> int:
    """Peak Python memory of reading every session and message of a log through the streaming parser."""
    tracemalloc.start()
    with path.open("rb") as file:
        stream = open_stream(path, file, path.name)
        for session in stream.sessions(file):
            for _ in session.messages:
                pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_reading_a_claude_code_log_ten_times_longer_takes_no_more_memory_than_its_bookkeeping(tmp_path):
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(claude_code_log(100))
    large.write_bytes(claude_code_log(1_000))
    lines = large.read_bytes().count(b"\n") - small.read_bytes().count(b"\n")

    small_peak, large_peak = parse_peak(small), parse_peak(large)

    assert large.stat().st_size > 9 * small.stat().st_size
    # What grows is a few hundred bytes a line (its uuid, its message's id, its place), not its content
    # (2 KB a line on average): reading the file whole would hold more than the file.
    assert large_peak < small_peak + 400 * lines, (small_peak, large_peak, lines)
    assert large_peak < large.stat().st_size / 5, (large_peak, large.stat().st_size)


def test_checkpoints_come_among_the_messages_where_they_were_made(tmp_path):
    path = tmp_path / "tricky.jsonl"
    path.write_bytes(jsonl(*tricky_log()))

    with path.open("rb") as file:
        stream = open_stream(path, file, path.name)
        main = next(stream.sessions(file))
        items = list(main.messages)

    assert stream.format == "claude-code" and stream.skipped == 1
    places = [n for n, item in enumerate(items) if isinstance(item, ImportedCheckpoint)]
    assert places == [6, 10, 14]  # after 6, 9 and 12 messages
    assert [items[n].last for n in places] == [6, 9, 12]
    assert json.dumps(items[8]["attributes"]["compactMetadata"]) == '{"trigger": "manual", "preTokens": 48213}'
