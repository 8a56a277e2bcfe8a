"""The request view: for each REQUEST_BUILT, what that request contained, with the
request's unpersisted messages counted but never shown (their content was not stored)."""

from django.urls import reverse

from sessions.ingest.next_request import build_request
from sessions.models import Event, EventType
from sessions.wire.tokens import count_message

from .dom import parse

SECRET = "my card number is 4111 1111 1111 1111"


def request_url(story, event_id):
    return reverse("request_view", args=[story.session.project.name, story.session.key, event_id])


def build(story, project):
    built = build_request(project, story.session.key, messages=[
        {"role": "user", "content": "Persisted follow-up question."},
        {"role": "user", "content": SECRET, "persist": False},
    ], actor="app")
    return built


def test_the_request_view_shows_what_the_request_sent(viewer_client, story, project):
    built = build(story, project)
    response = viewer_client.get(request_url(story, built.event.pk))
    assert response.status_code == 200
    doc = parse(response)
    text = doc.one("section", cls="session-head").text()
    data = built.event.data
    assert f"{data['tokens']} tokens in openai format" in text
    assert built.model_input.tokens == data["tokens"]
    column = doc.one("section", cls="request-entries")
    summary = column.one("article", cls="summary")
    assert f"checkpoint {story.second.number}" in summary.text()
    sent = [e.seq for e in built.model_input.message_entries]
    shown = [int(a.one("a", cls="permalink").text().lstrip("#")) for a in column.find_all("article", cls="entry")
             if a.find("a", cls="permalink")]
    assert shown == sent
    assert "Persisted follow-up question." in column.text()


def test_the_unpersisted_message_is_counted_but_its_content_is_not_shown(viewer_client, story, project):
    built = build(story, project)
    response = viewer_client.get(request_url(story, built.event.pk))
    assert SECRET.encode() not in response.content
    tokens = count_message("user", SECRET).total
    unpersisted = parse(response).one(cls="unpersisted")
    assert f"1 unpersisted message ({tokens} tokens)" in unpersisted.text()


def test_the_request_view_lists_what_was_left_out_for_validity(viewer_client, story, project):
    built = build(story, project)
    text = parse(viewer_client.get(request_url(story, built.event.pk))).one("ul", cls="figures").text()
    assert f"#{story.orphan} orphan_tool_result" in text
    assert f"#{story.dropped} dropped_tool_call" in text


def test_the_session_page_links_each_request_to_its_view(viewer_client, story, project):
    built = build(story, project)
    links = [a.get("href") for a in parse(viewer_client.get(story.url())).one(id="events").find_all("a")]
    assert request_url(story, built.event.pk) in links


def test_an_event_that_is_not_a_request_is_404(viewer_client, story):
    event = Event.objects.filter(session=story.session).exclude(type=EventType.REQUEST_BUILT).first()
    assert viewer_client.get(request_url(story, event.pk)).status_code == 404
    assert viewer_client.get(request_url(story, 999_999)).status_code == 404


def test_a_request_of_another_session_is_404_here(viewer_client, story, project):
    built = build_request(project, "another", messages=[{"role": "user", "content": "hi"}])
    assert viewer_client.get(request_url(story, built.event.pk)).status_code == 404


def test_an_outsider_gets_404(outsider_client, story, project):
    built = build(story, project)
    assert outsider_client.get(request_url(story, built.event.pk)).status_code == 404
