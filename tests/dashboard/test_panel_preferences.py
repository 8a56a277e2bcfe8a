"""The session page's fold bar remembers, per user, which panels were left open
(sessions/dashboard/preferences.py): a toggle is stored, anything else is refused with 400 and stores
nothing, and the page renders the stored state."""

import pytest
from django.urls import reverse

from sessions.models import DashboardPreferences

from .dom import parse

URL = reverse("panel_state")


@pytest.fixture
def page_url(project):
    from sessions.ingest.append import append_messages

    append_messages(project, "folds", [{"role": "user", "content": "hello"}], "test")
    return reverse("session", args=[project.name, "folds"])


def opened(client, url) -> set[str]:
    bar = parse(client.get(url)).one(id="fold-bar")
    return {d.attrs["data-fold"] for d in bar.find_all("details") if "open" in d.attrs}


def test_a_toggle_is_remembered_for_the_user_and_shown_open(viewer_client, editor_client, page_url):
    assert opened(viewer_client, page_url) == set()
    assert viewer_client.post(URL, {"panel": "chart", "open": "1"}).status_code == 204
    assert viewer_client.post(URL, {"panel": "trace", "open": "1"}).status_code == 204
    assert opened(viewer_client, page_url) == {"chart", "trace"}
    assert opened(editor_client, page_url) == set()  # another user's page is as it was
    assert viewer_client.post(URL, {"panel": "chart", "open": "0"}).status_code == 204
    assert opened(viewer_client, page_url) == {"trace"}


@pytest.mark.parametrize("data", [
    {"panel": "everything", "open": "1"}, {"panel": "chart", "open": "yes"}, {"panel": "chart"}, {"open": "1"},
    {"panel": ["chart", "trace"], "open": "1"}, {"panel": "chart\x00", "open": "1"},
])
def test_anything_else_is_refused_and_stores_nothing(viewer_client, data):
    response = viewer_client.post(URL, data)
    assert response.status_code == 400  # NUL is refused before the view, by the request checks
    assert not DashboardPreferences.objects.exists()


def test_a_visitor_who_is_not_logged_in_is_sent_to_log_in(client, db):
    response = client.post(URL, {"panel": "chart", "open": "1"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not DashboardPreferences.objects.exists()
