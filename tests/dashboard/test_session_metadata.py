"""Session metadata on the dashboard: the list's metadata column, filters and sort (`column`, `meta`,
`sort=meta:<key>`), the session page's metadata panel (import source, parent and sub-agent links), and
quiet messages (attributes folded behind "n more", long texts folded to a preview)."""

from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions.dashboard.session_metadata import FOLD_CHARS, relatives
from sessions.ingest.append import append_messages
from sessions.ingest.importers.runner import import_path
from sessions.ingest.session_store import update_session
from sessions.models import Session

from .conftest import session_url
from .dom import parse

LIST = reverse("sessions")
DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
CLAUDE_CODE_WITH_SUB_AGENTS = DATA / "claude-code" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
TAU_BENCH = DATA / "openai-chat" / "tau-bench-gpt-4o-airline.json"


def make_session(project, key, metadata, *, text="hello"):
    update_session(project, key, {"metadata": metadata}, "test")
    append_messages(project, key, [{"role": "user", "content": text}], "test")
    return Session.objects.get(project=project, key=key)


def listed(response) -> list[str]:
    assert response.status_code == 200, response.status_code
    table = parse(response).one(id="session-rows")
    return [a.text() for a in table.find_all("a", cls="key")]


def column_cells(response) -> dict[str, str]:
    table = parse(response).one(id="session-rows")
    cells = {}
    for tr in table.find_all("tr"):
        link = tr.find("a", cls="key")
        if link is not None:
            cells[link.text()] = tr.one("td", cls="meta-column").text()
    return cells


def form_errors(response) -> list[str]:
    found = parse(response).find(cls="form-errors")
    return [li.text() for li in found.find_all("li")] if found is not None else []


@pytest.fixture
def runs(project):
    """Four benchmark runs: rewards 10, 2 and 0.5 (numbers), and one run without a reward."""
    make_session(project, "run-a", {"reward": 0.5, "model": "gpt-4o", "info": {"task": {"user_id": "mia"}}})
    make_session(project, "run-b", {"reward": 10, "model": "gpt-4o-mini"})
    make_session(project, "run-c", {"reward": 2, "model": "gpt-4o", "info": {"task": {"user_id": "omar"}}})
    make_session(project, "run-d", {"model": "claude"})


# --- the list --------------------------------------------------------------------------------------


def test_a_metadata_column_shows_each_sessions_value(viewer_client, runs):
    response = viewer_client.get(LIST, {"column": "reward"})
    header = parse(response).one("th", cls="meta-column")
    assert header.text() == "reward"
    assert column_cells(response) == {"run-a": "0.5", "run-b": "10", "run-c": "2", "run-d": "—"}


def test_a_nested_key_is_named_with_dots(viewer_client, runs):
    cells = column_cells(viewer_client.get(LIST, {"column": "info.task.user_id"}))
    assert cells["run-a"] == "mia" and cells["run-c"] == "omar" and cells["run-b"] == "—"


def test_sorting_by_a_metadata_key_is_numeric_highest_first_and_puts_sessions_without_it_last(viewer_client, runs):
    # As text the order would be 2, 10, 0.5 (or 0.5, 10, 2): numbers are compared as numbers.
    assert listed(viewer_client.get(LIST, {"sort": "meta:reward"})) == ["run-b", "run-c", "run-a", "run-d"]
    assert listed(viewer_client.get(LIST, {"sort": "meta:reward", "column": "reward"}))[:3] == ["run-b", "run-c", "run-a"]


def test_the_column_header_links_to_the_sort_by_that_key(viewer_client, runs):
    header = parse(viewer_client.get(LIST, {"column": "reward", "sort": "tokens"})).one("th", cls="meta-column")
    href = header.one("a").get("href")
    assert "sort=meta:reward" in href and "sort=tokens" not in href and "column=reward" in href


