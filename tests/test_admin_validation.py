"""The Django admin saves nothing the API refuses: every admin form that changes a value the API
validates (a project's compaction defaults, a session's title, metadata, instructions and compaction
settings) runs the API's own rules, shows each refusal on its field and changes nothing; a valid change
of a session goes through update_session and records the event the API records."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from sessions.access.api_keys import create_api_key
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Event, Project, Session
from tests.api.conftest import Api

pytestmark = pytest.mark.django_db

HOST = "127.0.0.1"
TOO_DEEP = json.dumps({"a": json.loads("[" * 40 + "]" * 40)})


@pytest.fixture
def root(db) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client(HTTP_HOST=HOST)
    client.force_login(user)
    return client


@pytest.fixture
def session(project) -> Session:
    update_session(project, "chat", {"title": "Chat", "metadata": {"customer": 7}, "instructions": "Be brief.",
                                     "compaction": {"max_tokens": 5000, "keep_recent_tokens": 1000,
                                                    "summarizer": "openai"}})
    append_messages(project, "chat", [{"role": "user", "content": "hello"}], "test")
    return Session.objects.get(project=project, key="chat")


def project_form(project: Project, **changes) -> dict:
    """The project's change form as the admin page submits it, with `changes`."""
    data = {"name": project.name, "title": project.title, "max_tokens": project.max_tokens or "",
            "keep_recent_tokens": project.keep_recent_tokens or "",
            "auto_compact": {None: "unknown", True: "true", False: "false"}[project.auto_compact],
            "summarizer": project.summarizer, "_save": "Save"}
    return {**data, **changes}


def session_form(session: Session, **changes) -> dict:
    data = {"title": session.title, "metadata": json.dumps(session.metadata), "instructions": session.instructions,
            "tags": [], "max_tokens": session.max_tokens or "", "keep_recent_tokens": session.keep_recent_tokens or "",
            "auto_compact": {None: "unknown", True: "true", False: "false"}[session.auto_compact],
            "summarizer": session.summarizer, "_save": "Save"}
    return {**data, **changes}


def change_url(obj) -> str:
    return reverse(f"admin:ctx_sessions_{obj._meta.model_name}_change", args=[obj.pk])


def rows() -> dict:
    """Every project and session row and every event: a refused form changes none of them."""
    return {"projects": list(Project.objects.order_by("pk").values()),
            "sessions": list(Session.objects.order_by("pk").values()),
            "events": list(Event.objects.order_by("pk").values_list("pk", "type", "data"))}


def assert_refused(response, field: str, words: str) -> None:
    """The change form is shown again with an error on `field` that says `words`."""
    assert response.status_code == 200, response.status_code
    form = response.context["adminform"].form
    assert field in form.errors, form.errors
    assert words in " ".join(form.errors[field]), form.errors[field]
    assert words in response.content.decode().replace("&#x27;", "'")


# --- projects ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value", "words"), [
    ("max_tokens", "0", "at least 1"),
    ("max_tokens", "-5", "at least 1"),
    ("max_tokens", "100000001", "at most 100000000"),
    ("max_tokens", "999999999999", "at most 100000000"),
    ("max_tokens", "99999999999999999999999", "at most 100000000"),
    ("max_tokens", "1.5", "whole number"),
    ("keep_recent_tokens", "0", "at least 1"),
    ("keep_recent_tokens", "999999999999", "at most 100000000"),
    ("summarizer", "bogus", "Select a valid choice"),
    ("summarizer", "supplied", "Select a valid choice"),
    ("name", "bad name", "letters, numbers"),
    ("title", "t" * 201, "at most 200 characters"),
])
def test_the_project_form_refuses_what_the_api_refuses_and_changes_nothing(root, project, field, value, words):
    before = rows()

    response = root.post(change_url(project), project_form(project, **{field: value}))

    assert_refused(response, field, words)
    assert rows() == before


