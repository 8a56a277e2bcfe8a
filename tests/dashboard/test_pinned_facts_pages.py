"""Pinned facts in the dashboard (issue 41, item 1): editors set a session's on its page, admins the
project's on its Settings page; both are shown with the session's settings, and a bad one is refused with
nothing saved."""

import pytest
from django.urls import reverse

from sessions.ingest.append import append_messages
from sessions.models import Project, Session

from .dom import parse

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(project):
    append_messages(project, "chat", [{"role": "user", "content": "My order is W2378156."}], "test")
    return Session.objects.get(key="chat")


def test_an_editor_pins_facts_on_the_session_page(editor_client, viewer_client, chat):
    url = reverse("pinned_facts", args=["default", "chat"])
    response = editor_client.post(url, {"pinned": "order id: /W[0-9]{7}/\nconstraint: no peanuts\n"})
    assert response.status_code == 302 and response["Location"].endswith("#pinned-facts")
    chat.refresh_from_db()
    assert chat.pinned_facts == [{"name": "order id", "pattern": "W[0-9]{7}"},
                                 {"name": "constraint", "value": "no peanuts"}]
    page = parse(editor_client.get(chat.get_absolute_url()))
    section = page.one("section", id="pinned-facts")
    assert [li.one("strong").text() for li in section.find_all("li")] == ["order id", "constraint"]
    assert [li.one("code").text() for li in section.find_all("li")] == ["/W[0-9]{7}/", "no peanuts"]
    assert page.one(id="session-stats").text().count("2 facts") == 1
    assert section.one("textarea").text().split() == "order id: /W[0-9]{7}/ constraint: no peanuts".split()
    # A viewer sees them, without the form, and may not change them.
    viewer_page = parse(viewer_client.get(chat.get_absolute_url())).one("section", id="pinned-facts")
    assert len(viewer_page.find_all("li")) == 2 and not viewer_page.find_all("form")
    assert viewer_client.post(url, {"pinned": ""}).status_code == 403


def test_a_bad_pinned_fact_is_refused_and_nothing_is_saved(editor_client, chat):
    response = editor_client.post(reverse("pinned_facts", args=["default", "chat"]),
                                  {"pinned": "good: /W[0-9]{7}/\nbad: /(?=x)x/"}, follow=True)
    assert "Not saved" in parse(response).text() and "RE2" in parse(response).text()
    chat.refresh_from_db()
    assert chat.pinned_facts == []


def test_admins_pin_facts_for_the_whole_project(admin_client, chat, project):
    url = reverse("project_settings", args=["default"])
    admin_client.post(url, {"pinned": "order id: /#?W[0-9]{7}/", "patterns": ""})
    project.refresh_from_db()
    assert project.pinned_facts == [{"name": "order id", "pattern": "#?W[0-9]{7}"}]
    assert "the project's" in parse(admin_client.get(chat.get_absolute_url())).one("section", id="pinned-facts").text()
    admin_client.post(url, {"pinned": "empty: /a*/", "patterns": "", "enabled": "1"})
    assert Project.objects.get(pk=project.pk).pinned_facts == [{"name": "order id", "pattern": "#?W[0-9]{7}"}]
    assert Project.objects.get(pk=project.pk).masking.get("enabled") is not True  # nothing of the refused form
