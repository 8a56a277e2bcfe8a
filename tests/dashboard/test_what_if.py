"""The session page's What if… panel: a preview stores nothing and anyone who may see the session may
ask for one; compacting or saving with its settings needs the editor role; Compact now says why it
covered nothing in the same words."""

import pytest
from django.urls import reverse

from sessions.models import Checkpoint, CompactionRun, Event, EventType

from .dom import parse

HTMX = {"HTTP_HX_REQUEST": "true"}


def url(story, name):
    return reverse(name, args=["default", story.session.key])


def stored(story):
    return (Event.objects.filter(session=story.session).count(), Checkpoint.objects.count(),
            CompactionRun.objects.count())


def preview(client, story, **fields):
    return client.get(url(story, "session_what_if"), fields, **HTMX)


def test_the_panel_is_filled_with_the_sessions_effective_settings(viewer_client, story):
    page = parse(viewer_client.get(story.url()))

    form = page.one(id="what-if-form")
    assert form.one("input", name="max_tokens").get("value") == "4000"
    assert form.one("input", name="keep_recent_tokens").get("value") == "200"
    assert form.one("option", selected="").get("value") == "extractive"
    assert form.find(id="what-if-compact") is None, "a viewer may preview, not compact"
    assert form.find(id="what-if-save") is None


def test_an_editor_sees_compact_and_save(editor_client, story):
    form = parse(editor_client.get(story.url())).one(id="what-if-form")
    assert form.one(id="what-if-compact").get("hx-post") == url(story, "session_compact")
    assert form.one(id="what-if-save").get("hx-post") == url(story, "session_save_compaction")


def test_a_viewer_previews_and_nothing_is_stored(viewer_client, story):
    before = stored(story)

    response = preview(viewer_client, story, max_tokens="4000", keep_recent_tokens="200", force="1")

    assert response.status_code == 200
    result = parse(response).one(id="what-if-result")
    assert "Would compact" in result.text()
    assert result.get("data-first-seq") == str(story.second.last_seq + 1)
    assert int(result.get("data-last-seq")) >= story.second.last_seq + 1
    assert "Projected model input" in result.text()
    assert stored(story) == before


def test_the_preview_says_why_nothing_would_be_covered(viewer_client, story):
    response = preview(viewer_client, story, max_tokens="4000", keep_recent_tokens="20000", force="1")

    result = parse(response).one(id="what-if-result")
    assert "Would not compact (nothing_to_compact)" in result.text()
    assert "keep_recent_tokens 20,000 keeps every turn" in result.text()
    assert result.get("data-first-seq") is None


def test_a_preview_under_the_threshold_says_so(viewer_client, story):
    result = parse(preview(viewer_client, story, max_tokens="100000")).one(id="what-if-result")
    assert "under_threshold" in result.text()
    assert "not over max_tokens 100,000" in result.text()


@pytest.mark.parametrize(("fields", "named"), [
    ({"max_tokens": "-5"}, "max_tokens"),
    ({"keep_recent_tokens": "lots"}, "keep_recent_tokens"),
    ({"summarizer": "<script>"}, "summarizer"),
])
def test_bad_settings_get_a_422_naming_the_field(viewer_client, story, fields, named):
    before = stored(story)

    response = preview(viewer_client, story, **fields)

    assert response.status_code == 422
    assert named in parse(response).one(id="what-if-result").one(role="alert").text()
    assert b"<script>" not in response.content
    assert stored(story) == before


def test_an_outsider_cannot_preview(outsider_client, story):
    assert preview(outsider_client, story).status_code == 404


def test_without_htmx_the_preview_is_a_page_of_its_own(viewer_client, story):
    response = viewer_client.get(url(story, "session_what_if"), {"max_tokens": "100000"})
    page = parse(response)
    assert page.one("h1").text().startswith("What if")
    assert page.one(id="what-if-form").one("input", name="max_tokens").get("value") == "100000"
    assert "under_threshold" in page.one(id="what-if-result").text()


def test_compact_with_these_settings_uses_them(editor_client, story):
    response = editor_client.post(url(story, "session_compact"),
                                  {"max_tokens": "4000", "keep_recent_tokens": "0", "summarizer": "extractive", "force": "1"})

    assert response.status_code == 302
    skipped_or_done = Event.objects.filter(session=story.session, type__startswith="COMPACTION_").order_by("-pk").first()
    assert skipped_or_done.data["keep_recent_tokens"] == 0
    assert skipped_or_done.type == EventType.COMPACTION_COMPLETED
    story.session.refresh_from_db()
    assert story.session.keep_recent_tokens == 200, "compacting with other settings does not save them"


def test_compact_now_says_why_nothing_was_covered(editor_client, story):
    editor_client.post(url(story, "session_compact"), {"keep_recent_tokens": "20000", "force": "1"})

    flash = parse(editor_client.get(story.url())).one(cls="flash").text()
    assert "Compaction skipped (nothing_to_compact)" in flash
    assert "keep_recent_tokens 20,000 keeps every turn" in flash


def test_compact_now_under_the_threshold_says_so_in_words(editor_client, story):
    editor_client.post(url(story, "session_compact"), {})

    flash = parse(editor_client.get(story.url())).one(cls="flash").text()
    assert "Compaction skipped (under_threshold)" in flash
    assert "not over max_tokens 4,000" in flash


def test_compact_with_bad_settings_is_refused_and_stores_nothing(editor_client, story):
    before = stored(story)
    editor_client.post(url(story, "session_compact"), {"max_tokens": "many"})
    assert stored(story) == before
    assert "Not compacted: max_tokens" in parse(editor_client.get(story.url())).one(cls="flash").text()


def test_save_makes_them_the_sessions_settings_with_an_event(editor_client, story):
    response = editor_client.post(url(story, "session_save_compaction"),
                                  {"max_tokens": "3000", "keep_recent_tokens": "150", "summarizer": "extractive"})

    assert response.status_code == 302
    story.session.refresh_from_db()
    assert (story.session.max_tokens, story.session.keep_recent_tokens, story.session.summarizer) == (3000, 150, "extractive")
    event = Event.objects.filter(session=story.session).order_by("-pk").first()
    assert event.type == EventType.SESSION_UPDATED
    assert set(event.data["fields"]) == {"max_tokens", "keep_recent_tokens", "summarizer"}
    page = parse(editor_client.get(story.url()))
    assert "Saved" in page.one(cls="flash").text()
    assert page.one(id="what-if-form").one("input", name="max_tokens").get("value") == "3000"


def test_save_refuses_a_zero_threshold_and_changes_nothing(editor_client, story):
    editor_client.post(url(story, "session_save_compaction"), {"max_tokens": "0"})
    story.session.refresh_from_db()
    assert story.session.max_tokens == 4000
    assert "Settings not saved" in parse(editor_client.get(story.url())).one(cls="flash").text()


@pytest.mark.parametrize("name", ["session_compact", "session_save_compaction"])
def test_a_viewer_can_neither_compact_nor_save(viewer_client, story, name):
    before = stored(story)
    response = viewer_client.post(url(story, name), {"max_tokens": "10", "keep_recent_tokens": "0", "force": "1"})
    assert response.status_code == 403
    assert stored(story) == before
