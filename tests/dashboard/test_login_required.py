"""Every dashboard page, fragment, download and action sends an anonymous visitor to the login page
and changes nothing (login required everywhere)."""

from urllib.parse import urlsplit

import pytest
from django.urls import get_resolver, resolve, reverse

from sessions.access.api_keys import create_api_key
from sessions.models import ApiKey, Event, ImportJob, Membership, Message, Note

from .conftest import session_url


def _pages(story, note, api_key, request_event):
    s = story.session
    return [
        reverse("sessions"),
        reverse("sessions") + "?q=bag&project=default",
        session_url(s),
        session_url(s, seq=story.result),
        session_url(s, "log/", before=10),
        session_url(s, "log/", after=10),
        session_url(s, "input/"),
        session_url(s, "live/", after=1),
        session_url(s, "chart/"),
        session_url(s, "events/", before=10_000),
        reverse("checkpoint_diff", args=["default", s.key, story.first.pk]),
        reverse("request_view", args=["default", s.key, request_event.pk]),
        reverse("session_export", args=["default", s.key, "json"]),
        reverse("session_export", args=["default", s.key, "jsonl"]),
        reverse("session_export", args=["default", s.key, "markdown"]),
        reverse("search") + "?q=taxi",
        reverse("compare") + f"?project=default&a={s.key}&b={s.key}",
        reverse("api_keys"),
        reverse("members", args=["default"]),
        "/import/",
        reverse("import_job", args=[ImportJob.objects.get().pk]),
        reverse("queues"),
        reverse("project_settings", args=["default"]),
        reverse("queue", args=[1]),
        reverse("queue_csv", args=[1]),
    ]


def _actions(story, note, api_key):
    s = story.session
    return [
        (reverse("session_compact", args=["default", s.key]), {"force": "1"}),
        (reverse("message_include", args=["default", s.key, story.result]), {"include": "0"}),
        (reverse("note_add", args=["default", s.key]), {"text": "anonymous note", "seq": str(story.result)}),
        (reverse("note_edit", args=["default", s.key, note.pk]), {"text": "changed"}),
        (reverse("note_edit", args=["default", s.key, note.pk]), {"delete": "1"}),
        (reverse("tags_set", args=["default", s.key]), {"tags": "anonymous"}),
        (reverse("bulk_tags"), {"session": [str(s.pk)], "tag": "anonymous", "action": "add"}),
        (reverse("compare_ticked"), {"session": [str(s.pk), str(s.pk)]}),
        (reverse("review_add", args=["default", s.key]), {"verdict": "problem"}),
        (reverse("reveal", args=["default", s.key]), {"viewer": "viewer"}),
        (reverse("pinned_facts", args=["default", s.key]), {"pinned": "order id: /W[0-9]{7}/"}),
        (reverse("project_settings", args=["default"]), {"enabled": "1"}),
        (reverse("queues"), {"project": "default", "name": "anonymous queue"}),
        (reverse("queue_next", args=[1]), {}),
        (reverse("api_keys"), {"project": "default", "name": "anonymous key"}),
        (reverse("api_key_revoke", args=[api_key.pk]), {}),
        (reverse("members", args=["default"]), {"username": "viewer", "role": "admin"}),
        (reverse("members", args=["default"]), {"username": "viewer", "remove": "1"}),
        ("/import/", {"project": "default", "format": "auto"}),
        (reverse("import_job_retry", args=[ImportJob.objects.get().pk]), {}),
        (reverse("panel_state"), {"panel": "chart", "open": "1"}),
    ]


@pytest.fixture
def things(story, viewer_user, project):
    from sessions.ingest.next_request import build_request
    from sessions.store.notes import add_note

    note = add_note(story.session, viewer_user, "a note", story.result)
    ImportJob.objects.create(project=project, file_name="stopped.jsonl", state="failed", stored_name="x.upload")
    api_key, _ = create_api_key(project, "app")
    request_event = build_request(project, story.session.key, messages=[
        {"role": "user", "content": "not stored", "persist": False}]).event
    return note, api_key, request_event


def _state():
    return {
        "events": Event.objects.count(),
        "messages": list(Message.objects.order_by("pk").values_list("pk", "include_in_messages")),
        "notes": list(Note.objects.order_by("pk").values_list("pk", "text")),
        "keys": list(ApiKey.objects.order_by("pk").values_list("pk", "revoked_at")),
        "members": list(Membership.objects.order_by("pk").values_list("user__username", "role")),
    }


def assert_sent_to_login(response, url):
    assert response.status_code == 302, (url, response.status_code)
    location = urlsplit(response["Location"])
    assert location.path == "/login/", (url, response["Location"])
    assert "next=" in location.query, response["Location"]


def test_every_page_and_fragment_redirects_an_anonymous_visitor_to_login(anonymous_client, story, things):
    note, api_key, request_event = things
    for url in _pages(story, note, api_key, request_event):
        assert_sent_to_login(anonymous_client.get(url), url)


def test_htmx_fragments_also_redirect_an_anonymous_visitor_to_login(anonymous_client, story, things):
    s = story.session
    for url, target in [
        (reverse("sessions"), "session-rows"),
        (reverse("search") + "?q=taxi", "search-results"),
        (session_url(s, "live/", after=1), "live-poller"),
    ]:
        response = anonymous_client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET=target)
        assert response.status_code in (302, 401, 403), (url, response.status_code)
        if response.status_code == 302:
            assert urlsplit(response["Location"]).path == "/login/"
        assert b"<article" not in response.content and b"<tr>" not in response.content


def test_every_action_redirects_an_anonymous_visitor_to_login_and_changes_nothing(anonymous_client, story, things):
    note, api_key, _ = things
    before = _state()
    for url, data in _actions(story, note, api_key):
        assert_sent_to_login(anonymous_client.post(url, data), url)
    assert _state() == before


def test_the_lists_above_cover_every_dashboard_url(story, things):
    """A new dashboard view must be added here, so that its login requirement is tested."""
    note, api_key, request_event = things
    tested = {resolve(urlsplit(url).path).url_name for url in _pages(story, note, api_key, request_event)}
    tested |= {resolve(url).url_name for url, _ in _actions(story, note, api_key)}
    dashboard = {p.name for p in get_resolver("sessions.urls").url_patterns if getattr(p, "name", None)}
    assert dashboard - tested == set()


def test_the_login_page_itself_is_open(anonymous_client):
    response = anonymous_client.get("/login/")
    assert response.status_code == 200
    assert b'name="password"' in response.content
