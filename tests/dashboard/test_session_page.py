"""The session page: raw log and model input side by side, coverage, explanations, tool
links, images, reasoning, attributes, the meter, permalinks, "as of", and windows whose cost does not
grow with the session."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.ingest.append import append_messages
from sessions.ingest.demo import long_run_messages
from sessions.models import Checkpoint, Project, Session
from tests.conftest import seeded_for_module

from .conftest import IMAGE_URL, REASONING, SYSTEM_TEXT, Story, build_story, session_url
from .dom import parse


@pytest.fixture(scope="module")
def seeded(django_db_setup, django_db_blocker) -> dict[str, int]:
    """The `story` session and a 50- and a 3000-message run, stored once for the module (committed; each
    test reads or changes them in its own rolled-back transaction): primary keys by name."""
    with seeded_for_module(django_db_blocker):
        project = Project.objects.get_or_create(name="default")[0]
        story = build_story(project)
        yield {"story": story.session.pk, "first": story.first.pk, "second": story.second.pk,
               "small": build_run(project, "run-small", 50).pk, "big": build_run(project, "run-big", 3000).pk}


@pytest.fixture
def story(seeded, project) -> Story:
    """The dashboard's `story` session (tests/dashboard/conftest.py), read afresh for each test."""
    return Story(Session.objects.get(pk=seeded["story"]), Checkpoint.objects.get(pk=seeded["first"]),
                 Checkpoint.objects.get(pk=seeded["second"]))


def page(client, story, **query):
    response = client.get(story.url(**query))
    assert response.status_code == 200, response.status_code
    return parse(response)


def raw_column(doc):
    return doc.one("section", cls="raw-log")


def input_column(doc):
    return doc.one("section", cls="model-input")


def message(doc, seq):
    return doc.one("article", id=f"m-{seq}")


def explain(article):
    return article.one(cls="explain")


def test_the_page_has_a_raw_log_column_and_a_model_input_column(viewer_client, story):
    doc = page(viewer_client, story)
    assert raw_column(doc).find("h2").text().startswith("Raw log")
    assert input_column(doc).find("h2").text().startswith("Model input")
    assert [int(a.get("data-seq")) for a in raw_column(doc).find_all("article", cls="msg")] == list(range(1, 36))


def test_every_raw_message_has_a_permalink_and_an_explanation_with_its_reason_code(viewer_client, story):
    doc = page(viewer_client, story)
    for article in raw_column(doc).find_all("article", cls="msg"):
        seq = article.get("data-seq")
        assert article.find("a", cls="permalink").get("href") == story.url(seq=seq) + f"#m-{seq}"
        code = explain(article).find(cls="code").text()
        assert f"code-{code}" in article.classes
        assert len(explain(article).text()) > len(code) + 10


def test_messages_covered_by_a_checkpoint_are_marked_with_that_checkpoint(viewer_client, story):
    doc = page(viewer_client, story)
    for seq in range(2, story.first.last_seq + 1):
        article = message(doc, seq)
        assert "code-covered_by_checkpoint" in article.classes, seq
        assert article.get("data-checkpoint") == str(story.first.pk)
        assert f"checkpoint {story.first.number}" in explain(article).text()
    for seq in range(story.second.first_seq, story.second.last_seq + 1):
        article = message(doc, seq)
        assert "code-covered_by_checkpoint" in article.classes, seq
        assert article.get("data-checkpoint") == str(story.second.pk)
    for seq in range(story.second.last_seq + 1, story.last + 1):
        assert "code-covered_by_checkpoint" not in message(doc, seq).classes
        assert message(doc, seq).get("data-checkpoint") is None


def test_the_summary_in_the_model_input_says_which_range_it_covers(viewer_client, story):
    summary = input_column(page(viewer_client, story)).one("article", cls="summary")
    assert summary.get("data-covers") == f"1-{story.second.last_seq}"
    assert summary.get("data-checkpoint") == str(story.second.pk)
    assert f"covering messages 1–{story.second.last_seq}" in summary.text()


def test_each_checkpoint_in_the_list_says_its_own_range(viewer_client, story):
    doc = page(viewer_client, story)
    items = doc.find_all("li", cls="checkpoint")
    assert [(i.get("data-checkpoint"), i.get("data-covers")) for i in items] == [
        (str(story.first.pk), f"1-{story.first.last_seq}"),
        (str(story.second.pk), f"{story.second.first_seq}-{story.second.last_seq}"),
    ]