def test_a_metadata_filter_keeps_sessions_whose_value_matches(viewer_client, runs):
    assert listed(viewer_client.get(LIST, {"meta": "model:gpt-4o", "sort": "meta:reward"})) == ["run-c", "run-a"]
    assert listed(viewer_client.get(LIST, {"meta": "reward:10"})) == ["run-b"]
    assert listed(viewer_client.get(LIST, {"meta": "reward:10.0"})) == ["run-b"]  # the same number
    assert listed(viewer_client.get(LIST, {"meta": "info.task.user_id:omar"})) == ["run-c"]
    assert listed(viewer_client.get(LIST, {"meta": "model:nobody"})) == []


def test_a_metadata_filter_on_a_key_alone_keeps_sessions_that_have_it(viewer_client, runs):
    assert sorted(listed(viewer_client.get(LIST, {"meta": "reward"}))) == ["run-a", "run-b", "run-c"]
    assert sorted(listed(viewer_client.get(LIST, {"meta": "info"}))) == ["run-a", "run-c"]


def test_metadata_filters_combine(viewer_client, runs):
    response = viewer_client.get(LIST + "?meta=model:gpt-4o&meta=info.task.user_id:mia")
    assert listed(response) == ["run-a"]


def test_a_text_value_that_spells_a_number_matches_the_text_too(viewer_client, project):
    make_session(project, "texty", {"ticket": "42"})
    make_session(project, "numeric", {"ticket": 42})
    assert sorted(listed(viewer_client.get(LIST, {"meta": "ticket:42"}))) == ["numeric", "texty"]


@pytest.mark.parametrize("params, field", [
    ({"column": "rew ard"}, "Metadata column"),
    ({"column": "a" * 130}, "Metadata column"),
    ({"sort": "meta:"}, "Sort"),
    ({"sort": "meta:x'); drop table"}, "Sort"),
    ({"meta": "bad key:1"}, "Metadata"),
    ({"meta": ":1"}, "Metadata"),
])
def test_bad_metadata_parameters_are_form_errors_and_the_list_is_not_filtered_by_them(viewer_client, runs, params, field):
    response = viewer_client.get(LIST, params)
    assert response.status_code == 200
    assert sorted(listed(response)) == ["run-a", "run-b", "run-c", "run-d"]
    errors = form_errors(response)
    assert len(errors) == 1 and errors[0].startswith(field), errors
    assert parse(response).find("th", cls="meta-column") is None


def test_too_many_metadata_filters_are_a_form_error(viewer_client, runs):
    response = viewer_client.get(LIST + "?" + "&".join(f"meta=k{i}" for i in range(6)))
    assert len(form_errors(response)) == 1 and len(listed(response)) == 4


def test_the_filter_form_has_the_metadata_fields(viewer_client, runs):
    form = parse(viewer_client.get(LIST, {"meta": "reward", "column": "reward", "sort": "meta:reward"})).one("form", cls="filters")
    assert form.one("input", name="meta").get("value") == "reward"
    assert form.one("input", name="column").get("value") == "reward"
    selected = [o for o in form.one("select", name="sort").find_all("option") if "selected" in o.attrs]
    assert [o.get("value") for o in selected] == ["meta:reward"]


def test_a_metadata_column_and_sort_issue_the_same_number_of_queries_for_few_and_many_rows(viewer_client, project):
    for i in range(30):
        make_session(project, f"bulk-{i:02d}", {"reward": i % 7, "model": "m"})
    params = {"column": "reward", "sort": "meta:reward", "meta": "model:m"}

    def count(size):
        with CaptureQueriesContext(connection) as ctx:
            assert len(listed(viewer_client.get(LIST, {**params, "size": size}))) == min(size, 30)
        return len(ctx.captured_queries)

    assert count(25) == count(50)


def test_a_metadata_value_is_shown_escaped_in_its_column(viewer_client, project):
    make_session(project, "hostile", {"note": "<script>alert(1)</script>"})
    response = viewer_client.get(LIST, {"column": "note"})
    assert b"<script>alert(1)" not in response.content
    assert column_cells(response)["hostile"] == "<script>alert(1)</script>"


# --- the metadata panel ------------------------------------------------------------------------------


