"""A NUL character anywhere a dashboard request carries text is a 400 and changes nothing: PostgreSQL
text cannot hold one, so it must never reach a query (found by the stateful API fuzzing, which had the
same hole in the API's search and event filter)."""

import pytest
from django.urls import reverse

from sessions.models import Event, Note

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("query", [
    "?q=a%00b", "?tag=a%00b", "?project=a%00b", "?sort=a%00b", "?a%00b=1", "?from=2026-01-01%00",
])
def test_a_nul_in_the_sessions_list_query_is_a_400(viewer_client, story, query):
    response = viewer_client.get(reverse("sessions") + query)
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_a_nul_in_a_search_is_a_400(viewer_client, story):
    assert viewer_client.get(reverse("search") + "?q=gate%00").status_code == 400


def test_a_nul_in_a_session_page_query_is_a_400(viewer_client, story):
    assert viewer_client.get(story.url() + "?seq=1%00").status_code == 400


def test_a_nul_in_a_submitted_form_is_a_400_and_stores_nothing(viewer_client, story):
    events = Event.objects.count()
    response = viewer_client.post(reverse("note_add", args=["default", story.session.key]),
                                  {"text": "gate\x00info", "seq": "1"})
    assert response.status_code == 400
    assert Note.objects.count() == 0 and Event.objects.count() == events


def test_text_without_nul_still_works(viewer_client, story):
    assert viewer_client.get(reverse("sessions") + "?q=gate").status_code == 200
    assert viewer_client.get(reverse("search") + "?q=gate").status_code == 200