def test_the_model_input_holds_instructions_summary_and_the_visible_messages_after_it(viewer_client, story):
    column = input_column(page(viewer_client, story))
    entries = column.find_all("article", cls="entry")
    assert "instructions" in entries[0].classes
    assert "summary" in entries[1].classes
    seqs = [int(e.get("data-seq")) for e in entries[2:]]
    expected = [s for s in range(story.second.last_seq + 1, story.last + 1)
                if s not in (story.dropped, story.hidden, story.orphan)]
    assert seqs == expected


@pytest.mark.parametrize("kind, code, badge, sentence", [
    ("system", "instructions_role", "system · not sent", "never sent to the model"),
    ("hidden", "excluded_flag", "hidden", "include_in_messages is false"),
    ("orphan", "orphan_tool_result", "orphan result", "call_audit_1"),
    ("dropped", "dropped_tool_call", "unanswered call", "call_taxi_1"),
])
def test_messages_left_out_show_their_badge_and_the_reason_sentence(viewer_client, story, kind, code, badge, sentence):
    article = message(page(viewer_client, story), getattr(story, kind))
    assert f"code-{code}" in article.classes
    assert badge in article.one("header").text()
    assert explain(article).find(cls="code").text() == code
    assert sentence in explain(article).text()


def test_the_stored_system_message_is_shown_with_its_text(viewer_client, story):
    assert SYSTEM_TEXT in message(page(viewer_client, story), story.system).text()


def test_a_message_in_the_input_says_its_position(viewer_client, story):
    article = message(page(viewer_client, story), story.result)
    assert "code-in_input" in article.classes
    assert "In the model input, message" in explain(article).text()


def test_tool_calls_are_pretty_printed_and_linked_to_their_result_and_back(viewer_client, story):
    doc = page(viewer_client, story)
    call = message(doc, story.call).one(cls="tool-call")
    assert call.get("data-call-id") == "call_fs_1"
    assert call.one(cls="tool-name").text() == "flight_status"
    arguments = call.one("pre", cls="arguments")
    assert json.loads(arguments.text()) == {"flight": "TP1351", "date": "2025-05-20"}
    raw_args = "".join(c for c in arguments.children if isinstance(c, str))
    assert '\n  "flight": "TP1351"' in raw_args  # indented, one key a line
    forward = [a.get("href") for a in call.find_all("a")]
    assert story.url(seq=story.result) + f"#m-{story.result}" in forward
    back = [a.get("href") for a in message(doc, story.result).one(cls="tool-link").find_all("a")]
    assert story.url(seq=story.call) + f"#m-{story.call}" in back


def test_a_covered_tool_call_still_links_to_its_result(viewer_client, story):
    doc = page(viewer_client, story)
    call = message(doc, story.history_call).one(cls="tool-call")
    assert any(a.get("href", "").endswith(f"#m-{story.history_result}") for a in call.find_all("a"))


def test_an_unanswered_call_says_no_result_was_stored(viewer_client, story):
    call = message(page(viewer_client, story), story.dropped).one(cls="tool-call")
    assert "no result stored" in call.text()
    assert "dropped" in call.classes


def test_images_are_shown_as_thumbnails(viewer_client, story):
    article = message(page(viewer_client, story), story.image)
    img = article.one("img", cls="thumb")
    assert img.get("src") == IMAGE_URL
    assert "24×16" in img.get("alt")


def test_reasoning_is_collapsible(viewer_client, story):
    details = message(page(viewer_client, story), story.call).one("details", cls="reasoning")
    assert details.find("summary") is not None
    assert REASONING in details.text()
    assert details.get("open") is None


def test_attributes_are_shown_as_a_table(viewer_client, story):
    table = message(page(viewer_client, story), story.image).one("table", cls="attributes")
    cells = {tr.find("th").text(): tr.find("td").text() for tr in table.find_all("tr")}
    assert cells == {"user_id": "u_1842", "app_version": "3.4.1"}


def test_the_meter_shows_model_input_tokens_against_max_tokens_and_the_keep_window(viewer_client, story):
    doc = page(viewer_client, story)
    meter = doc.one(role="meter")
    assert meter.get("aria-valuenow") == str(story.session.input_tokens)
    assert meter.get("aria-valuemax") == "4000"
    assert meter.find(cls="keep") is not None
    text = doc.one(cls="meter-text").text()
    assert f"{story.session.input_tokens} / 4000 tokens" in text
    assert "keep_recent_tokens 200" in text


