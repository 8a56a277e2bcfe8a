"""Every real transcript in tests/data/transcripts imports, holds what the file holds, imports a second
time without storing anything, and gives a model input the provider would accept.

The expected figures are computed here from the files themselves, independently of the importer."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessions.importers import import_file
from sessions.models import Session
from tests.importers.conftest import counts, openai_input

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl"))


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


def expected(path: Path) -> Expected:
    return expected_claude_code(path) if path.suffix == ".jsonl" else expected_openai(path)


def test_there_are_files_of_each_format():
    formats = {expected(path).format for path in FILES}
    assert formats == {"openai", "claude-code"}
    assert len(FILES) == 6


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_real_transcript_imports_with_the_counts_the_file_holds(project, path):
    want = expected(path)

    report = import_file(project, path)

    assert report.error is None
    assert report.format == want.format
    have = counts(project)
    assert have["sessions"] == report.sessions == want.sessions
    assert have["messages"] == report.messages == want.messages
    assert have["tool_calls"] == report.tool_calls == want.tool_calls
    assert have["tool_results"] == report.tool_results == want.tool_results
    assert report.duplicates == 0


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_importing_a_file_again_stores_nothing_new(project, path):
    import_file(project, path)
    before = counts(project)
    sessions_before = list(Session.objects.order_by("pk").values())

    again = import_file(project, path)

    assert again.error is None
    assert again.messages == again.tool_calls == again.tool_results == again.sessions_created == 0
    assert again.duplicates == before["messages"]
    assert counts(project) == before  # no rows, no events
    assert list(Session.objects.order_by("pk").values()) == sessions_before


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_imported_session_gives_a_valid_openai_model_input(project, path):
    import_file(project, path)

    for session in Session.objects.filter(project=project):
        messages = openai_input(session)
        assert messages, session.key


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix == ".json"], ids=lambda p: p.name)
def test_the_first_system_message_becomes_the_instructions(project, path):
    data = json.loads(path.read_text())
    conversations = [data["messages"]] if isinstance(data, dict) else [record["traj"] for record in data]

    import_file(project, path)

    firsts = sorted(next(m["content"] for m in c if m["role"] == "system") for c in conversations)
    sessions = Session.objects.filter(project=project)
    assert sorted(s.instructions for s in sessions) == firsts
    for session in sessions:
        assert session.messages.filter(role="system").count() == 1  # also kept in the raw log
        assert openai_input(session)[0] == {"role": "system", "content": session.instructions}
