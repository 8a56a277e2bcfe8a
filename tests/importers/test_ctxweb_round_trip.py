"""ctxweb's own export imports back losslessly: the raw log, the session's settings and the
checkpoints, at the same places (an export of the imported session equals the original export)."""

import json

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.exports import export_json, export_jsonl
from sessions.ingest.append import append_messages
from sessions.ingest.demo import tiny_png
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, Message, Session
from tests.importers.conftest import counts, openai_input

PARAGRAPH = "The customer asked about rebooking flight TP1351 because of the strike, twice. " * 6


def turn(n: int) -> list[dict]:
    return [
        {"id": f"u{n}", "role": "user", "content": f"Question {n}: {PARAGRAPH}", "name": "maria",
         "created_at": f"2024-05-01T09:{n:02d}:00.123456+00:00", "attributes": {"trace": f"t-{n}"}},
        {"role": "assistant", "content": None, "reasoning": f"Look up booking {n}.",
         "tool_calls": [{"id": f"call_{n}", "name": "get_booking", "arguments": {"ref": f"R{n}"}}]},
        {"role": "tool", "tool_call_id": f"call_{n}", "name": "get_booking",
         "content": [{"type": "text", "text": f"R{n}: confirmed. {PARAGRAPH}"}]},
        {"role": "assistant", "content": f"Booking R{n} is confirmed. {PARAGRAPH}", "attributes": {"model": "gpt-x"}},
    ]


@pytest.fixture
def original(project):
    """A session with settings, every kind of message, a hidden one, and two checkpoints (the second one
    made while later turns were kept, so it was created after its last covered message)."""
    update_session(project, "trip", {
        "title": "Trip: Lisbon & Porto", "metadata": {"customer": 7, "tags": ["vip"]},
        "instructions": "You are a travel assistant.",
        "compaction": {"max_tokens": 5000, "keep_recent_tokens": 900, "auto": False, "summarizer": "extractive"},
    })
    append_messages(project, "trip", turn(1) + turn(2) + [
        {"role": "user", "content": [{"type": "text", "text": "Is this my gate?"},
                                     {"type": "image", "url": tiny_png(8, 8), "media_type": "image/png",
                                      "width": 8, "height": 8}]},
        {"id": "oops", "role": "user", "content": "wrong window", "include_in_messages": False},
        {"role": "system", "content": "(an old client stored its prompt)"},
    ])
    session = Session.objects.get(project=project, key="trip")
    assert compact(session, force=True, keep_recent_tokens=10, summary="Two bookings were confirmed.").status == "completed"
    append_messages(project, "trip", turn(3) + turn(4) + turn(5))
    assert compact(session, force=True, keep_recent_tokens=600, summary="Five bookings, all confirmed.").status == "completed"
    append_messages(project, "trip", [{"role": "agent", "content": "Continue with the refund."}])
    session = Session.objects.get(pk=session.pk)
    assert session.checkpoint_count == 2
    second = session.checkpoints.order_by("-last_seq").first()
    assert second.created_at_seq > second.last_seq
    return session


def test_an_export_imports_back_into_another_project_unchanged(original, other_project, import_bytes):
    exported = export_json(original)

    report = import_bytes("trip.json", exported, project=other_project)

    assert report.error is None and report.format == "ctxweb"
    assert (report.messages, report.checkpoints, report.sessions_created) == (original.message_count, 2, 1)
    copy = Session.objects.get(project=other_project, key="trip")
    assert export_json(copy) == exported
    assert (copy.message_count, copy.raw_tokens, copy.input_tokens, copy.checkpoint_count) == (
        original.message_count, original.raw_tokens, original.input_tokens, original.checkpoint_count)
    assert openai_input(copy) == openai_input(original)


def test_checkpoints_come_back_at_the_same_places(original, other_project, import_bytes):
    import_bytes("trip.json", export_json(original), project=other_project)

    fields = ("first_seq", "last_seq", "created_at_seq", "summary", "summary_tokens", "replaced_tokens",
              "summarizer", "trigger", "created_at")
    mine = list(Checkpoint.objects.filter(session=original).order_by("last_seq").values(*fields))
    theirs = list(Checkpoint.objects.filter(session__project=other_project).order_by("last_seq").values(*fields))
    assert theirs == mine
    second = Checkpoint.objects.filter(session__project=other_project).order_by("last_seq").last()
    assert second.previous.last_seq == mine[0]["last_seq"]


def test_the_raw_log_comes_back_field_by_field(original, other_project, import_bytes):
    import_bytes("trip.json", export_json(original), project=other_project)

    fields = ("seq", "client_id", "role", "content", "text", "reasoning", "tool_calls", "tool_call_id", "call_seq",
              "name", "attributes", "include_in_messages", "created_at", "tokens", "reasoning_tokens", "digest")
    mine = list(Message.objects.filter(session=original).order_by("seq").values(*fields))
    theirs = list(Message.objects.filter(session__project=other_project).order_by("seq").values(*fields))
    assert theirs == mine


def test_the_json_lines_export_imports_too(original, other_project, import_bytes):
    data = "".join(export_jsonl(original)).encode()

    report = import_bytes("trip.jsonl", data, project=other_project)

    assert report.error is None and report.format == "ctxweb"
    assert export_json(Session.objects.get(project=other_project, key="trip")) == export_json(original)


def test_importing_the_export_again_stores_nothing(original, other_project, import_bytes):
    exported = json.dumps(export_json(original))
    import_bytes("trip.json", exported, project=other_project)
    before = counts(other_project)

    again = import_bytes("trip.json", exported, project=other_project)

    assert (again.messages, again.checkpoints, again.duplicates) == (0, 0, original.message_count)
    assert counts(other_project) == before


def test_a_key_prefix_imports_a_copy_beside_the_original(original, project, import_bytes):
    report = import_bytes("trip.json", export_json(original), key_prefix="copy:")

    assert report.keys == ["copy:trip"]
    copy = Session.objects.get(project=project, key="copy:trip")
    assert copy.checkpoint_count == 2 and copy.message_count == original.message_count


def test_an_export_with_a_checkpoint_outside_its_messages_fails_and_stores_nothing(original, other_project,
                                                                                    import_bytes):
    exported = export_json(original)
    exported["checkpoints"][0]["last_seq"] = 999

    report = import_bytes("trip.json", exported, project=other_project)

    assert "does not fit its" in report.error
    assert counts(other_project)["sessions"] == 0