def panel(client, session, **query):
    response = client.get(session_url(session, **query))
    assert response.status_code == 200
    return parse(response).one("section", id="metadata")


def test_the_panel_shows_a_benchmark_runs_reward_and_task_and_where_it_was_imported_from(viewer_client, project):
    assert import_path(project, TAU_BENCH).error is None
    run = Session.objects.get(project=project, key="tau-bench-gpt-4o-airline:0")
    found = panel(viewer_client, run)
    items = {dt.text(): dt.parent.one("dd") for dt in found.find_all("dt")}
    assert items["reward"].text() == "0.0"
    assert items["task_id"].text() == "0"
    # Nested objects are listed key by key under the dotted paths the list's `column` takes ...
    assert items["info.task.user_id"].text() == "mia_li_3668"
    # ... and a long value is folded behind its first characters, whole inside.
    instruction = items["info.task.instruction"].one("details", cls="metadata-value")
    assert instruction.one("summary").text().startswith("You are mia_li_3668") and "characters" in instruction.one("summary").text()
    assert run.metadata["info"]["task"]["instruction"] in instruction.one("div", cls="text").text()
    assert '"name": "book_reservation"' in items["info.task.actions"].one("pre").text()
    source = found.one(cls="import-source").text()
    assert "tau-bench-gpt-4o-airline.json" in source and "openai" in source


def test_the_panel_links_a_parent_to_its_sub_agents_and_each_sub_agent_back(viewer_client, project):
    assert import_path(project, CLAUDE_CODE_WITH_SUB_AGENTS).error is None
    parent = Session.objects.get(project=project, key="5c0375b4-57a5-4f26-b12d-d022ee4e51b7")
    subs = list(Session.objects.filter(project=project, metadata__parent_session=parent.key).order_by("key"))
    assert len(subs) == 2

    links = panel(viewer_client, parent).one(cls="sub-agents").find_all("a")
    assert [a.get("href") for a in links] == [s.get_absolute_url() for s in subs]

    back = panel(viewer_client, subs[0]).one(cls="parent-session")
    call_id = subs[0].metadata["parent_tool_call_id"]
    assert back.find("a", cls="key").get("href") == parent.get_absolute_url()
    assert call_id in back.text()
    # ... and to the parent's message holding the tool call that started it.
    call_seq = parent.messages.get(tool_call_id=call_id).call_seq
    assert any(call["id"] == call_id for call in parent.messages.get(seq=call_seq).tool_calls)
    assert back.one("a", cls="parent-call").get("href") == f"{parent.get_absolute_url()}?seq={call_seq}#m-{call_seq}"


def test_relatives_are_found_with_one_query(project):
    for i in range(4):
        make_session(project, f"agent-{i}", {"sidechain": True, "parent_session": "main"})
    main = make_session(project, "main", {"sidechains": ["agent-0", "agent-1"]})
    main = Session.objects.select_related("project").get(pk=main.pk)
    with CaptureQueriesContext(connection) as ctx:
        found = relatives(main)
    assert len(ctx.captured_queries) == 1
    assert [s.key for s in found["sub_agents"]] == ["agent-0", "agent-1", "agent-2", "agent-3"]


def test_a_sub_agent_whose_parent_is_not_stored_names_it_without_a_link(viewer_client, project):
    orphan = make_session(project, "agent-x", {"sidechain": True, "parent_session": "gone"})
    back = panel(viewer_client, orphan).one(cls="parent-session")
    assert back.find("a") is None and "gone" in back.text() and "not stored here" in back.text()


def test_an_object_with_many_keys_is_listed_whole_as_json(viewer_client, project):
    wide = make_session(project, "wide", {"scores": {f"s{i}": i for i in range(20)}, "deep": {"a": {"b": {"c": 1}}}})
    items = {dt.text(): dt.parent.one("dd") for dt in panel(viewer_client, wide).find_all("dt")}
    assert set(items) == {"scores", "deep.a.b"}
    assert '"s19": 19' in items["scores"].text() and '"c": 1' in items["deep.a.b"].text()


