"""The Django admin's session change page: a superuser edits a session through the real admin view, and
the change goes through the domain like the API's PUT (update_session: recount, SESSION_UPDATED;
set_tags: TAGS_CHANGED). The figures ctxweb keeps are read-only there."""

import json

import pytest
from django.urls import reverse

from sessions.context.figures import refresh_input_tokens
from sessions.context.model_input import build_model_input, layout_model_input
from sessions.models import EventType, Role, Session, Tag
from sessions.store.notes import set_tags
from sessions.wire.tokens import count_message

from .dom import parse

NEW_INSTRUCTIONS = "You are the support agent of Horizon Air. Answer in one short paragraph, " + "politely " * 40


def change_url(session: Session) -> str:
    return reverse("admin:ctx_sessions_session_change", args=[session.pk])


def form_data(session: Session, **changes) -> dict:
    """What the change form posts for `session` as it is stored, with `changes` on top."""
    auto = {None: "unknown", True: "true", False: "false"}[session.auto_compact]
    data = {
        "title": session.title,
        "metadata": json.dumps(session.metadata),
        "instructions": session.instructions,
        "tags": [str(pk) for pk in session.tags.values_list("pk", flat=True)],
        "max_tokens": session.max_tokens if session.max_tokens is not None else "",
        "keep_recent_tokens": session.keep_recent_tokens if session.keep_recent_tokens is not None else "",
        "auto_compact": auto,
        "summarizer": session.summarizer,
        "_save": "Save",
    }
    return {**data, **changes}


def stored_figures(session: Session) -> tuple:
    return (session.instructions_tokens, session.input_tokens, session.input_messages, session.input_left_out,
            session.checkpoint_last_seq)


def assert_figures_equal_a_rebuild(session: Session):
    session.refresh_from_db()
    stored = stored_figures(session)
    layout = layout_model_input(session)
    assert session.instructions_tokens == (count_message(Role.SYSTEM, session.instructions).total
                                           if session.instructions else 0)
    assert session.input_tokens == layout.tokens == build_model_input(session).tokens
    assert session.input_messages == layout.message_count
    assert session.input_left_out == [o.as_dict() for o in layout.omitted]
    refresh_input_tokens(session)
    session.refresh_from_db()
    assert stored_figures(session) == stored


def test_editing_instructions_in_the_admin_recounts_the_figures_and_records_the_update(superuser_client, story):
    session = story.session
    before = stored_figures(session)

    response = superuser_client.post(change_url(session), form_data(session, instructions=NEW_INSTRUCTIONS))

    assert response.status_code == 302, response.content.decode()[:2000]
    session.refresh_from_db()
    assert session.instructions == NEW_INSTRUCTIONS
    assert session.instructions_tokens > before[0]
    assert session.input_tokens == before[1] - before[0] + session.instructions_tokens
    assert_figures_equal_a_rebuild(session)
    event = session.events.order_by("-pk").first()
    assert (event.type, event.actor, event.data) == (EventType.SESSION_UPDATED, "user:root", {"fields": ["instructions"]})


def test_clearing_instructions_in_the_admin_takes_them_out_of_the_model_input(superuser_client, story):
    session = story.session

    superuser_client.post(change_url(session), form_data(session, instructions=""))

    session.refresh_from_db()
    assert session.instructions == "" and session.instructions_tokens == 0
    assert [e.kind for e in build_model_input(session).entries][:1] == ["summary"]
    assert_figures_equal_a_rebuild(session)


def test_instructions_typed_in_a_browser_keep_the_line_breaks_applications_send(superuser_client, story):
    session = story.session
    multiline = "You are the support agent of Horizon Air.\nAnswer briefly.\n"
    superuser_client.post(change_url(session), form_data(session, instructions=multiline.replace("\n", "\r\n")))
    session.refresh_from_db()
    assert session.instructions == multiline
    assert_figures_equal_a_rebuild(session)
    events = session.events.count()

    # Saving the page again, as a browser sends it, changes nothing.
    superuser_client.post(change_url(session), form_data(session, instructions=multiline.replace("\n", "\r\n")))

    assert session.events.count() == events


