"""The token total a model input reports is a recount of the exact `openai` payload it renders (POST
/tokens semantics), on every real transcript in tests/data, imported by the real importers.

What the recount found: tau-bench's tool messages name their tool, and the total counted that name
though no provider format sends it (4,193 reported for a payload of 4,145). The states in which calls
await their results are recounted in tests/formats/test_pending_tool_calls.py."""

from pathlib import Path

import pytest

from sessions.context.model_input import build_model_input
from sessions.context.provider_input import model_input_response
from sessions.ingest.importers import import_file
from sessions.models import Session
from sessions.wire.validation import count_openai_messages

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl"))


def recount(response: dict) -> int:
    return count_openai_messages(response["messages"])[0]


@pytest.mark.parametrize("path", FILES, ids=[p.name[:40] for p in FILES])
def test_the_reported_total_is_a_recount_of_the_openai_payload(project, path):
    report = import_file(project, path)
    assert report.error is None and report.keys

    for key in report.keys:
        session = Session.objects.get(project=project, key=key)
        response = model_input_response(build_model_input(session), "openai")
        assert response["tokens"]["total"] == recount(response) == session.input_tokens, key
        assert not any("name" in m for m in response["messages"] if m["role"] == "tool")

