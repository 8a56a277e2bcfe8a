"""Every real transcript in tests/data/transcripts imports, holds what the file holds, imports a second
time without storing anything, and gives a model input the provider would accept.

The expected figures are computed here from the files themselves, independently of the importer."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessions.context.explain import explain_messages
from sessions.context.model_input import Reason, build_model_input
from sessions.ingest.importers import FORMATS, import_file, swe_agent
from sessions.models import Session
from tests.importers.conftest import counts, openai_input, stored

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl", ".traj"))
MINI_SWE_AGENT = [p for p in FILES if p.name.startswith("mini-swe-agent")]


@dataclass
class Expected:
    format: str
    sessions: int
    messages: int
    tool_calls: int
    tool_results: int


def expected_openai(path: Path) -> Expected:
    data = json.loads(path.read_text())
    conversations = [data["messages"]] if isinstance(data, dict) else [record["traj"] for record in data]
    messages = [m for conversation in conversations for m in conversation]
    return Expected(
        "openai",
        sessions=len(conversations),
        messages=len(messages),
        tool_calls=sum(len(m.get("tool_calls") or ()) for m in messages),
        tool_results=sum(m["role"] == "tool" for m in messages),
    )


def expected_claude_code(path: Path) -> Expected:
    """Per file: one session for the main thread and one per sub-agent thread; one message per API
    message (assistant lines sharing message.id), one per tool_result block, one per user line that
    has text of its own."""
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sidechain_uuids = {e["uuid"] for e in entries if e.get("isSidechain")}
    roots = [e for e in entries if e.get("isSidechain") and e.get("parentUuid") not in sidechain_uuids]
    has_main = any(e.get("type") in ("user", "assistant") and not e.get("isSidechain") for e in entries)
    assistant_ids = {e["message"]["id"] for e in entries if e.get("type") == "assistant"}
    tool_uses = {
        block["id"]
        for e in entries if e.get("type") == "assistant"
        for block in e["message"]["content"] if block.get("type") == "tool_use"
    }
    results = user_texts = 0
    for e in entries:
        if e.get("type") != "user":
            continue
        content = e["message"]["content"]
        if isinstance(content, str):
            user_texts += 1
            continue
        results += sum(block.get("type") == "tool_result" for block in content)
        user_texts += any(block.get("type") != "tool_result" for block in content)
    return Expected(
        "claude-code",
        sessions=int(has_main) + len(roots),
        messages=len(assistant_ids) + results + user_texts,
        tool_calls=len(tool_uses),
        tool_results=results,
    )


def expected_swe_agent(path: Path) -> Expected:
    """One session per agent; one message per history item. A trajectory that declares history processors
    which change what is sent is rebuilt from its steps, whose system prompt is the instructions they send
    (not a stored message)."""
    trajectory = json.loads(path.read_text())
    history = trajectory["history"]
    rebuilt = bool(swe_agent.declared_processors(trajectory))
    return Expected(
        "swe-agent",
        sessions=len({item.get("agent") for item in history}),
        messages=len(history) - (sum(item["role"] == "system" for item in history) if rebuilt else 0),
        tool_calls=sum(len(item.get("tool_calls") or ()) for item in history),
        tool_results=sum(item["role"] == "tool" for item in history),
    )


def expected_codex(path: Path) -> Expected:
    """One session: a message per message item (and the base instructions), per tool output, and per
    replacement_history item other than the summary; a call joins the assistant message or call before it,
    or opens an assistant message of its own (after a reasoning item, say)."""
    messages = calls = results = 0
    previous = None
    for line in (json.loads(text) for text in path.read_text().splitlines() if text.strip()):
        payload = line["payload"]
        if line["type"] == "session_meta":
            messages += bool((payload.get("base_instructions") or {}).get("text"))
        elif line["type"] == "compacted":
            history = payload.get("replacement_history") or ()
            messages += sum(item["content"][0]["text"] != payload["message"] for item in history)
            previous = None
        elif line["type"] == "response_item":
            kind = payload["type"]
            if kind in ("function_call", "custom_tool_call", "local_shell_call"):
                calls += 1
                messages += previous not in ("assistant", "call")
                previous = "call"
            elif kind in ("function_call_output", "custom_tool_call_output"):
                results += 1
                messages += 1
                previous = "tool"
            elif kind == "message":
                messages += 1
                previous = payload["role"]
            elif kind == "reasoning":
                previous = "reasoning"
    return Expected("codex", sessions=1, messages=messages, tool_calls=calls, tool_results=results)


def expected(path: Path) -> Expected:
    if path.parent.name == "codex":
        return expected_codex(path)
    readers = {".jsonl": expected_claude_code, ".traj": expected_swe_agent, ".json": expected_openai}
    return readers[path.suffix](path)


def test_there_are_files_of_each_format():
    formats = {expected(path).format for path in FILES}
    assert formats == {"openai", "claude-code", "swe-agent", "codex"}
    assert len(FILES) == 11


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_real_transcript_imports_with_the_counts_the_file_holds(db, imported_files, path):
    want = expected(path)

    project, report = imported_files[path]  # imported once for the module by import_file

    assert report.error is None
    assert report.format == want.format
    have = counts(project)
    assert have["sessions"] == report.sessions == want.sessions
    assert have["messages"] == report.messages == want.messages
    assert have["tool_calls"] == report.tool_calls == want.tool_calls
    assert have["tool_results"] == report.tool_results == want.tool_results
    assert report.duplicates == 0


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_importing_a_file_again_stores_nothing_new(db, imported_files, path):
    project, _ = imported_files[path]
    before = counts(project)
    sessions_before = list(Session.objects.filter(project=project).order_by("pk").values())

    again = import_file(project, path)

    assert again.error is None
    assert again.messages == again.tool_calls == again.tool_results == again.sessions_created == 0
    if again.requests_duplicate:  # rebuilt from its steps: every step is already recorded
        assert again.requests == 0 and again.requests_duplicate == imported_files[path][1].requests
    else:
        assert again.duplicates == before["messages"]
    assert counts(project) == before  # no rows, no events
    assert list(Session.objects.filter(project=project).order_by("pk").values()) == sessions_before


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_imported_session_gives_a_valid_openai_model_input(db, imported_files, path):
    project, report = imported_files[path]
    assert report.error is None

    for session in Session.objects.filter(project=project):
        messages = openai_input(session)
        assert messages, session.key


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix == ".json"], ids=lambda p: p.name)
def test_the_first_system_message_becomes_the_instructions(db, imported_files, path):
    data = json.loads(path.read_text())
    conversations = [data["messages"]] if isinstance(data, dict) else [record["traj"] for record in data]

    project, _ = imported_files[path]

    firsts = sorted(next(m["content"] for m in c if m["role"] == "system") for c in conversations)
    sessions = Session.objects.filter(project=project)
    assert sorted(s.instructions for s in sessions) == firsts
    for session in sessions:
        assert session.messages.filter(role="system").count() == 1  # also kept in the raw log
        assert openai_input(session)[0] == {"role": "system", "content": session.instructions}


@pytest.mark.parametrize("path", MINI_SWE_AGENT, ids=lambda p: p.name)
def test_mini_swe_agent_exit_records_are_kept_but_never_sent(db, imported_files, path):
    """The `exit` record (exit status, submission, or the traceback that ended the run) is written by
    mini-swe-agent after the run: it is in the raw log, not in the model input."""
    record = json.loads(path.read_text())["messages"][-1]
    assert record["role"] == "exit"

    project, _ = imported_files[path]

    session = Session.objects.get(project=project)
    exit_ = stored(session)[-1]
    assert exit_.text == record["content"] and exit_.attributes["extra"] == record["extra"]
    assert exit_.include_in_messages is False
    assert exit_.attributes["not_sent_reason"].startswith("written by mini-swe-agent after the run")
    assert record["content"] not in [m.get("content") for m in openai_input(session)]
    explained = explain_messages(stored(session), build_model_input(session), [])
    assert explained[exit_.seq].code == Reason.EXCLUDED


WRONG_FORMATS = [(path, fmt) for path in FILES for fmt in FORMATS if fmt not in ("auto", expected(path).format)]


@pytest.mark.parametrize(("path", "fmt"), WRONG_FORMATS, ids=[f"{p.name[:24]}-as-{f}" for p, f in WRONG_FORMATS])
def test_a_format_that_does_not_fit_the_file_fails_it_storing_nothing(project, path, fmt):
    report = import_file(project, path, fmt=fmt)

    assert report.error, f"{path.name} imported as {fmt}"
    assert counts(project) == {"sessions": 0, "messages": 0, "tool_calls": 0, "tool_results": 0, "events": 0}
