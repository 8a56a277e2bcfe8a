"""Staff actions on a session: compact now and include/hide a message need the editor role;
viewers get 403 and see no button; outsiders get 404; every POST needs the CSRF token."""

import json

import pytest
from django.urls import reverse

from sessions.access.api_keys import create_api_key
from sessions.models import ApiKey, Event, EventType, Membership, Message, Note
from sessions.store.notes import add_note

from .conftest import make_client
from .dom import parse


def compact_url(story):
    return reverse("session_compact", args=["default", story.session.key])


def include_url(story, seq):
    return reverse("message_include", args=["default", story.session.key, seq])


def new_events(story, since: int):
    return list(Event.objects.filter(session=story.session, pk__gt=since).order_by("pk"))


def last_event_id(story) -> int:
    return Event.objects.filter(session=story.session).order_by("-pk").values_list("pk", flat=True).first()


# --- compact now ---------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["editor", "admin", "root"])
def test_an_editor_or_admin_can_compact_now(request, story, who):
    client = request.getfixturevalue({"editor": "editor_client", "admin": "admin_client", "root": "superuser_client"}[who])
    since = last_event_id(story)
    response = client.post(compact_url(story), {"force": "1"})
    assert response.status_code == 302
    assert response["Location"] == story.url()
    events = new_events(story, since)
    assert [e.type for e in events][0] == EventType.COMPACTION_STARTED
    assert events[1].type in (EventType.COMPACTION_COMPLETED, EventType.COMPACTION_SKIPPED, EventType.COMPACTION_FAILED)
    assert {e.actor for e in events} == {f"user:{who}"}
    assert events[0].data["trigger"] == "request"
    flash = parse(client.get(story.url())).find(cls="flash")
    assert flash is not None and "Compaction" in flash.text()


def test_compact_now_under_max_tokens_without_force_is_recorded_as_skipped(editor_client, story):
    since = last_event_id(story)
    assert editor_client.post(compact_url(story)).status_code == 302
    events = new_events(story, since)
    assert [e.type for e in events] == [EventType.COMPACTION_STARTED, EventType.COMPACTION_SKIPPED]
    assert events[1].data["reason"] == "under_threshold"
    assert "under_threshold" in parse(editor_client.get(story.url())).one(cls="flash").text()


def test_compact_now_that_completes_adds_a_checkpoint(editor_client, story, project):
    from sessions.ingest.append import append_messages

    from .conftest import history_turn

    append_messages(project, "story", history_turn(7) + history_turn(8), "test")
    since = last_event_id(story)
    editor_client.post(compact_url(story), {"force": "1"})
    events = new_events(story, since)
    assert [e.type for e in events] == [EventType.COMPACTION_STARTED, EventType.COMPACTION_COMPLETED]
    assert story.session.checkpoints.count() == 3
    assert "Compaction completed" in parse(editor_client.get(story.url())).one(cls="flash").text()