def percent(element, name: str) -> float:
    value = element.get(name)
    assert value.endswith("%"), (name, value)
    return float(value.removesuffix("%"))


def test_the_meter_is_drawn_in_svg_with_its_sizes_as_attributes(viewer_client, story):
    """No inline style: the fill, the keep window and the threshold are SVG shapes placed by attributes."""
    meter = page(viewer_client, story).one(role="meter")
    fill, keep, threshold = meter.one(cls="fill"), meter.one("svg", cls="keep"), meter.one(cls="threshold")
    assert percent(fill, "width") == round(100 * story.session.input_tokens / 4000, 2)
    assert percent(keep, "width") == 5  # keep_recent_tokens 200 of 4000
    assert percent(keep, "x") == round(percent(fill, "width") - 5, 2)  # it ends where the fill ends
    assert percent(threshold, "x") == 100
    assert "over" not in meter.classes


def test_over_max_tokens_the_meter_is_full_and_the_threshold_moves_in(viewer_client, story):
    Session.objects.filter(pk=story.session.pk).update(max_tokens=story.session.input_tokens // 2)
    meter = page(viewer_client, story).one(role="meter")
    assert "over" in meter.classes
    assert percent(meter.one(cls="fill"), "width") == 100
    assert 49 <= percent(meter.one(cls="threshold"), "x") <= 51


def oversized_turn_session(project, key, current_turn_words: int):
    """An earlier turn and a current turn of a tool loop, auto compaction off, max_tokens 300."""
    from sessions.ingest.session_store import update_session

    update_session(project, key, {"compaction": {"max_tokens": 300, "keep_recent_tokens": 100, "auto": False}}, "t")
    append_messages(project, key, [
        {"role": "user", "content": "An earlier question. " + "detail " * 300},
        {"role": "assistant", "content": "An earlier answer."},
        {"role": "user", "content": "Fix the failing test."},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "name": "bash", "arguments": '{"command": "pytest"}'}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "FAILED " * current_turn_words},
    ], "t")
    return Session.objects.get(project=project, key=key)


def test_the_page_says_when_the_current_turn_alone_is_over_max_tokens(viewer_client, project):
    from sessions.context.compaction import current_turn
    from sessions.context.model_input import stored_layout

    session = oversized_turn_session(project, "long-turn", current_turn_words=400)
    turn = current_turn(stored_layout(session))
    assert turn.first_seq == 3 and turn.tokens > 300

    doc = parse(viewer_client.get(session_url(session)))

    note = doc.one(id="session-stats").one(cls="oversized-turn")
    text = note.text()
    assert f"from message #3 on, is {turn.tokens} tokens" in text
    assert "over max_tokens (300)" in text
    assert "until the next user message" in text
    assert note.get("style") is None


def test_the_page_says_nothing_of_the_current_turn_when_older_turns_make_the_input_too_big(viewer_client, project):
    session = oversized_turn_session(project, "long-history", current_turn_words=50)
    assert session.input_tokens > 300

    doc = parse(viewer_client.get(session_url(session)))

    assert "over" in doc.one(role="meter").classes
    assert doc.find(cls="oversized-turn") is None


def test_the_page_links_to_the_chart_and_lists_the_compaction_events(viewer_client, story):
    doc = page(viewer_client, story)
    chart = doc.one(cls="chart-box")
    assert chart.get("hx-get") == story.url("chart/")
    types = [e.one(cls="etype").text() for e in doc.one(id="events").find_all("li", cls="event")]
    assert types.count("COMPACTION_COMPLETED") == 2
    assert types.count("COMPACTION_STARTED") == 2


def test_a_permalink_marks_its_message_as_the_target(viewer_client, story):
    doc = page(viewer_client, story, seq=story.orphan)
    assert "target" in message(doc, story.orphan).classes
    assert [a.get("id") for a in doc.find_all("article", cls="target")] == [f"m-{story.orphan}"]


def test_a_permalink_far_back_opens_the_window_around_its_message(viewer_client, big_session):
    response = viewer_client.get(session_url(big_session, seq=10))
    doc = parse(response)
    assert "target" in doc.one("article", id="m-10").classes


