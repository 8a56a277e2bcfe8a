"""Tagging several sessions at once from the sessions list: for those who may annotate every session
ticked, all or nothing, one TAGS_CHANGED event per session changed, as single tagging records."""

import pytest
from django.urls import reverse

from sessions.ingest.append import append_messages
from sessions.models import Event, Session
from sessions.store.notes import set_tags, tag_names

from .conftest import HOST, make_client
from .dom import parse

BULK = reverse("bulk_tags")
LIST = reverse("sessions")


@pytest.fixture
def three(project):
    for key in ("one", "two", "three"):
        append_messages(project, key, [{"role": "user", "content": f"hello from {key}"}], "test")
    return {s.key: s for s in Session.objects.filter(project=project)}


def post(client, sessions, tag, action="add", **extra):
    return client.post(BULK, {"session": [str(s.pk) for s in sessions], "tag": tag, "action": action}, **extra)


def tags_of(session):
    return tag_names(Session.objects.get(pk=session.pk))


def test_a_viewer_adds_a_tag_to_two_sessions_at_once(viewer_client, three):
    response = post(viewer_client, [three["one"], three["two"]], "Needs-Review", HTTP_REFERER=f"http://{HOST}{LIST}?q=o&sort=tokens")

    assert response.status_code == 302
    assert response["Location"] == f"{LIST}?q=o&sort=tokens"  # back to the list as it was filtered
    assert tags_of(three["one"]) == tags_of(three["two"]) == ["needs-review"]
    assert tags_of(three["three"]) == []
    events = Event.objects.filter(type="TAGS_CHANGED").order_by("session_id")
    assert [(e.session_id, e.actor, e.data["added"]) for e in events] == [
        (three["one"].pk, "user:viewer", ["needs-review"]), (three["two"].pk, "user:viewer", ["needs-review"])]
    page = parse(viewer_client.get(response["Location"]))
    assert "added to 2 sessions" in page.one(cls="flash").text()


def test_removing_a_tag_keeps_the_other_tags_and_skips_sessions_without_it(viewer_client, viewer_user, three):
    set_tags(three["one"], viewer_user, ["bug", "vip"])
    set_tags(three["two"], viewer_user, ["vip"])
    before = Event.objects.count()

    post(viewer_client, [three["one"], three["two"], three["three"]], "vip", "remove")

    assert (tags_of(three["one"]), tags_of(three["two"]), tags_of(three["three"])) == (["bug"], [], [])
    assert Event.objects.count() == before + 2  # the session that lacked it did not change
    flash = parse(viewer_client.get(LIST)).one(cls="flash").text()
    assert "removed from 2 sessions (1 already lacked it)" in flash


def test_adding_a_tag_a_session_already_has_records_nothing_for_it(viewer_client, viewer_user, three):
    set_tags(three["one"], viewer_user, ["vip"])
    before = Event.objects.count()
    post(viewer_client, [three["one"], three["two"]], "vip")
    assert tags_of(three["two"]) == ["vip"]
    assert Event.objects.count() == before + 1


@pytest.mark.parametrize("tag", ["", "two words", "bad/slash", "x" * 51, "<script>"])
def test_a_bad_tag_name_changes_nothing_and_says_why(viewer_client, three, tag):
    response = post(viewer_client, [three["one"]], tag)
    assert response.status_code == 302
    assert tags_of(three["one"]) == [] and not Event.objects.filter(type="TAGS_CHANGED").exists()
    flash = parse(viewer_client.get(LIST)).one(cls="flash")
    assert "tag" in flash.text().lower()


def test_no_session_ticked_changes_nothing(viewer_client, three):
    response = viewer_client.post(BULK, {"tag": "vip", "action": "add"})
    assert response.status_code == 302
    assert "Tick the sessions" in parse(viewer_client.get(LIST)).one(cls="flash").text()
    assert not Event.objects.filter(type="TAGS_CHANGED").exists()


@pytest.mark.parametrize("data", [
    {"session": ["1"], "tag": "vip"},  # no action
    {"session": ["1"], "tag": "vip", "action": "delete-all"},
    {"session": ["abc"], "tag": "vip", "action": "add"},
    {"session": ["-1"], "tag": "vip", "action": "add"},
])
def test_a_malformed_request_is_a_400(viewer_client, three, data):
    assert viewer_client.post(BULK, data).status_code == 400
    assert not Event.objects.filter(type="TAGS_CHANGED").exists()


def test_a_session_of_another_project_makes_it_a_404_and_tags_none_of_them(viewer_client, three, other_project):
    append_messages(other_project, "theirs", [{"role": "user", "content": "hi"}], "test")
    theirs = Session.objects.get(project=other_project)

    response = post(viewer_client, [three["one"], theirs], "vip")

    assert response.status_code == 404
    assert tags_of(three["one"]) == [] and tags_of(theirs) == []
    assert post(viewer_client, [three["one"]], "vip", HTTP_REFERER="").status_code == 302  # alone it is fine


def test_a_role_that_may_not_annotate_gets_403_and_nothing_changes(viewer_client, three, monkeypatch):
    from sessions.access import permissions as access

    monkeypatch.setitem(access.ACTIONS, "annotate", access.Role.EDITOR)
    assert post(viewer_client, [three["one"]], "vip").status_code == 403
    assert tags_of(three["one"]) == []
    rows = parse(viewer_client.get(LIST))
    assert rows.find("form", id="bulk-tags") is None and rows.find("input", cls="pick") is None


def test_it_needs_a_login_post_and_csrf(anonymous_client, viewer_user, viewer_client, three):
    assert post(anonymous_client, [three["one"]], "vip").status_code == 302
    assert viewer_client.get(BULK).status_code == 405
    strict = make_client(viewer_user, enforce_csrf_checks=True)
    assert post(strict, [three["one"]], "vip").status_code == 403
    assert tags_of(three["one"]) == []


def test_a_referer_elsewhere_sends_back_to_the_plain_list(viewer_client, three):
    for referer in ("https://evil.example/?q=1", f"http://{HOST}/search/?q=x", "javascript:alert(1)"):
        response = post(viewer_client, [three["one"]], "vip", HTTP_REFERER=referer)
        assert response["Location"] == LIST


def test_the_list_has_a_checkbox_per_session_and_the_bulk_form_for_those_who_may_annotate(viewer_client, three):
    response = viewer_client.get(LIST)
    assert "{#" not in response.content.decode()
    page = parse(response)
    form = page.one("form", id="bulk-tags")
    assert form.get("method") == "post" and form.get("action") == BULK
    assert {b.get("value") for b in form.find_all("button", name="action")} == {"add", "remove"}
    assert form.one("button", cls="compare-ticked").get("formaction") == "/compare/ticked/"
    boxes = page.one(id="session-rows").find_all("input", cls="pick")
    assert sorted(int(b.get("value")) for b in boxes) == sorted(s.pk for s in three.values())
    assert all(b.get("form") == "bulk-tags" and b.get("aria-label", "").startswith("select ") for b in boxes)
