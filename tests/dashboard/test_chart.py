"""The model-input size chart (chart/ fragment): round ticks on both axes, the readings the pointer
shows, drop markers that are named links, and the point the page shows when it is "as of" a message."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.context.explain import checkpoints_of, page_layout
from sessions.ingest.demo import append_long_run, long_run_messages
from sessions.ingest.session_store import update_session
from sessions.models import Session

from .conftest import session_url
from .dom import parse


def chart(client, story, **query):
    response = client.get(story.url("chart/", **query))
    assert response.status_code == 200
    return parse(response).one("figure", cls="chart")


def readings(figure) -> list[tuple[int, int, float, float]]:
    raw = figure.one("svg", cls="plot").get("data-readings")
    return [(int(s), int(t), float(x), float(y)) for s, t, x, y in (r.split() for r in raw.split(";"))]


def scales(figure):
    """The chart's x(seq) and y(tokens), as its readings place them (both are straight lines)."""
    points = readings(figure)
    (s0, t0, x0, y0), (s1, t1, x1, y1) = points[0], max(points, key=lambda p: (p[0], p[1]))

    def x(seq):
        return x0 + (x1 - x0) * (seq - s0) / (s1 - s0)

    def y(tokens):
        return y0 + (y1 - y0) * (tokens - t0) / (t1 - t0)

    return x, y


def test_the_token_axis_has_round_ticks_with_grid_lines_from_0(viewer_client, story):
    figure = chart(viewer_client, story)
    svg = figure.one("svg", cls="plot")
    labels = [t.text() for t in svg.find_all("text", cls="tick") if not t.text().startswith("#")]
    grid = svg.find_all("line", cls="grid")

    assert labels[0] == "0" and len(labels) >= 3
    values = [int(float(label.rstrip("k")) * (1000 if label.endswith("k") else 1)) for label in labels]
    step = values[1]
    assert str(step).rstrip("0") in ("1", "2", "5")
    assert values == [step * i for i in range(len(values))]
    assert len(grid) == len(labels)
    assert [float(g.get("y1")) for g in grid] == sorted((float(g.get("y1")) for g in grid), reverse=True)


def test_the_message_axis_has_round_message_numbers(viewer_client, story):
    svg = chart(viewer_client, story).one("svg", cls="plot")
    numbers = [int(t.text()[1:]) for t in svg.find_all("text", cls="tick") if t.text().startswith("#")]

    assert len(numbers) >= 3
    step = numbers[0]
    assert str(step).rstrip("0") in ("1", "2", "5")
    assert numbers == [step * (i + 1) for i in range(len(numbers))]
    assert numbers[-1] <= story.last < numbers[-1] + step


def test_the_readings_are_the_points_of_the_line(viewer_client, story):
    figure = chart(viewer_client, story)
    line = [tuple(float(v) for v in p.split(",")) for p in figure.one("polyline").get("points").split()]
    points = readings(figure)

    assert [(x, y) for _, _, x, y in points] == line
    assert points[-1][0] == story.last
    assert [seq for seq, *_ in points] == sorted(seq for seq, *_ in points)
    assert figure.one("p", cls="chart-readout").get("data-hint")


def test_each_drop_is_a_named_link_carrying_its_reading(viewer_client, story):
    svg = chart(viewer_client, story).one("svg", cls="plot")
    links = svg.find_all("a")
    first = next(a for a in links if a.get("href") == story.url(f"checkpoints/{story.first.pk}/"))

    assert len(links) == 2
    seq, tokens = first.get("data-seq"), first.get("data-tokens")
    assert int(seq) == story.first.created_at_seq
    assert int(tokens) == story.first.tokens_after
    assert first.get("aria-label") == f"checkpoint {story.first.number} after #{seq}: input down to {tokens} tokens"
    assert (int(seq), int(tokens)) in {(s, t) for s, t, _, _ in readings(chart(viewer_client, story))}


def test_without_as_of_no_point_is_marked(viewer_client, story):
    figure = chart(viewer_client, story)

    assert figure.find(cls="as-of-point") is None
    assert "ringed" not in figure.one("figcaption").text()


def test_as_of_a_message_its_model_input_is_ringed(viewer_client, story):
    as_of = story.last - 3
    shown = page_layout(story.session, checkpoints_of(story.session), as_of).tokens
    figure = chart(viewer_client, story, as_of=as_of)
    ring = figure.one(cls="as-of-point").one("circle")
    x, y = scales(figure)

    assert f"as of #{as_of}: {shown} tokens" in figure.one("figcaption").text()
    assert abs(float(ring.get("cx")) - x(as_of)) < 0.2
    assert abs(float(ring.get("cy")) - y(shown)) < 0.2


def test_as_of_a_checkpoint_the_input_built_on_it_is_ringed_at_the_bottom_of_its_drop(viewer_client, story):
    figure = chart(viewer_client, story, as_of_checkpoint=story.first.pk)
    ring = figure.one(cls="as-of-point").one("circle")
    drop = figure.one("a", href=story.url(f"checkpoints/{story.first.pk}/")).one("circle")

    assert f"as of #{story.first.created_at_seq}:" in figure.one("figcaption").text()
    assert ring.get("cx") == drop.get("cx")
    assert abs(float(ring.get("cy")) - float(drop.get("cy"))) < 3


def test_a_garbage_as_of_marks_nothing(viewer_client, story):
    for value in ("abc", "-1", str(story.last + 50)):
        assert chart(viewer_client, story, as_of=value).find(cls="as-of-point") is None


def test_the_page_shown_as_of_asks_the_chart_for_that_point(viewer_client, story):
    def chart_url(**query):
        return parse(viewer_client.get(story.url(**query))).one(cls="chart-box").get("hx-get")

    assert chart_url() == story.url("chart/")
    assert chart_url(as_of=5) == story.url("chart/", as_of=5)
    assert chart_url(as_of_checkpoint=story.second.pk) == story.url("chart/", as_of=story.second.created_at_seq)


def test_the_figure_says_what_it_shows(viewer_client, story):
    figure = chart(viewer_client, story)
    svg = figure.one("svg", cls="plot")

    assert svg.get("role") == "group" and "model input tokens by message number" in svg.get("aria-label")
    assert "max_tokens 4000" in figure.one("figcaption").text()
    decorations = [child for child in svg.children if not isinstance(child, str) and child.tag != "a"]
    assert all(child.get("aria-hidden") == "true" for child in decorations)


def agent_run(project, key: str, count: int) -> Session:
    update_session(project, key, {"compaction": {"max_tokens": 1500, "keep_recent_tokens": 500, "auto": True}}, "test")
    append_long_run(project, key, long_run_messages(count))
    return Session.objects.get(project=project, key=key)


def test_the_chart_of_a_short_and_a_long_compacted_run_issues_the_same_number_of_queries(viewer_client, project):
    short, long = agent_run(project, "run-short", 100), agent_run(project, "run-long", 800)
    assert 1 <= short.checkpoints.count() <= 2 and long.checkpoints.count() > 20

    def queries(session, **query) -> int:
        with CaptureQueriesContext(connection) as ctx:
            response = viewer_client.get(session_url(session, "chart/", **query))
        assert response.status_code == 200
        return len(ctx.captured_queries)

    assert queries(short) == queries(long)
    assert queries(short, as_of=90) == queries(long, as_of=700)