def test_as_of_shows_later_messages_as_after_and_the_input_as_it_was(viewer_client, story):
    as_of = 20  # after the first checkpoint (created after #13), before the second (after #25)
    doc = page(viewer_client, story, as_of=as_of)
    for seq in range(as_of + 1, story.last + 1):
        article = message(doc, seq)
        assert "code-after_as_of" in article.classes, seq
        assert f"after #{as_of}" in article.one("header").text()
    assert "code-in_input" in message(doc, 15).classes  # covered only by the later checkpoint
    assert "code-covered_by_checkpoint" in message(doc, 5).classes
    column = input_column(doc)
    assert f"as of #{as_of}" in column.find("h2").text()
    summary = column.one("article", cls="summary")
    assert summary.get("data-covers") == f"1-{story.first.last_seq}"
    seqs = [int(e.get("data-seq")) for e in column.find_all("article", cls="entry") if e.get("data-seq")]
    assert seqs and max(seqs) <= as_of and min(seqs) > story.first.last_seq
    assert "as it was right after message #20" in doc.one(cls="as-of-banner").text()


def test_as_of_a_checkpoint_shows_the_input_right_after_it_was_made(viewer_client, story):
    doc = page(viewer_client, story, as_of_checkpoint=story.first.pk)
    created = story.first.created_at_seq
    assert f"as of #{created}" in input_column(doc).find("h2").text()
    summary = input_column(doc).one("article", cls="summary")
    assert summary.get("data-checkpoint") == str(story.first.pk)
    assert "code-after_as_of" in message(doc, created + 1).classes
    assert "code-after_as_of" not in message(doc, created).classes


def test_as_of_beyond_the_log_or_garbage_shows_the_input_as_built_now(viewer_client, story):
    for value in ("9999", "-1", "abc"):
        doc = page(viewer_client, story, as_of=value)
        assert "as built now" in input_column(doc).find("h2").text()


def test_a_checkpoint_of_another_session_is_ignored_by_as_of_checkpoint(viewer_client, story, project):
    from .conftest import build_story

    other = build_story(project, "story-two")
    doc = page(viewer_client, story, as_of_checkpoint=other.first.pk)
    assert "as built now" in input_column(doc).find("h2").text()


def test_an_unknown_session_is_404(viewer_client, story):
    assert viewer_client.get("/p/default/s/no-such-session/").status_code == 404
    assert viewer_client.get("/p/no-such-project/s/story/").status_code == 404


def test_an_outsider_gets_404_for_the_page_and_every_fragment(outsider_client, story):
    for suffix, query in [("", {}), ("log/", {"before": 10}), ("input/", {}), ("live/", {"after": 1}),
                          ("chart/", {}), ("events/", {"before": 10_000})]:
        response = outsider_client.get(story.url(suffix, **query))
        assert response.status_code == 404, (suffix, response.status_code)
        assert story.session.title.encode() not in response.content


def test_a_superuser_sees_every_projects_sessions(superuser_client, story, other_session):
    assert superuser_client.get(story.url()).status_code == 200
    assert superuser_client.get(session_url(other_session)).status_code == 200


# --- windows -------------------------------------------------------------------------------------


def build_run(project, key, count):
    messages = long_run_messages(count)
    for start in range(0, count, 500):
        append_messages(project, key, messages[start:start + 500], "test")
    return Session.objects.get(project=project, key=key)


@pytest.fixture
def small_session(seeded, project):
    return Session.objects.get(pk=seeded["small"])


@pytest.fixture
def big_session(seeded, project):
    return Session.objects.get(pk=seeded["big"])


def count_queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries), response


def test_a_long_session_opens_with_a_window_of_the_newest_messages_and_a_load_earlier_button(viewer_client, big_session):
    response = viewer_client.get(session_url(big_session))
    doc = parse(response)
    articles = raw_column(doc).find_all("article", cls="msg")
    assert 0 < len(articles) <= 60
    seqs = [int(a.get("data-seq")) for a in articles]
    assert seqs == list(range(3001 - len(seqs), 3001))
    button = raw_column(doc).one("button", cls="more-earlier")
    assert "Load earlier" in button.text()
    assert button.get("hx-get") == session_url(big_session, "log/") + f"?before={seqs[0]}"
    entries = input_column(doc).find_all("article", cls="entry")
    assert len(entries) <= 61
    assert "earlier message" in input_column(doc).one("button", cls="load").text()