def test_a_session_without_metadata_has_no_panel(viewer_client, project):
    plain = make_session(project, "plain", {})
    assert parse(viewer_client.get(session_url(plain))).find("section", id="metadata") is None


def test_metadata_in_the_panel_is_escaped(viewer_client, project):
    hostile = make_session(project, "hostile", {"note": "<img src=x onerror=alert(1)>"})
    response = viewer_client.get(session_url(hostile))
    assert b"<img src=x onerror" not in response.content


# --- quiet messages ------------------------------------------------------------------------------------


def test_attributes_are_folded_and_empty_or_bookkeeping_ones_are_behind_n_more(viewer_client, project):
    append_messages(project, "quiet", [{"role": "user", "content": "hi", "attributes": {
        "ticket": "T-9", "function_call": None, "uuid": "5877060c", "parentUuid": None, "cwd": "/repo"}}], "test")
    session = Session.objects.get(project=project, key="quiet")
    doc = parse(viewer_client.get(session_url(session)))
    folded = doc.one("article", id="m-1").one("details", cls="attributes")
    assert "open" not in folded.attrs
    assert folded.find("summary").text().startswith("attributes · 1 shown · 4 more")
    shown = folded.find_all("table", cls="attributes")[0]
    assert [th.text() for th in shown.find_all("th")] == ["ticket"]
    more = folded.one("details", cls="more-attributes")
    # (PostgreSQL's jsonb keeps keys in an order of its own.)
    assert sorted(th.text() for th in more.find_all("th")) == ["cwd", "function_call", "parentUuid", "uuid"]


def long_text_session(project):
    text = "Policy. " + "Rule: never book basic economy changes. " * 60 + "THE LAST RULE"
    assert len(text) > FOLD_CHARS
    update_session(project, "long-prompt", {"instructions": text}, "test")
    append_messages(project, "long-prompt", [{"role": "user", "content": text}, {"role": "user", "content": "short"}], "test")
    return Session.objects.get(project=project, key="long-prompt"), text


def test_a_long_message_is_folded_to_a_preview_with_its_token_count_in_both_columns(viewer_client, project):
    session, text = long_text_session(project)
    doc = parse(viewer_client.get(session_url(session)))
    message = doc.one("article", id="m-1")
    folded = message.one("div", cls="folded")
    rest = folded.one("div", cls="fold-rest")
    assert rest.get("hidden") == "until-found"
    assert "THE LAST RULE" in rest.text() and "THE LAST RULE" not in folded.text()[:700]
    tokens = session.messages.get(seq=1).tokens
    assert f"{tokens} tokens" in message.one("button", cls="fold-toggle").text()
    # The model input folds it too, and the session's instructions (a long system prompt).
    column = doc.one("section", id="model-input-column")
    assert column.one("article", cls="instructions").find("div", cls="folded") is not None
    assert column.one("article", cls="entry", **{"data-seq": "1"}).find("div", cls="folded") is not None
    # A short message is not folded.
    assert doc.one("article", id="m-2").find("div", cls="folded") is None


def test_a_folded_message_asked_for_by_seq_opens_whole(viewer_client, project):
    session, text = long_text_session(project)
    doc = parse(viewer_client.get(session_url(session, seq=1, q="LAST RULE")))
    message = doc.one("article", id="m-1")
    assert message.find("div", cls="folded") is None
    assert "THE LAST RULE" in message.one("div", cls="text").text()


@pytest.mark.parametrize("params", [
    {"column": "0", "sort": "meta:0"}, {"meta": "0:1"}, {"meta": "reward:null"}, {"meta": "reward:[1, 2]"},
    {"meta": "reward:{\"a\": 1}"}, {"meta": "info.task:x"}, {"column": "info.task.actions.0.name"},
])
def test_odd_but_well_formed_metadata_parameters_answer_without_error(viewer_client, runs, params):
    response = viewer_client.get(LIST, params)
    assert response.status_code == 200
    assert form_errors(response) == []
