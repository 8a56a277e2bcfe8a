"""Notes and tags: support staff (viewers) annotate sessions and messages; each change is an event
with the person as actor; notes show where they belong; only the author edits or deletes a note."""

from django.urls import reverse

from sessions.models import Event, EventType, Note, Tag
from sessions.store.notes import add_note

from .dom import parse


def note_add_url(story):
    return reverse("note_add", args=["default", story.session.key])


def note_edit_url(story, note):
    return reverse("note_edit", args=["default", story.session.key, note.pk])


def tags_url(story):
    return reverse("tags_set", args=["default", story.session.key])


def events_of(story, type_):
    return list(Event.objects.filter(session=story.session, type=type_).order_by("pk"))


# --- notes ---------------------------------------------------------------------------------------


def test_a_viewer_adds_a_note_on_a_message_and_sees_it_next_to_the_message(viewer_client, viewer_user, story):
    response = viewer_client.post(note_add_url(story), {"seq": str(story.result), "text": "Gate info came from the tool."})
    assert response.status_code == 302
    assert response["Location"] == story.url(seq=story.result) + f"#m-{story.result}"
    note = Note.objects.get()
    assert (note.session, note.seq, note.author, note.text) == (story.session, story.result, viewer_user, "Gate info came from the tool.")
    [event] = events_of(story, EventType.NOTE_ADDED)
    assert event.actor == "user:viewer"
    assert event.data["seq"] == story.result and event.data["note_id"] == note.pk

    doc = parse(viewer_client.get(story.url()))
    article = doc.one("article", id=f"m-{story.result}")
    note_el = article.one("li", cls="note")
    assert "Gate info came from the tool." in note_el.text()
    assert "viewer" in note_el.one(cls="meta").text()
    assert "edited" not in note_el.one(cls="meta").text()
    assert "Gate info came from the tool." not in doc.one("article", id=f"m-{story.call}").text()


def test_a_note_on_a_message_also_appears_in_the_session_notes_with_a_link(viewer_client, story):
    viewer_client.post(note_add_url(story), {"seq": str(story.result), "text": "Linked note"})
    notes = parse(viewer_client.get(story.url())).one("section", id="notes")
    assert "Linked note" in notes.text()
    assert any(a.get("href", "").endswith(f"#m-{story.result}") for a in notes.find_all("a"))


def test_a_viewer_adds_a_note_on_the_whole_session(viewer_client, story):
    response = viewer_client.post(note_add_url(story), {"text": "Escalated to tier 2."})
    assert response.status_code == 302
    assert response["Location"] == story.url() + "#notes"
    note = Note.objects.get()
    assert note.seq is None
    assert events_of(story, EventType.NOTE_ADDED)[0].actor == "user:viewer"
    doc = parse(viewer_client.get(story.url()))
    assert "Escalated to tier 2." in doc.one("section", id="notes").text()
    assert all("Escalated to tier 2." not in a.text() for a in doc.find_all("article", cls="msg"))


def test_a_note_needs_text_and_an_existing_message(viewer_client, story):
    viewer_client.post(note_add_url(story), {"text": "   "})
    viewer_client.post(note_add_url(story), {"seq": "999", "text": "on nothing"})
    assert Note.objects.count() == 0
    assert events_of(story, EventType.NOTE_ADDED) == []


def test_a_note_after_reload_stays_next_to_its_message_when_the_message_is_in_an_earlier_window(viewer_client, viewer_user, project):
    from .test_session_page import build_run

    session = build_run(project, "run", 200)
    add_note(session, viewer_user, "note on an early message", 10)
    doc = parse(viewer_client.get("/p/default/s/run/?seq=10"))
    assert "note on an early message" in doc.one("article", id="m-10").text()
    fragment = parse(viewer_client.get("/p/default/s/run/log/?before=40"))
    assert "note on an early message" in fragment.one("article", id="m-10").text()


def test_the_author_edits_their_note(viewer_client, viewer_user, story):
    note = add_note(story.session, viewer_user, "first words", story.result)
    response = viewer_client.post(note_edit_url(story, note), {"text": "better words"})
    assert response.status_code == 302
    note.refresh_from_db()
    assert note.text == "better words"
    [event] = events_of(story, EventType.NOTE_EDITED)
    assert event.actor == "user:viewer"
    article = parse(viewer_client.get(story.url())).one("article", id=f"m-{story.result}")
    assert "better words" in article.text() and "first words" not in article.text()
    assert "edited" in article.one("li", cls="note").one(cls="meta").text()


def test_the_author_deletes_their_note(viewer_client, viewer_user, story):
    note = add_note(story.session, viewer_user, "to be deleted", story.result)
    response = viewer_client.post(note_edit_url(story, note), {"delete": "1"})
    assert response.status_code == 302
    assert not Note.objects.filter(pk=note.pk).exists()
    [event] = events_of(story, EventType.NOTE_DELETED)
    assert event.actor == "user:viewer"
    assert b"to be deleted" not in viewer_client.get(story.url()).content.split(b'id="events"')[0]


def test_only_the_author_sees_the_edit_form(viewer_client, editor_client, viewer_user, story):
    note = add_note(story.session, viewer_user, "mine", story.result)
    for section in (f"m-{story.result}", "notes"):
        mine = parse(viewer_client.get(story.url())).one(id=section).one("li", cls="note")
        assert mine.find("form", action=note_edit_url(story, note)) is not None
        theirs = parse(editor_client.get(story.url())).one(id=section).one("li", cls="note")
        assert theirs.find("form") is None