def test_compact_now_through_htmx_answers_with_hx_redirect(editor_client, story):
    since = last_event_id(story)
    response = editor_client.post(compact_url(story), {"force": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == story.url()
    assert new_events(story, since)[0].type == EventType.COMPACTION_STARTED


def test_a_viewer_cannot_compact_and_sees_no_compact_button(viewer_client, editor_client, story):
    since = last_event_id(story)
    assert viewer_client.post(compact_url(story), {"force": "1"}).status_code == 403
    assert new_events(story, since) == []
    viewer_page = viewer_client.get(story.url()).content.decode()
    assert "Compact now" not in viewer_page
    assert parse(viewer_page).find(action=compact_url(story)) is None
    editor_page = parse(editor_client.get(story.url()))
    assert editor_page.one("button", id="compact-now").text() == "Compact now"


def test_compact_now_must_be_a_post(editor_client, story):
    since = last_event_id(story)
    assert editor_client.get(compact_url(story)).status_code == 405
    assert new_events(story, since) == []


# --- include toggle ------------------------------------------------------------------------------


def test_an_editor_hides_a_message_and_the_change_is_recorded_with_the_editor_as_actor(editor_client, story):
    since = last_event_id(story)
    response = editor_client.post(include_url(story, story.result), {"include": "0"})
    assert response.status_code == 302
    assert response["Location"] == story.url(seq=story.result) + f"#m-{story.result}"
    assert not Message.objects.get(session=story.session, seq=story.result).include_in_messages
    events = new_events(story, since)
    updated = [e for e in events if e.type == EventType.MESSAGE_UPDATED]
    assert len(updated) == 1
    assert updated[0].actor == "user:editor"
    assert updated[0].data["seq"] == story.result
    doc = parse(editor_client.get(story.url()))
    assert "code-excluded_flag" in doc.one("article", id=f"m-{story.result}").classes


def test_an_editor_includes_a_hidden_message_again(editor_client, story):
    response = editor_client.post(include_url(story, story.hidden), {"include": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == story.url(seq=story.hidden) + f"#m-{story.hidden}"
    assert Message.objects.get(session=story.session, seq=story.hidden).include_in_messages
    event = Event.objects.filter(session=story.session, type=EventType.MESSAGE_UPDATED).get()
    assert event.actor == "user:editor"


def test_hiding_an_unknown_message_is_404(editor_client, story):
    assert editor_client.post(include_url(story, 999), {"include": "0"}).status_code == 404


def test_a_viewer_cannot_hide_a_message_and_sees_no_toggle(viewer_client, editor_client, story):
    since = last_event_id(story)
    assert viewer_client.post(include_url(story, story.result), {"include": "0"}).status_code == 403
    assert Message.objects.get(session=story.session, seq=story.result).include_in_messages
    assert new_events(story, since) == []
    assert parse(viewer_client.get(story.url())).find("form", cls="include-toggle") is None
    toggle = parse(editor_client.get(story.url())).one("article", id=f"m-{story.result}").one("form", cls="include-toggle")
    assert toggle.get("action") == include_url(story, story.result)


# --- outsiders -----------------------------------------------------------------------------------


def test_an_outsider_gets_404_on_every_action_for_the_default_projects_session(outsider_client, story, viewer_user, project):
    note = add_note(story.session, viewer_user, "a viewer's note", story.result)
    key, _ = create_api_key(project, "default-app")
    s = story.session.key
    before = (Event.objects.count(), list(Message.objects.values_list("include_in_messages", flat=True)),
              list(Note.objects.values_list("text", flat=True)), ApiKey.objects.filter(revoked_at=None).count(),
              Membership.objects.count())
    for url, data in [
        (compact_url(story), {"force": "1"}),
        (include_url(story, story.result), {"include": "0"}),
        (reverse("note_add", args=["default", s]), {"text": "outsider", "seq": str(story.result)}),
        (reverse("note_edit", args=["default", s, note.pk]), {"text": "changed"}),
        (reverse("note_edit", args=["default", s, note.pk]), {"delete": "1"}),
        (reverse("tags_set", args=["default", s]), {"tags": "outsider"}),
        (reverse("api_key_revoke", args=[key.pk]), {}),
        (reverse("members", args=["default"]), {"username": "outsider", "role": "admin"}),
    ]:
        response = outsider_client.post(url, data)
        assert response.status_code == 404, (url, response.status_code)
    assert outsider_client.get(reverse("session_export", args=["default", s, "json"])).status_code == 404
    after = (Event.objects.count(), list(Message.objects.values_list("include_in_messages", flat=True)),
             list(Note.objects.values_list("text", flat=True)), ApiKey.objects.filter(revoked_at=None).count(),
             Membership.objects.count())
    assert after == before


def test_actions_on_a_session_that_does_not_exist_are_404(editor_client, story):
    assert editor_client.post("/p/default/s/nope/compact/", {"force": "1"}).status_code == 404
    assert editor_client.post("/p/default/s/nope/messages/1/include/", {"include": "0"}).status_code == 404


# --- CSRF ----------------------------------------------------------------------------------------


@pytest.fixture
def csrf_client(editor_user):
    return make_client(editor_user, enforce_csrf_checks=True)


def test_a_post_without_the_csrf_token_is_refused(csrf_client, story):
    since = last_event_id(story)
    assert csrf_client.post(compact_url(story), {"force": "1"}).status_code == 403
    assert csrf_client.post(include_url(story, story.result), {"include": "0"}).status_code == 403
    assert csrf_client.post(reverse("note_add", args=["default", "story"]), {"text": "x"}).status_code == 403
    assert csrf_client.post(reverse("tags_set", args=["default", "story"]), {"tags": "x"}).status_code == 403
    assert new_events(story, since) == []
    assert Message.objects.get(session=story.session, seq=story.result).include_in_messages


def test_a_post_with_the_forms_csrf_token_is_accepted(csrf_client, story):
    doc = parse(csrf_client.get(story.url()))
    form = doc.one("form", action=compact_url(story))
    token = form.one("input", name="csrfmiddlewaretoken").get("value")
    assert csrf_client.post(compact_url(story), {"force": "1", "csrfmiddlewaretoken": token}).status_code == 302


def test_an_htmx_post_with_the_token_from_hx_headers_is_accepted(csrf_client, story):
    body = parse(csrf_client.get(story.url())).one("body")
    token = json.loads(body.get("hx-headers"))["X-CSRFToken"]
    response = csrf_client.post(include_url(story, story.result), {"include": "0"},
                                HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200
    assert not Message.objects.get(session=story.session, seq=story.result).include_in_messages
