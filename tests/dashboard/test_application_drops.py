"""The session page of a session rebuilt from recorded requests: the raw log marks what the application
itself dropped or replaced with its own summary, with the explain sentence, like every other reason."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sessions.ingest.importers import import_path
from sessions.ingest.recorded_requests import CapturedRequest, record_requests
from sessions.models import Session

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
    assert "code-dropped_by_application" in article(viewer_client, session, 9).classes
    carried = article(viewer_client, session, 13)
    assert "code-in_input" in carried.classes
    assert "the application's request 8 sent it as message 12 of 12" in carried.one(cls="explain").text()


def test_a_message_replaced_by_the_application_s_summary_is_marked(viewer_client, project):
    first = [user("plan a trip to <b>Oslo</b>")]
    second = [*first, assistant("Booked."), user("and a hotel?")]
    requests = [
        CapturedRequest("app", "r1", "otlp", T0, first, [assistant("Booked.")]),
        CapturedRequest("app", "r2", "otlp", T0 + timedelta(seconds=1), second, [assistant("The Grand.")]),
        CapturedRequest("app", "r3", "otlp", T0 + timedelta(seconds=2),
                        [user("Summary: a trip to Oslo is booked."), assistant("The Grand."), user("and a car?")],
                        [assistant("Done.")]),
    ]
    assert record_requests(project, requests).rejected == []
    session = Session.objects.get(key="app")
    replaced = article(viewer_client, session, 1)
    assert "code-replaced_by_application_summary" in replaced.classes
    assert "replaced by the application's summary · request 3" in replaced.one(cls="app-replaced").text()
    assert "its message 1" in replaced.one(cls="explain").text()


def test_the_model_input_column_shows_what_the_application_sent_and_says_so(viewer_client, project, story):
    import_path(project, LOG)
    session = Session.objects.get(key="interactions_20251103_025309")
    page = parse(viewer_client.get(session_url(session)))
    note = page.one(cls="basis-note")
    assert note.attrs["data-basis"] == "recorded_request"
    assert "What the application sent." in note.text() and "Request 8 of 8" in note.text()
    link = note.find_all("a")[0]
    assert link.attrs["href"] == session_url(session) + "recorded/8/"
    assert viewer_client.get(link.attrs["href"]).status_code == 200
    # The column holds request 8's twelve messages, not the messages it dropped (its response, #14, is a
    # tool call awaiting its result: left out until it comes).
    shown = [a.attrs.get("data-seq") for a in page.one(id="input-items").find_all("article")]
    assert shown == [None, "1", "2", "3", "4", "5", "6", "7", "10", "11", "12", "13"]
    # What ctxweb would build by its own rules is one link away, labelled as such.
    switch = note.one(cls="basis-switch")
    other = parse(viewer_client.get(switch.attrs["href"]))
    assert other.one(cls="basis-note").attrs["data-basis"] == "raw_log"
    assert "Not what the application sent" in other.one(cls="basis-note").text()
    # Sessions written through the API are built by ctxweb, and say that alone.
    assert b"basis-note\"" not in viewer_client.get(session_url(story.session)).content
    assert b"Built by ctxweb from the raw log" in viewer_client.get(session_url(story.session)).content


def test_threads_of_one_trace_link_to_each_other(viewer_client, project):
    system_a, system_b = {"role": "system", "content": "Find the root cause."}, {"role": "system", "content": "Patch it."}
    requests = [
        CapturedRequest("trace-9", "a1", "otlp", T0, [system_a, user("Why does login fail?")], [assistant("The token.")]),
        CapturedRequest("trace-9", "b1", "otlp", T0 + timedelta(seconds=1), [system_b, user("Invert the check.")],
                        [assistant("Patched.")]),
    ]
    assert record_requests(project, requests).sessions == ["trace-9", "trace-9:2"]
    first, second = Session.objects.get(key="trace-9"), Session.objects.get(key="trace-9:2")
    links = parse(viewer_client.get(session_url(first))).one(cls="threads")
    assert [a.attrs["href"] for a in links.find_all("a")] == [session_url(second)]
    back = parse(viewer_client.get(session_url(second))).one(cls="threads")
    assert "A thread of its own in the requests of trace-9" in back.text()
    assert [a.attrs["href"] for a in back.find_all("a")] == [session_url(first)]
