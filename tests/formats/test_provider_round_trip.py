"""Provider-native messages: a model input fetched in a format and appended back in that format gives
the same model input, on every real transcript in tests/data (imported by the real importers)."""

import pytest

from sessions.context.model_input import build_model_input
from sessions.context.provider_input import render_model_input
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Session
from tests.conftest import TRANSCRIPT_FILES

FILES = [p for p in TRANSCRIPT_FILES if p.suffix in (".json", ".jsonl")]

BATCH = 500
# What the ctxweb format adds to each entry about where it sits; the rest is what the model gets.
PLACEMENT = ("kind", "seq", "id", "checkpoint_id", "dropped_tool_calls")


def fetched(session: Session, fmt: str):
    return render_model_input(build_model_input(Session.objects.get(pk=session.pk)), fmt)


def append_back(project, key: str, fmt: str, model_input) -> Session:
    """Append a fetched model input, in its own format, into a new session."""
    if fmt == "anthropic":
        messages, system = model_input["messages"], model_input.get("system")
    elif fmt == "ctxweb":
        entries = [{k: v for k, v in e.items() if k not in PLACEMENT and k != "tokens"} for e in model_input]
        for entry in entries:  # calls awaiting their results are the model's calls all the same
            if entry.get("pending_tool_calls"):
                entry["tool_calls"] = entry.get("tool_calls", []) + entry.pop("pending_tool_calls")
        instructions = [e for e, raw in zip(entries, model_input, strict=True) if raw["kind"] == "instructions"]
        if instructions:
            update_session(project, key, {"instructions": instructions[0]["content"]})
        messages = [e for e, raw in zip(entries, model_input, strict=True) if raw["kind"] != "instructions"]
        system = None
    else:
        messages, system = model_input, None
    for start in range(0, len(messages), BATCH):
        chunk = messages[start:start + BATCH]
        append_messages(project, key, chunk, fmt=fmt, system=system if start == 0 else None)
    return Session.objects.get(project=project, key=key)


def comparable(fmt: str, model_input):
    if fmt == "ctxweb":
        return [{k: v for k, v in e.items() if k not in PLACEMENT} for e in model_input]
    return model_input


@pytest.mark.parametrize("fmt", ["ctxweb", "openai", "anthropic", "openai-responses"])
@pytest.mark.parametrize("path", FILES, ids=[p.name[:40] for p in FILES])
def test_a_model_input_appended_back_in_its_format_gives_the_same_model_input(db, imported_files, path, fmt):
    project, report = imported_files[path]
    assert report.error is None and report.keys
    for n, key in enumerate(report.keys):
        session = Session.objects.get(project=project, key=key)
        original = fetched(session, fmt)
        if not (original["messages"] if fmt == "anthropic" else original):
            continue
        copy = append_back(project, f"round-trip-{fmt}-{n}", fmt, original)

        assert comparable(fmt, fetched(copy, fmt)) == comparable(fmt, original), key