def test_element_ids_on_the_session_page_are_unique_with_notes_on_messages(viewer_client, viewer_user, story):
    add_note(story.session, viewer_user, "on a message", story.result)
    add_note(story.session, viewer_user, "on the session")
    ids = [e.get("id") for e in parse(viewer_client.get(story.url())).iter() if e.get("id")]
    assert sorted({i for i in ids if ids.count(i) > 1}) == []


def test_nobody_else_edits_or_deletes_a_note(editor_client, admin_client, superuser_client, viewer_user, story):
    note = add_note(story.session, viewer_user, "the viewer's note", story.result)
    for client in (editor_client, admin_client, superuser_client):
        assert client.post(note_edit_url(story, note), {"text": "rewritten"}).status_code == 403
        assert client.post(note_edit_url(story, note), {"delete": "1"}).status_code == 403
    note.refresh_from_db()
    assert note.text == "the viewer's note"
    assert events_of(story, EventType.NOTE_EDITED) == events_of(story, EventType.NOTE_DELETED) == []


def test_a_note_of_another_session_is_404_through_this_session(viewer_client, viewer_user, story, project):
    from .conftest import build_story

    other = build_story(project, "story-two")
    note = add_note(other.session, viewer_user, "elsewhere", 2)
    assert viewer_client.post(note_edit_url(story, note), {"text": "moved"}).status_code == 404
    note.refresh_from_db()
    assert note.text == "elsewhere"


def test_an_outsider_gets_404_on_notes(outsider_client, viewer_user, story):
    note = add_note(story.session, viewer_user, "private", story.result)
    assert outsider_client.post(note_add_url(story), {"text": "hello"}).status_code == 404
    assert outsider_client.post(note_edit_url(story, note), {"text": "hello"}).status_code == 404
    assert outsider_client.post(note_edit_url(story, note), {"delete": "1"}).status_code == 404
    assert list(Note.objects.values_list("text", flat=True)) == ["private"]


# --- tags ----------------------------------------------------------------------------------------


def test_a_viewer_sets_tags_and_the_change_is_recorded(viewer_client, story):
    response = viewer_client.post(tags_url(story), {"tags": "needs-review, Bug"})
    assert response.status_code == 302
    assert response["Location"] == story.url()
    assert sorted(story.session.tags.values_list("name", flat=True)) == ["bug", "needs-review"]
    [event] = events_of(story, EventType.TAGS_CHANGED)
    assert event.actor == "user:viewer"
    assert event.data["before"] == [] and event.data["after"] == ["bug", "needs-review"]
    tags = parse(viewer_client.get(story.url())).one(id="tags")
    assert {a.text() for a in tags.find_all("a", cls="tag")} == {"bug", "needs-review"}


def test_changing_tags_records_what_was_added_and_removed(viewer_client, story):
    viewer_client.post(tags_url(story), {"tags": "bug needs-review"})
    viewer_client.post(tags_url(story), {"tags": "bug resolved"})
    event = events_of(story, EventType.TAGS_CHANGED)[-1]
    assert event.data["added"] == ["resolved"] and event.data["removed"] == ["needs-review"]
    viewer_client.post(tags_url(story), {"tags": "resolved bug"})  # the same set: nothing to record
    assert len(events_of(story, EventType.TAGS_CHANGED)) == 2


def test_tags_show_on_the_list_and_filter_it(viewer_client, story, project):
    from sessions.ingest.append import append_messages

    append_messages(project, "untagged", [{"role": "user", "content": "hi"}], "test")
    viewer_client.post(tags_url(story), {"tags": "needs-review"})
    doc = parse(viewer_client.get(reverse("sessions")))
    row = next(tr for tr in doc.one(id="session-rows").find_all("tr") if tr.find("a", cls="key") and tr.find("a", cls="key").text() == "story")
    assert [a.text() for a in row.find_all("a", cls="tag")] == ["needs-review"]
    filtered = parse(viewer_client.get(reverse("sessions"), {"tag": "needs-review"}))
    assert [a.text() for a in filtered.one(id="session-rows").find_all("a", cls="key")] == ["story"]
    page_tag = parse(viewer_client.get(story.url())).one(id="tags").one("a", cls="tag")
    assert page_tag.get("href") == reverse("sessions") + "?tag=needs-review"


def test_clearing_tags_removes_them(viewer_client, story):
    viewer_client.post(tags_url(story), {"tags": "bug"})
    viewer_client.post(tags_url(story), {"tags": ""})
    assert story.session.tags.count() == 0
    assert events_of(story, EventType.TAGS_CHANGED)[-1].data["removed"] == ["bug"]


def test_invalid_tags_change_nothing(viewer_client, story):
    response = viewer_client.post(tags_url(story), {"tags": "ok <b>bad</b>"}, follow=True)
    assert response.status_code == 200
    assert story.session.tags.count() == 0
    assert events_of(story, EventType.TAGS_CHANGED) == []


def test_tags_belong_to_the_project(viewer_client, outsider_client, story, other_session):
    viewer_client.post(tags_url(story), {"tags": "bug"})
    assert Tag.objects.get().project.name == "default"
    filtered = parse(outsider_client.get(reverse("sessions"), {"tag": "bug"}))
    assert filtered.one(id="session-rows").find("a", cls="key") is None


def test_an_outsider_gets_404_on_tags(outsider_client, story):
    assert outsider_client.post(tags_url(story), {"tags": "outsider"}).status_code == 404
    assert story.session.tags.count() == 0
    assert events_of(story, EventType.TAGS_CHANGED) == []