def test_a_50_and_a_3000_message_session_page_issue_the_same_number_of_queries(viewer_client, small_session, big_session):
    small, _ = count_queries(viewer_client, session_url(small_session))
    big, _ = count_queries(viewer_client, session_url(big_session))
    assert small == big, f"50 messages: {small} queries, 3000 messages: {big}"


def test_compacted_50_and_3000_message_session_pages_issue_the_same_number_of_queries(viewer_client, small_session, big_session):
    from sessions.context.compaction_runs import compact

    for session in (small_session, big_session):
        assert compact(session, force=True, keep_recent_tokens=300).status == "completed"
    small, _ = count_queries(viewer_client, session_url(small_session))
    big, response = count_queries(viewer_client, session_url(big_session))
    assert small == big, f"50 messages: {small} queries, 3000 messages: {big}"
    assert len(parse(response).find_all("article", cls="msg")) <= 60


def test_a_session_with_special_characters_in_its_key_opens_and_links_correctly(viewer_client, project):
    key = "user@example.com:chat.1"
    append_messages(project, key, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "t")
    session = Session.objects.get(project=project, key=key)
    doc = parse(viewer_client.get(session_url(session)))
    assert doc.one("article", id="m-1").one("a", cls="permalink").get("href") == f"/p/default/s/{key}/?seq=1#m-1"
    assert viewer_client.get(session_url(session, "log/", before=2)).status_code == 200


def test_an_empty_session_opens(viewer_client, project):
    from sessions.ingest.session_store import update_session

    update_session(project, "empty", {"title": "Nothing yet"}, "t")
    doc = parse(viewer_client.get("/p/default/s/empty/"))
    assert doc.one("h1").text() == "Nothing yet"
    assert raw_column(doc).find("article") is None


def test_hiding_a_message_updates_the_meter(editor_client, story):
    before = story.session.input_tokens
    editor_client.post(story.url(f"messages/{story.result}/include/"), {"include": "0"})
    meter = parse(editor_client.get(story.url())).one(role="meter")
    assert int(meter.get("aria-valuenow")) < before


def test_the_page_as_of_a_message_issues_the_same_number_of_queries_for_both_sizes(viewer_client, small_session, big_session):
    small, _ = count_queries(viewer_client, session_url(small_session, as_of=40))
    big, _ = count_queries(viewer_client, session_url(big_session, as_of=2900))
    assert small == big, f"50 messages: {small} queries, 3000 messages: {big}"


def test_the_log_fragment_loads_the_window_before_a_seq(viewer_client, big_session):
    response = viewer_client.get(session_url(big_session, "log/", before=1000))
    doc = parse(response)
    seqs = [int(a.get("data-seq")) for a in doc.find_all("article", cls="msg")]
    assert seqs == list(range(1000 - len(seqs), 1000)) and 0 < len(seqs) <= 60
    assert doc.find("html") is None
    assert doc.one("button", cls="more-earlier").get("hx-get").endswith(f"?before={seqs[0]}")
    assert doc.find("button", cls="more-later") is None


def test_the_log_fragment_loads_the_window_after_a_seq(viewer_client, big_session):
    doc = parse(viewer_client.get(session_url(big_session, "log/", after=1000)))
    seqs = [int(a.get("data-seq")) for a in doc.find_all("article", cls="msg")]
    assert seqs == list(range(1001, 1001 + len(seqs))) and 0 < len(seqs) <= 60
    assert doc.one("button", cls="more-later").get("hx-get").endswith(f"?after={seqs[-1]}")


def test_the_log_fragment_needs_before_or_after(viewer_client, big_session):
    assert viewer_client.get(session_url(big_session, "log/")).status_code == 404


@pytest.mark.parametrize("direction", ["before", "after"])
def test_log_fragment_windows_issue_the_same_number_of_queries_for_both_sizes(viewer_client, small_session, big_session, direction):
    small, _ = count_queries(viewer_client, session_url(small_session, "log/", **{direction: 25}))
    big, _ = count_queries(viewer_client, session_url(big_session, "log/", **{direction: 1500}))
    assert small == big, f"50 messages: {small} queries, 3000 messages: {big}"


