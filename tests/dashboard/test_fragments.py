"""The fragments the session page refreshes with htmx: new messages (live), the size chart and the
event history (new messages appear without a reload; compactions show as drops)."""

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.models import Event
from sessions.store.notes import add_note

from .dom import parse


def test_live_returns_204_when_nothing_is_new(viewer_client, story):
    response = viewer_client.get(story.url("live/", after=story.last))
    assert response.status_code == 204
    assert response.content == b""


def test_live_returns_the_new_messages_as_out_of_band_swaps(viewer_client, story, project):
    append_messages(project, "story", [
        {"role": "user", "content": "One more question about the gate."},
        {"role": "assistant", "content": "Gate B32 has not changed."},
    ], "test")
    response = viewer_client.get(story.url("live/", after=story.last))
    assert response.status_code == 200
    doc = parse(response)
    new = doc.one(hx_swap_oob="beforeend:#raw-items")
    seqs = [int(a.get("data-seq")) for a in new.find_all("article", cls="msg")]
    assert seqs == [story.last + 1, story.last + 2]
    assert "Gate B32 has not changed." in new.text()
    assert doc.find("html") is None


def test_live_also_refreshes_the_poller_the_figures_and_the_model_input(viewer_client, story, project):
    append_messages(project, "story", [{"role": "user", "content": "Still there?"}], "test")
    doc = parse(viewer_client.get(story.url("live/", after=story.last)))
    poller = doc.one(id="live-poller")
    assert poller.get("hx-swap-oob") == "true"
    assert poller.get("hx-get").endswith(f"live/?after={story.last + 1}")
    stats = doc.one(id="session-stats")
    assert stats.get("hx-swap-oob") == "true"
    assert str(story.last + 1) in stats.text()
    column = doc.one(id="model-input-inner")
    assert column.get("hx-swap-oob")
    assert "Still there?" in column.text()


def test_live_only_sends_what_is_after_the_given_seq(viewer_client, story):
    doc = parse(viewer_client.get(story.url("live/", after=story.last - 2)))
    new = doc.one(hx_swap_oob="beforeend:#raw-items")
    assert [int(a.get("data-seq")) for a in new.find_all("article", cls="msg")] == [story.last - 1, story.last]


def test_live_never_skips_messages_when_a_burst_arrives(viewer_client, story, project):
    """However many messages arrive between two polls, following the poller shows every one once."""
    append_messages(project, "story", [{"role": "user", "content": f"burst {i}"} for i in range(250)], "test")
    seen, after = [], story.last
    for _ in range(5):
        response = viewer_client.get(story.url("live/", after=after))
        if response.status_code == 204:
            break
        doc = parse(response)
        new = doc.one(hx_swap_oob="beforeend:#raw-items")
        seen += [int(a.get("data-seq")) for a in new.find_all("article", cls="msg")]
        after = int(doc.one(id="live-poller").get("hx-get").rsplit("after=", 1)[1])
    assert seen == list(range(story.last + 1, story.last + 251))


def test_live_with_a_garbage_after_does_not_fail(viewer_client, story):
    response = viewer_client.get(story.url("live/", after="abc"))
    assert response.status_code in (200, 204)


def test_the_page_polls_for_new_messages(viewer_client, story):
    poller = parse(viewer_client.get(story.url())).one(id="live-poller")
    assert poller.get("hx-get").endswith(f"live/?after={story.last}")
    assert "every" in poller.get("hx-trigger")


def test_the_chart_is_an_svg_with_a_line_and_a_drop_per_completed_compaction(viewer_client, story):
    response = viewer_client.get(story.url("chart/"))
    assert response.status_code == 200
    svg = parse(response).one("svg", cls="plot")
    line = svg.one("polyline")
    points = line.get("points").split()
    assert len(points) >= 4
    for point in points:
        x, y = (float(v) for v in point.split(","))
        assert x >= 0 and y >= 0
    drops = svg.find_all("circle", cls="drop")
    assert len(drops) == 2
    links = [a.get("href") for a in svg.find_all("a")]
    assert story.url(f"checkpoints/{story.first.pk}/") in links
    assert story.url(f"checkpoints/{story.second.pk}/") in links


def test_the_chart_shows_a_skipped_or_failed_compaction_as_no_drop(viewer_client, story):
    outcome = compact(story.session, force=True, summary="   ")
    assert outcome.status == "failed"
    svg = parse(viewer_client.get(story.url("chart/"))).one("svg", cls="plot")
    assert len(svg.find_all("circle", cls="drop")) == 2


def test_the_chart_of_a_session_without_history_says_so(viewer_client, project):
    from sessions.ingest.session_store import update_session

    update_session(project, "empty", {"title": "nothing yet"}, "test")
    response = viewer_client.get("/p/default/s/empty/chart/")
    assert response.status_code == 200
    assert parse(response).find("svg") is None


def test_the_events_fragment_pages_back_with_before(viewer_client, viewer_user, story):
    for i in range(70):
        add_note(story.session, viewer_user, f"note {i}")
    events = list(Event.objects.filter(session=story.session).order_by("-pk").values_list("pk", flat=True))
    assert len(events) > 80
    page_doc = parse(viewer_client.get(story.url()))
    shown = [li for li in page_doc.one(id="events").find_all("li", cls="event")]
    assert len(shown) == 40
    button = page_doc.one(id="events").one("button", cls="load")
    assert button.get("hx-get") == story.url("events/") + f"?before={events[39]}"

    second = parse(viewer_client.get(button.get("hx-get")))
    second_items = second.find_all("li", cls="event")
    assert len(second_items) == 40
    assert second.find("html") is None
    next_button = second.one("button", cls="load")
    assert next_button.get("hx-get").endswith(f"?before={events[79]}")

    third = parse(viewer_client.get(next_button.get("hx-get")))
    assert len(third.find_all("li", cls="event")) == len(events) - 80
    assert third.find("button", cls="load") is None


def test_the_events_fragment_shows_compaction_figures(viewer_client, story):
    doc = parse(viewer_client.get(story.url("events/", before=10**9)))
    completed = [li for li in doc.find_all("li", cls="event") if li.one(cls="etype").text() == "COMPACTION_COMPLETED"]
    assert len(completed) == 2
    text = completed[0].text()
    assert f"#{story.second.first_seq}–#{story.second.last_seq}" in text
    assert f"{story.second.tokens_before} → {story.second.tokens_after} tokens" in text


def test_the_events_fragment_without_before_does_not_fail(viewer_client, story):
    assert viewer_client.get(story.url("events/")).status_code == 200
