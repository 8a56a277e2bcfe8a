"""Issue 17 on the server side: checkpoints named by their number in the session (not the global id),
badges and explanations that link to what they name, the go-to box, and the side rail's panels."""

import pytest
from django.urls import reverse

from sessions.ingest.message_edits import update_message

from .conftest import build_story
from .dom import parse

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_story(project):
    """The `story` session made after another one with two checkpoints, so its checkpoints' ids are 3
    and 4 while their numbers are 1 and 2."""
    build_story(project, "earlier")
    story = build_story(project)
    assert (story.first.number, story.second.number) == (1, 2)
    assert story.first.pk != 1
    return story


def page(client, story, **query):
    response = client.get(story.url(**query))
    assert response.status_code == 200
    return parse(response)


def test_badges_explanations_and_lists_say_the_number(viewer_client, second_story):
    story = second_story
    doc = page(viewer_client, story)
    covered = doc.one("article", id=f"m-{story.history_call}")
    badge = covered.one("a", cls="covered")
    assert badge.text() == "covered by checkpoint 1"
    assert badge.get("href") == "#input-summary" and badge.get("data-summary") == str(story.first.pk)
    explain = covered.one("div", cls="explain")
    assert "Covered by checkpoint 1 " in explain.text() and "now carried by checkpoint 2" in explain.text()
    diff_link = explain.one("a", href=reverse("checkpoint_diff", args=["default", "story", story.first.pk]))
    assert diff_link.text() == "what checkpoint 1 changed"
    assert explain.one("a", data_summary=str(story.first.pk)).get("href") == "#input-summary"
    # A covered tool result's explanation links to its call.
    result = doc.one("article", id=f"m-{story.history_result}").one("div", cls="explain")
    assert result.one("a", data_jump=str(story.history_call)).text() == f"its call in #{story.history_call}"

    summary = doc.one("article", id="input-summary")
    assert "checkpoint 2 summary" in summary.text()
    assert summary.one("button", cls="expand-summary").get("aria-expanded") == "false"
    checkpoints = doc.one("section", id="checkpoints-panel")
    assert [s.text() for s in checkpoints.find_all("strong")][:2] == ["Checkpoint 1", "Checkpoint 2"]
    assert "(extends checkpoint 1)" in checkpoints.text()
    options = [o.text() for o in doc.one("select", name="as_of_checkpoint").find_all("option")]
    assert options[1:] == [f"1 (created after #{story.first.created_at_seq})",
                           f"2 (created after #{story.second.created_at_seq})"]
    events = doc.one("section", id="events-panel").text()
    assert "diff of checkpoint 1" in events and "diff of checkpoint 2" in events
    assert f"diff of checkpoint {story.second.pk}" not in events
    # The rail's nav: real links to the panels, which are sections with headings.
    nav = doc.one("nav", cls="rail-nav")
    assert [a.get("href") for a in nav.find_all("a")] == ["#model-input-column", "#checkpoints-panel", "#events-panel"]


def test_as_of_banner_diff_title_and_export_say_the_number(viewer_client, second_story):
    story = second_story
    doc = page(viewer_client, story, as_of_checkpoint=story.second.pk)
    assert "built on checkpoint 2." in doc.one("p", cls="as-of-banner").text()
    diff = parse(viewer_client.get(reverse("checkpoint_diff", args=["default", "story", story.second.pk])))
    assert diff.one("h1").text() == "Compaction diff: checkpoint 2"
    assert "extends checkpoint 1" in diff.text()
    response = viewer_client.get(reverse("session_export", args=["default", "story", "markdown"]))
    assert response.status_code == 200
    markdown = b"".join(response.streaming_content if response.streaming else [response.content]).decode()
    assert "**Checkpoint 1**" in markdown and "**Checkpoint 2**" in markdown
    assert f"**Checkpoint {story.second.pk}**" not in markdown


def test_a_hidden_badge_links_to_the_event_that_hid_it(viewer_client, second_story, project):
    story = second_story
    doc = page(viewer_client, story)
    # Stored hidden: no event hid it, so the badge links nowhere.
    stored_hidden = doc.one("article", id=f"m-{story.hidden}")
    assert stored_hidden.one("span", cls="excluded").text() == "hidden"
    assert stored_hidden.find("a", cls="excluded") is None

    update_message(project, "story", story.result, {"include_in_messages": False}, "alice")
    event = story.session.events.filter(type="MESSAGE_UPDATED").latest("pk")
    doc = page(viewer_client, story)
    badge = doc.one("article", id=f"m-{story.result}").one("a", cls="excluded")
    assert badge.text() == "hidden" and badge.get("data-event") == str(event.pk)
    assert badge.get("href") == reverse("event_record", args=["default", "story", event.pk])
    assert doc.find("li", id=f"event-{event.pk}") is not None  # the anchor it scrolls to
    explain = doc.one("article", id=f"m-{story.result}").one("div", cls="explain")
    assert "hidden by alice" in explain.one("a", data_event=str(event.pk)).text()


def test_the_go_to_box_loads_the_message_without_script(viewer_client, second_story):
    story = second_story
    form = page(viewer_client, story).one("form", cls="go-to")
    assert form.get("method") == "get"
    box = form.one("input", name="seq")
    assert box.get("type") == "number" and box.get("max") == str(story.session.message_count)
    doc = page(viewer_client, story, seq=story.call)
    assert "target" in doc.one("article", id=f"m-{story.call}").classes
    doc = page(viewer_client, story, seq=story.session.message_count + 5)
    assert "No message #" in doc.one("p", cls="missing-seq").text()