def test_the_project_form_refuses_each_bad_setting_on_its_own_field_at_once(root, project):
    before = rows()

    response = root.post(change_url(project), project_form(project, max_tokens="0", keep_recent_tokens="999999999999"))

    assert_refused(response, "max_tokens", "max_tokens must be a whole number of at least 1")
    assert_refused(response, "keep_recent_tokens", "keep_recent_tokens must be a whole number of at most 100000000")
    assert rows() == before


def test_a_nul_character_in_a_project_form_is_refused_before_the_form(root, project):
    before = rows()

    response = root.post(change_url(project), project_form(project, title="nul \x00"))

    assert response.status_code == 400
    assert rows() == before


def test_a_new_project_with_a_bad_setting_is_not_created(root, project):
    before = rows()

    response = root.post(reverse("admin:ctx_sessions_project_add"),
                         project_form(Project(name="fresh"), max_tokens="0", summarizer="extractive"))

    assert_refused(response, "max_tokens", "at least 1")
    assert rows() == before


def test_valid_project_settings_are_saved(root, project):
    response = root.post(change_url(project), project_form(project, title="Support", max_tokens="8000",
                                                           keep_recent_tokens="2000", auto_compact="false",
                                                           summarizer="extractive"))

    assert response.status_code == 302, response.context["adminform"].form.errors
    project.refresh_from_db()
    assert (project.title, project.max_tokens, project.keep_recent_tokens, project.auto_compact, project.summarizer) == (
        "Support", 8000, 2000, False, "extractive")


def test_project_settings_can_be_cleared_back_to_the_servers(root, project):
    Project.objects.filter(pk=project.pk).update(max_tokens=8000, summarizer="openai", auto_compact=True)
    project.refresh_from_db()

    response = root.post(change_url(project), project_form(project, max_tokens="", summarizer="", auto_compact="unknown"))

    assert response.status_code == 302
    project.refresh_from_db()
    assert (project.max_tokens, project.summarizer, project.auto_compact) == (None, "", None)


# --- sessions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value", "words"), [
    ("max_tokens", "0", "at least 1"),
    ("max_tokens", "-1", "at least 1"),
    ("max_tokens", "100000001", "at most 100000000"),
    ("max_tokens", "999999999999", "at most 100000000"),
    ("keep_recent_tokens", "0", "at least 1"),
    ("keep_recent_tokens", "-1", "at least 1"),
    ("keep_recent_tokens", "999999999999", "at most 100000000"),
    ("summarizer", "bogus", "Select a valid choice"),
    ("title", "t" * 301, "at most 300 characters"),
    ("metadata", "[1, 2]", "metadata must be an object"),
    ("metadata", '"text"', "metadata must be an object"),
    ("metadata", "7", "metadata must be an object"),
    ("metadata", "null", "metadata must be an object"),
    ("metadata", "{", "Enter a valid JSON"),
    ("metadata", '{"a": "nul \\u0000"}', "must not contain NUL characters"),
    ("metadata", TOO_DEEP, "nested more than 32 levels deep"),
    ("instructions", "i" * 101, "longer than 100 characters"),
])
def test_the_session_form_refuses_what_the_api_refuses_and_changes_nothing(root, session, settings, field, value,
                                                                           words):
    settings.CTXWEB_MAX_TEXT_CHARS = 100
    before = rows()

    response = root.post(change_url(session), session_form(session, **{field: value}))

    assert_refused(response, field, words)
    assert rows() == before


@pytest.mark.parametrize(("field", "value"), [
    ("max_tokens", 0), ("keep_recent_tokens", 999999999999), ("summarizer", "bogus"), ("title", "t" * 301),
    ("metadata", [1, 2]), ("instructions", "i" * 101),
])
def test_the_api_refuses_the_same_values(api_for_project, session, settings, field, value):
    settings.CTXWEB_MAX_TEXT_CHARS = 100
    compaction = field in ("max_tokens", "keep_recent_tokens", "summarizer")
    body = {"compaction": {field: value}} if compaction else {field: value}

    assert api_for_project.put("/sessions/chat", body).status_code == 422


