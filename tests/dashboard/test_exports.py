"""Downloads of one session from the dashboard: lossless JSON, JSON Lines, Markdown."""

import json

import pytest
from django.urls import reverse

from sessions.ingest.append import append_messages
from sessions.models import Message

from .conftest import HIDDEN_TEXT, SYSTEM_TEXT


def export_url(story, fmt):
    return reverse("session_export", args=["default", story.session.key, fmt])


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


FIELDS = ("seq", "client_id", "role", "content", "text", "has_content", "reasoning", "tool_calls", "call_ids",
          "tool_call_id", "call_seq", "name", "attributes", "include_in_messages", "created_at", "tokens",
          "tool_call_tokens", "reasoning_tokens", "digest")


def raw_log(session):
    return list(Message.objects.filter(session=session).order_by("seq").values(*FIELDS))


def test_a_viewer_downloads_json_whose_messages_append_back_identically(viewer_client, story, other_project):
    response = viewer_client.get(export_url(story, "json"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"] == 'attachment; filename="story.json"'
    data = json.loads(body(response))
    assert data["session"]["key"] == "story"
    assert data["session"]["title"] == story.session.title
    assert len(data["messages"]) == story.session.message_count
    assert [c["last_seq"] for c in data["checkpoints"]] == [story.first.last_seq, story.second.last_seq]

    result = append_messages(other_project, "imported", data["messages"], "import")
    assert result.stored_count == story.session.message_count
    assert raw_log(result.session) == raw_log(story.session)
    again = append_messages(other_project, "imported", data["messages"], "import")
    assert again.stored_count == 0  # every message is a duplicate of itself


def test_the_json_export_keeps_hidden_system_and_tool_messages(viewer_client, story):
    messages = json.loads(body(viewer_client.get(export_url(story, "json"))))["messages"]
    by_content = {json.dumps(m["content"]): m for m in messages}
    assert by_content[json.dumps(SYSTEM_TEXT)]["role"] == "system"
    assert by_content[json.dumps(HIDDEN_TEXT)]["include_in_messages"] is False
    assert any(m.get("tool_call_id") == "call_audit_1" for m in messages)
    assert any(m.get("reasoning") for m in messages)


def test_a_viewer_downloads_jsonl_with_one_line_per_message(viewer_client, story):
    response = viewer_client.get(export_url(story, "jsonl"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response["Content-Disposition"] == 'attachment; filename="story.jsonl"'
    lines = [json.loads(line) for line in body(response).decode().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["key"] == "story"
    messages = [line for line in lines if line["type"] == "message"]
    assert [m["seq"] for m in messages] == list(range(1, story.last + 1))
    assert len([line for line in lines if line["type"] == "checkpoint"]) == 2


def test_a_viewer_downloads_a_readable_markdown_transcript(viewer_client, story):
    response = viewer_client.get(export_url(story, "markdown"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert response["Content-Disposition"] == 'attachment; filename="story.md"'
    text = body(response).decode()
    assert story.session.title in text
    assert "TP1351 is on time, gate B32." in text
    assert "flight_status" in text


def test_the_session_page_links_the_three_downloads(viewer_client, story):
    page = viewer_client.get(story.url()).content.decode()
    for fmt in ("json", "jsonl", "markdown"):
        assert f'href="{export_url(story, fmt)}"' in page


@pytest.mark.parametrize("fmt", ["json", "jsonl", "markdown"])
def test_an_outsider_gets_404(outsider_client, story, fmt):
    response = outsider_client.get(export_url(story, fmt))
    assert response.status_code == 404
    assert b"TP1351" not in body(response)


@pytest.mark.parametrize("fmt", ["xml", "csv", "JSON", "md"])
def test_an_unknown_format_is_404(viewer_client, story, fmt):
    assert viewer_client.get(export_url(story, fmt)).status_code == 404


def test_exporting_an_unknown_session_is_404(viewer_client, story):
    assert viewer_client.get("/p/default/s/nope/export.json").status_code == 404


# --- what support staff added: tags and notes, in every format ------------------------------------


@pytest.fixture
def annotated(story, viewer_user, editor_user):
    """The story with two tags, a note on the session and two notes on its tool result, one edited."""
    from sessions.store.notes import add_note, edit_note, set_tags

    set_tags(story.session, viewer_user, ["refund", "needs-review"])
    add_note(story.session, viewer_user, "Customer called twice about this.")
    add_note(story.session, viewer_user, "Gate info came from the tool.\nChecked with ops.", seq=story.result)
    later = add_note(story.session, editor_user, "First draft", seq=story.result)
    edit_note(later, editor_user, "Ops confirmed gate **B32** <b>today</b>")
    return story


def test_the_json_download_holds_the_tags_and_every_note_with_author_time_and_seq(viewer_client, annotated):
    data = json.loads(body(viewer_client.get(export_url(annotated, "json"))))

    assert data["tags"] == ["needs-review", "refund"]
    notes = data["notes"]
    assert [(n["seq"], n["author"], n["text"]) for n in notes] == [
        (None, "viewer", "Customer called twice about this."),
        (annotated.result, "viewer", "Gate info came from the tool.\nChecked with ops."),
        (annotated.result, "editor", "Ops confirmed gate **B32** <b>today</b>"),
    ]
    assert all(n["created_at"].endswith("+00:00") for n in notes)
    assert notes[2]["updated_at"] > notes[2]["created_at"]
    assert "tags" not in data["session"]  # the session object stays what PUT /sessions/{key} takes


def test_the_jsonl_download_has_the_tags_on_the_session_line_and_a_line_per_note(viewer_client, annotated):
    lines = [json.loads(line) for line in body(viewer_client.get(export_url(annotated, "jsonl"))).decode().splitlines()]

    assert lines[0]["type"] == "session" and lines[0]["tags"] == ["needs-review", "refund"]
    notes = [line for line in lines if line["type"] == "note"]
    assert [(n["seq"], n["author"]) for n in notes] == [(None, "viewer"), (annotated.result, "viewer"),
                                                         (annotated.result, "editor")]
    assert lines[-len(notes):] == notes  # after the messages and checkpoints


def test_the_markdown_download_shows_tags_session_notes_and_each_note_under_its_message(viewer_client, annotated):
    text = body(viewer_client.get(export_url(annotated, "markdown"))).decode()

    assert "**Tags:** `needs-review`, `refund`" in text
    session_notes = text.index("## Notes on the session")
    assert text.index("Customer called twice about this.") > session_notes
    message = text.index(f"### #{annotated.result} ·")
    following = text.index(f"### #{annotated.result + 1} ·")
    # Every line of a note is quoted, so a note cannot break out of its quote.
    assert "> **Note** by `viewer`" in text[message:following]
    assert "> Gate info came from the tool.\n> Checked with ops." in text[message:following]
    assert "> **Note** by `editor`" in text[message:following] and "· edited" in text[message:following]


def test_a_session_without_tags_or_notes_downloads_empty_lists(viewer_client, story):
    data = json.loads(body(viewer_client.get(export_url(story, "json"))))
    assert (data["tags"], data["notes"]) == ([], [])
    text = body(viewer_client.get(export_url(story, "markdown"))).decode()
    assert "**Tags:**" not in text and "Notes on the session" not in text


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_an_annotated_download_imports_back_without_its_tags_and_notes(viewer_client, annotated, other_project, fmt):
    from sessions.ingest.importers.runner import import_data
    from sessions.models import Note

    data = body(viewer_client.get(export_url(annotated, fmt)))
    report = import_data(other_project, f"story.{fmt}", data)

    assert report.error is None and report.format == "ctxweb"
    copy = other_project.sessions.get(key="story")
    assert raw_log(copy) == raw_log(annotated.session)
    assert not copy.tags.exists() and not Note.objects.filter(session=copy).exists()
