"""Personal data masked for viewers (issue 40, items 6-7; sessions/access/masking_policy.py and the
PersonalDataMasking middleware): a project that masks shows its viewers every page, fragment, search
result and download with e-mail addresses, phone numbers, cards, IBANs, secrets and IPs masked; editors
see the real text and may reveal one session to one viewer, recorded as an event; a viewer's search never
matches inside a masked value."""

import json

import pytest
from django.urls import reverse
from django.utils import timezone

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.ingest.next_request import build_request
from sessions.ingest.recorded_requests import CapturedRequest, record_requests
from sessions.ingest.session_store import update_session
from sessions.models import Event, MaskingReveal, Session
from sessions.store.notes import add_note
from sessions.store.project_settings import set_masking
from sessions.store.review_queues import create_queue
from sessions.store.reviews import add_review

from .dom import parse

pytestmark = pytest.mark.django_db

EMAIL, PHONE, CARD = "mia.li@example.com", "+44 20 7946 0958", "4111 1111 1111 1111"
IBAN, SECRET, IP = "DE89 3704 0044 0532 0130 00", "sk-proj-Abcdef1234567890XYZabcdef1234", "203.0.113.42"
MEMBER = "M-12345678"
VALUES = (EMAIL, PHONE, CARD, IBAN, SECRET, IP, MEMBER)


@pytest.fixture
def stored(project, editor_user):
    append_messages(project, "pii", [
        {"role": "user", "content": f"I am {EMAIL}, call me on {PHONE}. Member {MEMBER}."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "name": "charge", "arguments": json.dumps({"card": CARD, "iban": IBAN})}]},
        {"role": "tool", "tool_call_id": "c1", "content": f"charged from {IP} with key {SECRET}"},
        {"role": "assistant", "content": "Your refund is on its way."},
        {"role": "user", "content": "When will it arrive?"},
        {"role": "assistant", "content": "Within five working days."},
    ], "test")
    update_session(project, "pii", {"metadata": {"customer": EMAIL}, "title": f"Refund for {EMAIL}"})
    session = Session.objects.get(project=project, key="pii")
    add_note(session, editor_user, f"Customer phone {PHONE}", 1)
    add_review(session, editor_user, "problem", comment=f"Asked for the card {CARD} in clear.")
    outcome = compact(session, force=True, max_tokens=100_000, keep_recent_tokens=1,
                      summary=f"The customer {EMAIL} was refunded to the card {CARD}.")
    assert outcome.checkpoint is not None and EMAIL in outcome.checkpoint.summary  # the summary holds it too
    queue = create_queue(project, editor_user, "everything", "")
    add_review(session, editor_user, "ok", comment=f"Mailed {EMAIL}", queue=queue)
    event = build_request(project, "pii", messages=[
        {"role": "user", "content": f"Not stored: {PHONE}", "persist": False}]).event
    record_requests(project, [CapturedRequest(
        conversation="pii-spans", external_id=f"s{n}", source="otlp", started_at=timezone.now(),
        messages=[{"role": "user", "content": f"I am {EMAIL}, card {CARD}"}] * n,
        response=[{"role": "assistant", "content": f"Noted {MEMBER}."}]) for n in (1, 2)])
    set_masking(project, {"enabled": True, "patterns": [{"name": "member-id", "pattern": r"M-[0-9]{8}"}]})
    session.refresh_from_db()
    session.queue_id, session.checkpoint_id, session.request_event = queue.pk, outcome.checkpoint.pk, event.pk
    return session


def pages(session) -> list[str]:
    url = session.get_absolute_url()
    return [url, url + "log/?before=5", url + "input/", url + "messages/3/", url + "events/",
            url + f"checkpoints/{session.checkpoint_id}/", url + "?as_of=2", url + "what-if/?keep_recent_tokens=0&force=1",
            reverse("queue", args=[session.queue_id]), reverse("queues"),
            url + f"requests/{session.request_event}/",
            reverse("recorded_request_diff", args=["default", "pii-spans", 2]),
            reverse("session", args=["default", "pii-spans"]),
            reverse("compare") + "?project=default&a=pii-spans&b=pii-spans&a_request=1&b_request=2",
            reverse("sessions"), reverse("sessions") + "?q=refund",
            reverse("search") + "?q=refund", reverse("search") + "?q=phone",
            reverse("compare") + f"?project=default&a={session.key}&b={session.key}"]


def downloads(session) -> list[str]:
    return [session.get_absolute_url() + f"export.{fmt}" for fmt in ("json", "jsonl", "markdown")]


def body(response) -> str:
    assert response.status_code == 200, response.status_code
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode()


