"""The session page of a session rebuilt from recorded requests: the raw log marks what the application
itself dropped or replaced with its own summary, with the explain sentence, like every other reason."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sessions.importers import import_path
from sessions.models import Session
from sessions.recorded_requests import CapturedRequest, record_requests

from .conftest import session_url
from .dom import parse

pytestmark = pytest.mark.django_db

LOG = Path(__file__).resolve().parent.parent / "data" / "request-logs" / "interactions_20251103_025309.jsonl"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def article(client, session, seq):
    response = client.get(session_url(session))
    assert response.status_code == 200
    return parse(response).one("article", id=f"m-{seq}")


def test_a_message_the_real_application_dropped_is_marked_with_its_requests(viewer_client, project):
    import_path(project, LOG)
    session = Session.objects.get(key="interactions_20251103_025309")
    dropped = article(viewer_client, session, 8)
    assert "code-dropped_by_application" in dropped.classes
    assert "dropped by the application · request 7" in dropped.one(cls="app-dropped").text()
    sentence = dropped.one(cls="explain").text()
    assert "dropped_by_application" in sentence
    assert "Last sent in request 6; request 7 was the first without it" in sentence
    carried = article(viewer_client, session, 9)
    assert "code-in_input" in carried.classes
    assert "the application's latest request (request 8)" in carried.one(cls="explain").text()


def test_a_message_replaced_by_the_application_s_summary_is_marked(viewer_client, project):
    requests = [
        CapturedRequest("app", "r1", "otlp", T0, [user("plan a trip to <b>Oslo</b>")], [assistant("Booked.")]),
        CapturedRequest("app", "r2", "otlp", T0 + timedelta(seconds=1),
                        [user("Summary: a trip to Oslo is booked."), user("and a hotel?")], [assistant("Done.")]),
    ]
    assert record_requests(project, requests).rejected == []
    session = Session.objects.get(key="app")
    replaced = article(viewer_client, session, 1)
    assert "code-replaced_by_application_summary" in replaced.classes
    assert "replaced by the application's summary · request 2" in replaced.one(cls="app-replaced").text()
    assert "its message 1" in replaced.one(cls="explain").text()


def test_the_model_input_column_says_what_the_model_saw_last(viewer_client, project, story):
    import_path(project, LOG)
    session = Session.objects.get(key="interactions_20251103_025309")
    note = parse(viewer_client.get(session_url(session))).one(cls="rebuilt-note")
    assert "rebuilt from the 8 requests the application sent" in note.text()
    assert note.one("a").attrs["href"] == session_url(session) + "recorded/8/"
    assert viewer_client.get(note.one("a").attrs["href"]).status_code == 200
    # Sessions written through the API have no such note.
    assert b"rebuilt-note" not in viewer_client.get(session_url(story.session)).content