def test_compaction_settings_edited_in_the_admin_are_saved_and_recorded(superuser_client, story):
    session = story.session

    response = superuser_client.post(change_url(session), form_data(
        session, title="Moved to TP1351", max_tokens="9000", auto_compact="true", summarizer="extractive"))

    assert response.status_code == 302
    session.refresh_from_db()
    assert (session.title, session.max_tokens, session.auto_compact, session.summarizer) == \
        ("Moved to TP1351", 9000, True, "extractive")
    event = session.events.order_by("-pk").first()
    assert event.type == EventType.SESSION_UPDATED
    assert sorted(event.data["fields"]) == ["auto_compact", "max_tokens", "summarizer", "title"]
    assert_figures_equal_a_rebuild(session)


def test_saving_the_admin_form_unchanged_records_nothing(superuser_client, story):
    session = story.session
    events = session.events.count()

    response = superuser_client.post(change_url(session), form_data(session))

    assert response.status_code == 302
    assert session.events.count() == events


def test_posted_figures_are_ignored_because_they_are_read_only(superuser_client, story):
    session = story.session
    before = stored_figures(session)

    response = superuser_client.post(change_url(session), form_data(
        session, input_tokens="1", instructions_tokens="1", input_messages="0", message_count="0", raw_tokens="0",
        checkpoint_last_seq="0", input_left_out="[]", key="renamed"))

    assert response.status_code == 302
    session.refresh_from_db()
    assert stored_figures(session) == before
    assert session.key == "story" and session.message_count == 35


def test_the_change_page_shows_the_figures_without_inputs_for_them(superuser_client, story):
    response = superuser_client.get(change_url(story.session))

    assert response.status_code == 200
    form = parse(response).one("form", id="session_form")
    names = {e.get("name") for e in form.iter() if e.get("name")}
    assert {"title", "metadata", "instructions", "tags", "max_tokens", "summarizer"} <= names
    derived = {"instructions_tokens", "message_count", "raw_tokens", "input_tokens", "input_messages",
               "input_left_out", "checkpoint_last_seq", "checkpoint_count", "failed_compactions", "project", "key"}
    assert not names & derived
    assert str(story.session.input_tokens) in form.text()


@pytest.mark.parametrize("changes, message", [
    ({"metadata": "[1, 2]"}, "metadata must be an object"),
    ({"max_tokens": "0"}, "max_tokens must be a whole number"),
    ({"summarizer": "gpt-99"}, "Select a valid choice"),
])
def test_a_value_the_api_would_refuse_is_a_form_error_and_changes_nothing(superuser_client, story, changes, message):
    session = story.session
    events = session.events.count()

    response = superuser_client.post(change_url(session), form_data(session, instructions="changed", **changes))

    assert response.status_code == 200
    assert message in response.content.decode()
    session.refresh_from_db()
    assert session.instructions != "changed"
    assert session.events.count() == events


def test_tags_edited_in_the_admin_are_recorded_like_tags_set_on_the_session_page(superuser_client, superuser, story):
    session = story.session
    set_tags(session, superuser, ["bug"])
    needs_review = Tag.objects.create(project=session.project, name="needs-review")

    response = superuser_client.post(change_url(session), form_data(session, tags=[str(needs_review.pk)]))

    assert response.status_code == 302
    assert sorted(session.tags.values_list("name", flat=True)) == ["needs-review"]
    event = session.events.order_by("-pk").first()
    assert event.type == EventType.TAGS_CHANGED
    assert (event.actor, event.data["added"], event.data["removed"]) == ("user:root", ["needs-review"], ["bug"])


def test_the_tags_offered_are_only_those_of_the_sessions_project(superuser_client, story, other_project):
    foreign = Tag.objects.create(project=other_project, name="foreign")

    response = superuser_client.post(change_url(story.session), form_data(story.session, tags=[str(foreign.pk)]))

    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not story.session.tags.exists()