@pytest.fixture
def api_for_project(project) -> Api:
    return Api(create_api_key(project, "app")[1])


def test_a_session_key_is_not_changed_by_the_admin(root, session):
    before = rows()

    response = root.post(change_url(session), session_form(session, key="bad key/.."))

    assert response.status_code == 302
    assert rows() == before  # nothing changed: the key is read-only, and so nothing was saved


def test_a_session_being_imported_cannot_be_changed(root, session):
    Session.objects.filter(pk=session.pk).update(being_imported=True)
    before = rows()

    response = root.post(change_url(session), session_form(session, title="New"))

    assert response.status_code == 200
    assert "being imported" in " ".join(response.context["adminform"].form.non_field_errors())
    assert rows() == before


def test_a_valid_session_change_is_saved_through_update_session_and_recorded_as_the_api_records_it(
        root, session, project, api_for_project):
    update_session(project, "twin", {"title": "Chat", "metadata": {"customer": 7}, "instructions": "Be brief.",
                                     "compaction": {"max_tokens": 5000, "keep_recent_tokens": 1000,
                                                    "summarizer": "openai"}})
    change = {"title": "Refund", "metadata": {"customer": 8}, "instructions": "Be kind.",
              "compaction": {"max_tokens": 9000, "keep_recent_tokens": 10, "auto": False, "summarizer": None}}

    response = root.post(change_url(session), session_form(
        session, title="Refund", metadata='{"customer": 8}', instructions="Be kind.", max_tokens="9000",
        keep_recent_tokens="10", auto_compact="false", summarizer=""))
    assert api_for_project.put("/sessions/twin", change).status_code == 200

    assert response.status_code == 302, response.context["adminform"].form.errors
    admin_row, api_row = (Session.objects.filter(key=key).values().get() for key in ("chat", "twin"))
    assert {k: admin_row[k] for k in ("title", "metadata", "instructions", "instructions_tokens", "max_tokens",
                                      "keep_recent_tokens", "auto_compact", "summarizer")} == {
        "title": "Refund", "metadata": {"customer": 8}, "instructions": "Be kind.",
        "instructions_tokens": api_row["instructions_tokens"], "max_tokens": 9000, "keep_recent_tokens": 10,
        "auto_compact": False, "summarizer": ""}
    by_admin = Event.objects.filter(session__key="chat", type="SESSION_UPDATED").get()
    by_api = Event.objects.filter(session__key="twin", type="SESSION_UPDATED").get()
    assert sorted(by_admin.data["fields"]) == sorted(by_api.data["fields"]) == sorted(
        ["title", "metadata", "instructions", "max_tokens", "keep_recent_tokens", "auto_compact", "summarizer"])
    assert (by_admin.actor, by_api.actor) == ("user:root", "api:app")


def test_an_unchanged_session_form_records_nothing(root, session):
    before = rows()

    response = root.post(change_url(session), session_form(session))

    assert response.status_code == 302
    assert rows() == before


# --- every admin page still renders ----------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "admin:index", "admin:ctx_sessions_project_changelist", "admin:ctx_sessions_project_add",
    "admin:ctx_sessions_session_changelist", "admin:ctx_sessions_message_changelist",
    "admin:ctx_sessions_checkpoint_changelist", "admin:ctx_sessions_event_changelist",
    "admin:ctx_sessions_authfailure_changelist",
])
def test_the_admin_lists_and_add_forms_render(root, session, name):
    assert root.get(reverse(name)).status_code == 200


def test_the_change_forms_render(root, session, project):
    assert root.get(change_url(project)).status_code == 200
    assert root.get(change_url(session)).status_code == 200
    assert root.get(reverse("admin:ctx_sessions_session_add")).status_code == 403