def test_a_viewer_sees_every_page_fragment_and_download_masked(viewer_client, stored):
    for url in pages(stored) + downloads(stored) + [reverse("queue_csv", args=[stored.queue_id])]:
        response = viewer_client.get(url)
        text = body(response)
        leaked = [value for value in VALUES if value in text]
        assert not leaked, (url, leaked)
        assert response["X-Personal-Data"] == "masked", url
    page = body(viewer_client.get(stored.get_absolute_url()))
    for label in ("[email]", "[phone]", "[card •••• 1111]", "[iban]", "[secret]", "[ip]", "[member-id]"):
        assert label in page, label
    trace = viewer_client.get(stored.get_absolute_url() + "trace/?q=refund", HTTP_HX_REQUEST="true",
                              HTTP_HX_TARGET="trace-result")
    assert not [value for value in VALUES if value in body(trace)]
    # The downloads are still what they say: JSON, JSON Lines.
    json.loads(body(viewer_client.get(downloads(stored)[0])))
    for line in body(viewer_client.get(downloads(stored)[1])).splitlines():
        json.loads(line)


def test_editors_see_the_real_text(editor_client, stored):
    page = body(editor_client.get(stored.get_absolute_url()))
    assert all(value in page or json.dumps(value)[1:-1] in page for value in (EMAIL, PHONE, MEMBER, IP))
    assert not editor_client.get(stored.get_absolute_url()).has_header("X-Personal-Data")


def test_without_masking_viewers_see_the_real_text(viewer_client, stored, project):
    set_masking(project, {"enabled": False})
    assert EMAIL in body(viewer_client.get(stored.get_absolute_url()))


def test_an_editor_reveals_one_session_to_one_viewer_and_it_is_recorded(editor_client, viewer_client, viewer_user,
                                                                         editor_user, stored, project):
    append_messages(project, "other", [{"role": "user", "content": f"Write to {EMAIL}"}], "test")
    form = parse(editor_client.get(stored.get_absolute_url())).one("form", cls="reveal-form")
    assert [o.text() for o in form.find_all("option")] == [viewer_user.username]
    response = editor_client.post(reverse("reveal", args=["default", "pii"]), {"viewer": viewer_user.username})
    assert response.status_code == 302
    assert MaskingReveal.objects.filter(session=stored, user=viewer_user, revealed_by=editor_user).exists()
    event = Event.objects.get(session=stored, type="MASKING_REVEALED")
    assert (event.actor, event.data) == (f"user:{editor_user.username}", {"viewer": viewer_user.username})
    assert EMAIL in body(viewer_client.get(stored.get_absolute_url()))
    # Only that session: the other one, and the pages of several sessions, stay masked.
    assert EMAIL not in body(viewer_client.get(Session.objects.get(key="other").get_absolute_url()))
    assert EMAIL not in body(viewer_client.get(reverse("sessions")))
    # Viewers may not reveal; a user who is no viewer cannot be revealed to.
    assert viewer_client.post(reverse("reveal", args=["default", "pii"]), {"viewer": viewer_user.username}).status_code == 403
    editor_client.post(reverse("reveal", args=["default", "pii"]), {"viewer": editor_user.username})
    assert MaskingReveal.objects.count() == 1


@pytest.mark.parametrize("query", [EMAIL, "example.com", "mia.li", "4111", "7946"])
def test_a_viewers_search_never_matches_inside_a_masked_value(viewer_client, editor_client, stored, query):
    found = parse(editor_client.get(reverse("search") + f"?q={query}")).find_all("li", cls="hit")
    hidden = parse(viewer_client.get(reverse("search") + f"?q={query}")).find_all("li", cls="hit")
    assert found, query  # the editor finds it: the value is there
    assert hidden == [], query


def test_a_viewer_finds_words_outside_masked_values(viewer_client, stored):
    hits = parse(viewer_client.get(reverse("search") + "?q=refund")).find_all("li", cls="hit")
    assert hits


def test_the_list_finds_nothing_by_personal_data_for_a_viewer(viewer_client, editor_client, stored):
    def keys(client, q):
        return [a.text() for a in parse(client.get(reverse("sessions") + f"?q={q}")).find_all("a", cls="key")]
    assert set(keys(editor_client, EMAIL)) == {"pii", "pii-spans"}
    assert keys(viewer_client, EMAIL) == []
    assert "pii" in keys(viewer_client, "refund")


def test_admins_turn_masking_on_and_set_patterns_on_the_settings_page(admin_client, viewer_client, project):
    url = reverse("project_settings", args=["default"])
    assert admin_client.get(url).status_code == 200
    response = admin_client.post(url, {"enabled": "1", "patterns": "member-id: M-[0-9]{8}\nticket: T[0-9]{5}"})
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.masking == {"enabled": True, "patterns": [{"name": "member-id", "pattern": "M-[0-9]{8}"},
                                                             {"name": "ticket", "pattern": "T[0-9]{5}"}],
                               "at_capture": False}
    bad = admin_client.post(url, {"enabled": "", "patterns": "broken: (a"}, follow=True)
    assert "Not saved" in parse(bad).text()
    project.refresh_from_db()
    assert project.masking["enabled"] is True  # unchanged
    assert viewer_client.get(url).status_code == 403


def test_a_viewer_cannot_trace_personal_data(viewer_client, editor_client, stored):
    url = stored.get_absolute_url() + f"?trace={EMAIL}"
    assert "personal data, which is masked for you" in parse(viewer_client.get(url)).text()
    assert "personal data, which is masked for you" not in parse(editor_client.get(url)).text()