def test_the_input_fragment_loads_earlier_entries_of_the_model_input(viewer_client, big_session):
    doc = parse(viewer_client.get(session_url(big_session)))
    button = input_column(doc).one("button", cls="load")
    fragment = parse(viewer_client.get(button.get("hx-get")))
    entries = fragment.find_all("article", cls="entry")
    assert 0 < len(entries) <= 60
    first_page = [int(e.get("data-seq")) for e in input_column(doc).find_all("article", cls="entry") if e.get("data-seq")]
    earlier = [int(e.get("data-seq")) for e in entries if e.get("data-seq")]
    assert max(earlier) < min(first_page)


def test_input_fragment_windows_issue_the_same_number_of_queries_for_both_sizes(viewer_client, small_session, big_session):
    small, _ = count_queries(viewer_client, session_url(small_session, "input/", before=20))
    big, _ = count_queries(viewer_client, session_url(big_session, "input/", before=1500))
    assert small == big, f"50 messages: {small} queries, 3000 messages: {big}"
    small, _ = count_queries(viewer_client, session_url(small_session, "input/"))
    big, _ = count_queries(viewer_client, session_url(big_session, "input/"))
    assert small == big, f"50 messages: {small} queries, 3000 messages: {big}"


def tool_session(project, key, messages) -> str:
    """The page of a new session of `messages`."""
    append_messages(project, key, messages, "test")
    return session_url(Session.objects.get(project=project, key=key))


def test_a_failed_tool_result_has_an_error_badge(viewer_client, project):
    url = tool_session(project, "failed", [
        {"role": "user", "content": "Where is gate 12?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "gate_map", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "map service unavailable", "is_error": True},
        {"role": "assistant", "content": "The map is down."},
    ])
    doc = parse(viewer_client.get(url))

    assert message(doc, 3).one("header").one(cls="is-error").text() == "error"
    assert all(message(doc, seq).one("header").find(cls="is-error") is None for seq in (1, 2, 4))
    assert input_column(doc).one("article", **{"data-seq": "3"}).one(cls="is-error").text() == "error"


def test_calls_awaiting_their_results_are_shown_as_pending_and_not_in_the_input(viewer_client, project):
    url = tool_session(project, "waiting", [
        {"role": "user", "content": "Weather in Lisbon and Porto?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c_lis", "name": "get_weather", "arguments": "{}"}, {"id": "c_opo", "name": "get_weather",
                                                                        "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c_lis", "content": "sunny"},
    ])
    doc = parse(viewer_client.get(url))

    calls = {c.get("data-call-id"): c for c in message(doc, 2).find_all(cls="tool-call")}
    assert "pending" in calls["c_opo"].classes and "pending" not in calls["c_lis"].classes
    assert "call pending" in message(doc, 2).one("header").text()
    entry = input_column(doc).one("article", **{"data-seq": "2"})
    assert [c.text() for c in entry.find_all(cls="tool-name")] == ["get_weather"]
    assert "c_opo" in entry.one("p", cls="pending").text()

    append_messages(project, "waiting", [{"role": "user", "content": "Only Lisbon, then."}], "test")
    doc = parse(viewer_client.get(url))
    assert "dropped" in {c.get("data-call-id"): c for c in message(doc, 2).find_all(cls="tool-call")}["c_opo"].classes


def test_an_assistant_message_of_only_pending_calls_says_it_awaits_their_results(viewer_client, project):
    url = tool_session(project, "asked", [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": "{}"}]},
    ])
    article = message(parse(viewer_client.get(url)), 2)

    assert "code-awaiting_tool_result" in article.classes
    assert "awaiting tool result" in article.one("header").text()
    assert "c1" in explain(article).text()


@pytest.mark.parametrize("seq", ["99999", "0", "-3", "abc"])
def test_asking_for_a_message_the_session_does_not_have_says_so(viewer_client, story, seq):
    doc = parse(viewer_client.get(story.url(seq=seq)))
    notice = doc.one("p", cls="missing-seq")
    count = story.session.message_count
    assert notice.text() == f"No message #{seq}; this session has {count} messages (#1–#{count})."


def test_a_message_the_session_has_gets_no_notice(viewer_client, story):
    doc = parse(viewer_client.get(story.url(seq=3)))
    assert doc.find("p", cls="missing-seq") is None
    assert "target" in doc.one("article", id="m-3").classes
