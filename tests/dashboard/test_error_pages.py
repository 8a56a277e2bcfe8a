"""With DEBUG off, 400, 403, 404 and 500 are pages of the site: its layout and navigation, and a
sentence saying what happened and what to do. Under /api/ errors stay the API's JSON."""

import json

import pytest
from django.test import RequestFactory, override_settings
from django.urls import reverse

from sessions.dashboard import error_pages, views

from .conftest import make_client
from .dom import parse

pytestmark = pytest.mark.usefixtures("production_errors")


@pytest.fixture
def production_errors():
    with override_settings(DEBUG=False):
        yield


def error_page(response, status: int):
    assert response.status_code == status, response.status_code
    assert response["Content-Type"].startswith("text/html")
    doc = parse(response)
    topbar = doc.one("header", cls="topbar")
    assert topbar.one("a", cls="brand").get("href") == "/"
    return doc, topbar


def nav_links(topbar) -> list[str]:
    return [a.text() for a in topbar.one("nav").find_all("a")]


def test_a_viewer_on_the_import_page_gets_the_403_page_in_the_layout(viewer_client, story):
    doc, topbar = error_page(viewer_client.get(reverse("import")), 403)
    assert nav_links(topbar)[:2] == ["Sessions", "Search"]
    assert "Your role in this project does not allow this; ask a project admin" in doc.one("main").text()
    assert "Your roles do not allow importing into any project." in doc.one("main").text()


def test_a_viewer_hiding_a_message_gets_the_403_page_with_the_reason(viewer_client, story):
    response = viewer_client.post(story.url(f"messages/{story.result}/include/"), {"include": "0"})
    doc, topbar = error_page(response, 403)
    assert "Sessions" in nav_links(topbar)
    assert "ask a project admin" in doc.one("main").text()
    assert "Your role in default does not allow this." in doc.one("main").text()


def test_a_missing_session_gets_the_404_page_in_the_layout(viewer_client, story):
    doc, topbar = error_page(viewer_client.get("/p/default/s/no-such-session/"), 404)
    assert nav_links(topbar)[:2] == ["Sessions", "Search"]
    main = doc.one("main").text()
    assert "No such page or session, or it is in a project you are not a member of" in main
    assert "No such session." in main


def test_a_session_of_a_project_one_is_not_in_gets_the_same_404(outsider_client, story):
    doc, _ = error_page(outsider_client.get(story.url()), 404)
    assert "it is in a project you are not a member of" in doc.one("main").text()
    assert story.session.title not in doc.one("main").text()


def test_an_unknown_address_gets_the_404_page_without_the_resolvers_internals(viewer_client):
    doc, topbar = error_page(viewer_client.get("/no/such/page/"), 404)
    assert "Sessions" in nav_links(topbar)
    main = doc.one("main").text()
    assert "No such page or session" in main
    assert "tried" not in main and "path" not in main


def test_a_bad_request_gets_the_400_page_in_the_layout_with_what_was_wrong(editor_client, story):
    response = editor_client.post(story.url(f"messages/{story.result}/include/"), {"include": "maybe"})
    doc, topbar = error_page(response, 400)
    assert "Sessions" in nav_links(topbar)
    main = doc.one("main").text()
    assert "The request could not be understood" in main
    assert "Say include=0" in main


def test_a_server_error_gets_the_500_page_styled_and_with_navigation(viewer_user, story, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(views, "list_page", broken)
    client = make_client(viewer_user, raise_request_exception=False)
    doc, topbar = error_page(client.get(reverse("sessions")), 500)
    assert nav_links(topbar) == ["Sessions", "Search", "API docs"]
    assert [link.get("href") for link in doc.find_all("link", rel="stylesheet")] == ["/static/ctxweb.css"]
    main = doc.one("main").text()
    assert "Something went wrong on the server; the error was logged" in main
    assert "the database went away" not in doc.one("html").text()


def test_someone_logged_out_gets_a_log_in_link_on_a_404(anonymous_client):
    doc, _ = error_page(anonymous_client.get("/no/such/page/"), 404)
    assert reverse("login") in [a.get("href") for a in doc.one("main").find_all("a")]


@pytest.mark.parametrize("path", ["/api/v1/sessions/nope/nothing", "/api/nothing-here", "/api/v1/no-such-endpoint"])
def test_a_404_under_the_api_is_still_json(viewer_client, path):
    response = viewer_client.get(path)
    assert response.status_code in (401, 404)
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] in ("not_found", "missing_api_key")


def test_an_unknown_api_endpoint_answers_the_apis_json_404(anonymous_client):
    response = anonymous_client.get("/api/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"detail": "No such API endpoint.", "code": "not_found"}


def test_the_error_handlers_answer_json_under_the_api():
    request = RequestFactory().get("/api/v1/sessions/x")
    for response, status, code in [
        (error_pages.bad_request(request), 400, "bad_request"),
        (error_pages.permission_denied(request), 403, "forbidden"),
        (error_pages.page_not_found(request), 404, "not_found"),
        (error_pages.server_error(request), 500, "internal_error"),
    ]:
        assert response.status_code == status
        assert response["Content-Type"] == "application/json"
        assert json.loads(response.content)["code"] == code
