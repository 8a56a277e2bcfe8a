"""The model input is built from plain values (sessions.context.model_input.stored_messages), not from Message
instances. Built the plain ORM way instead (every field of every message as a model instance, JSON
decoded by Django), every response is the same to the byte: on the demo sessions and on every real
transcript in tests/data, in every format, now and as of a message halfway."""

import json
from pathlib import Path

import pytest

from sessions.context import model_input as model_input_module
from sessions.context.model_input import ModelInput, build_model_input, visible_messages
from sessions.context.provider_input import FORMATS, model_input_response
from sessions.errors import DomainError
from sessions.http.schemas import ModelInputOut
from sessions.ingest.demo import load_demo
from sessions.ingest.importers import import_file
from sessions.models import Session

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl", ".traj"))


def from_instances(session, after_seq, as_of=None, *, text_as_stored=False):
    """The reference: the visible messages as Message instances, every field loaded."""
    return list(visible_messages(session, after_seq, as_of))


def built(session: Session, as_of: int | None) -> ModelInput | DomainError:
    try:
        return build_model_input(session, as_of=as_of)
    except DomainError as exc:
        return exc


def response_bytes(model_input: ModelInput | DomainError, fmt: str) -> bytes:
    try:
        if isinstance(model_input, DomainError):
            raise model_input
        body = model_input_response(model_input, fmt)
    except DomainError as exc:  # nothing to send: the same refusal either way
        return json.dumps(exc.as_dict()).encode()
    return json.dumps(ModelInputOut.model_validate(body).model_dump(mode="json", by_alias=True)).encode()


def differences(sessions, monkeypatch) -> list[str]:
    """Each model input is built once each way and rendered in every format (rendering reads a model
    input, never changes it, and reads no message from the database)."""
    found, compared = [], 0
    for session in sessions:
        for as_of in (None, session.message_count // 2):
            with monkeypatch.context() as patch:
                patch.setattr(model_input_module, "stored_messages", from_instances)
                reference = built(session, as_of)
            actual = built(session, as_of)
            for fmt in FORMATS:
                compared += 1
                if response_bytes(actual, fmt) != response_bytes(reference, fmt):
                    found.append(f"{session.key} {fmt} as_of={as_of}")
    assert compared >= 8
    return found


def test_the_demo_sessions_give_the_same_bytes_as_from_model_instances(monkeypatch):
    load_demo()

    assert differences(Session.objects.select_related("project").order_by("pk"), monkeypatch) == []


@pytest.mark.parametrize("path", FILES, ids=[p.name[:40] for p in FILES])
def test_every_imported_transcript_gives_the_same_bytes_as_from_model_instances(project, path, monkeypatch):
    import_file(project, path)

    assert differences(Session.objects.filter(project=project).select_related("project").order_by("pk"),
                       monkeypatch) == []
