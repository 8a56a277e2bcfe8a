"""Failed tool results in real Claude Code logs (tests/data): each `tool_result` block with `is_error:
true` becomes a tool message with the `is_error` field (not an attribute), and the `anthropic` model
input sends it back on the block. The expected figures are read from the files themselves."""

import json
from pathlib import Path

import pytest

from sessions.ingest.importers import import_file
from sessions.models import Message, Session
from tests.importers.conftest import anthropic_input

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "claude-code"
FILES = sorted(DATA.glob("*.jsonl"))


def failed_results(path: Path) -> set[str]:
    """The tool_use ids whose tool_result block says is_error: true."""
    failed = set()
    for text in path.read_text().splitlines():
        entry = json.loads(text) if text.strip() else {}
        content = (entry.get("message") or {}).get("content") if entry.get("type") == "user" else None
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_result" and block.get("is_error") is True:
                failed.add(block["tool_use_id"])
    return failed


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_failed_tool_results_of_a_claude_code_log_keep_is_error(project, path):
    failed = failed_results(path)
    assert failed  # each sample holds at least one

    import_file(project, path)

    tools = Message.objects.filter(session__project=project, role="tool")
    assert set(tools.filter(is_error=True).values_list("tool_call_id", flat=True)) == failed
    assert not tools.filter(attributes__has_key="is_error").exists()
    sent = set()
    for session in Session.objects.filter(project=project):
        for message in anthropic_input(session)["messages"]:
            sent |= {b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result" and b.get("is_error")}
    in_input = set(tools.filter(is_error=True, include_in_messages=True).values_list("tool_call_id", flat=True))
    assert sent == in_input and sent
