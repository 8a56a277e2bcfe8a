"""Session metadata in the browser: a benchmark run's reward and task in the metadata panel, links from a
Claude Code session to its sub-agents and back, the sessions list with a metadata column sorted by it,
and quiet messages (attributes folded behind "n more", a long system prompt folded to a preview)."""

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from sessions.ingest.importers.runner import import_path
from sessions.models import Session

from .data import session_url
from .helpers import mark_page, open_fold, page_was_reloaded
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
CLAUDE_CODE = DATA / "claude-code" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
PARENT = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
TAU_BENCH = DATA / "openai-chat" / "tau-bench-gpt-4o-airline.json"
WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


def imported(project, path: Path) -> None:
    report = import_path(project, path)
    assert report.error is None, report.error


@pytest.fixture
def tau_bench(project):
    stored(project, imported, TAU_BENCH)  # 200 runs: imported once, then copied back
    return Session.objects.get(project=project, key="tau-bench-gpt-4o-airline:6")  # reward 1.0


@pytest.fixture
def claude_code(project):
    stored(project, imported, CLAUDE_CODE)
    return Session.objects.get(project=project, key=PARENT)


def test_a_benchmark_runs_reward_and_task_are_in_the_metadata_panel(live_server, login, page, tau_bench, shot):
    page.set_viewport_size(WIDE)
    login(page, "viewer")
    page.goto(session_url(live_server.url, tau_bench.key))
    open_fold(page, "metadata")
    panel = page.locator("#metadata")

    def value(key):
        return panel.locator(".metadata-item", has=page.locator("dt", has_text=re.compile(f"^{re.escape(key)}$"))).locator("dd")

    expect(value("reward")).to_have_text("1.0")
    expect(value("task_id")).to_have_text("6")
    expect(value("info.task.user_id")).to_have_text("aarav_garcia_1177")
    expect(panel.locator(".import-source")).to_contain_text("tau-bench-gpt-4o-airline.json")
    task = value("info.task.instruction").locator("details")
    expect(task.locator("summary")).to_contain_text("You are aarav_garcia_1177")
    expect(task.locator(".text")).not_to_be_visible()
    shot(page, "metadata-panel-tau-bench")
    task.locator("summary").click()
    expect(task.locator(".text")).to_be_visible()
    expect(task.locator(".text")).to_contain_text("happy with original payment for refund")
    shot(page, "metadata-panel-tau-bench-task-open")
    page.emulate_media(color_scheme="dark")
    shot(page, "metadata-panel-tau-bench-dark")


def test_a_long_system_prompt_is_folded_with_its_token_count_and_shows_whole_on_demand(live_server, login, page, tau_bench, shot):
    page.set_viewport_size(WIDE)
    login(page, "viewer")
    page.goto(session_url(live_server.url, tau_bench.key))
    open_fold(page, "metadata")
    instructions = page.locator("#model-input-column article.instructions")
    expect(instructions.locator(".fold-toggle")).to_contain_text(f"{tau_bench.instructions_tokens} tokens")
    rest = instructions.locator(".fold-rest")
    expect(rest).to_be_hidden()
    system = page.locator(".raw-log .msg.role-system").first
    expect(system.locator(".fold-rest")).to_be_hidden()
    page.evaluate("document.getElementById('raw-log-column').scrollIntoView()")
    shot(page, "metadata-long-system-prompt-folded")
    mark_page(page)

    instructions.locator(".fold-toggle").click()

    expect(rest).to_be_visible()
    expect(instructions.locator(".fold-toggle")).to_have_attribute("aria-expanded", "true")
    expect(instructions.locator(".fold-toggle")).to_contain_text("Fold")
    assert not page_was_reloaded(page)
    shot(page, "metadata-long-system-prompt-unfolded")
    instructions.locator(".fold-toggle").click()
    expect(rest).to_be_hidden()


def test_a_folded_message_opened_by_seq_and_term_shows_whole(live_server, login, page, tau_bench):
    login(page, "viewer")
    system = tau_bench.messages.get(seq=1)
    term = system.text[-40:].strip().split()[-1]
    page.goto(session_url(live_server.url, tau_bench.key) + f"?seq=1&q={term}")
    message = page.locator("#m-1")
    expect(message.locator(".fold-rest")).to_have_count(0)
    expect(message.locator(".text")).to_contain_text(system.text[-40:].strip())
    # The same message in the model input holds the term too, so it opens whole there as well.
    entry = page.locator("#model-input-column article.entry[data-seq='1'] .fold-rest")
    if entry.count():
        expect(entry).to_be_visible()


def test_a_parent_links_to_its_sub_agents_and_each_back_to_the_parent(live_server, login, page, claude_code, shot):
    page.set_viewport_size(WIDE)
    login(page, "viewer")
    page.goto(session_url(live_server.url, PARENT))
    open_fold(page, "metadata")
    links = page.locator("#metadata .sub-agents a")
    expect(links).to_have_count(2)
    shot(page, "metadata-claude-code-parent")
    with page.expect_navigation():
        links.first.click()
    assert "agent-" in page.url
    back = page.locator("#metadata .parent-session a.key")
    expect(back).to_have_count(1)
    expect(page.locator("#metadata .parent-session")).to_contain_text("started by tool call")
    shot(page, "metadata-claude-code-sub-agent")
    with page.expect_navigation():
        back.click()
    assert page.url.rstrip("/").endswith(PARENT)


def test_claude_code_attributes_are_folded_with_n_more(live_server, login, page, claude_code, shot):
    page.set_viewport_size(WIDE)
    login(page, "viewer")
    page.goto(session_url(live_server.url, PARENT) + "?seq=3")
    open_fold(page, "metadata")
    message = page.locator("#m-3")
    attributes = message.locator("details.attributes")
    summary = attributes.locator("> summary")
    expect(summary).to_contain_text("more")
    expect(summary).to_have_text(re.compile(r"attributes · \d+ shown · \d+ more"))
    expect(attributes.locator("table").first).to_be_hidden()
    shot(page, "metadata-attributes-folded")
    summary.click()
    more = attributes.locator("details.more-attributes")
    expect(more.locator("> summary")).to_be_visible()
    expect(more.locator("th", has_text="parentUuid")).to_be_hidden()
    more.locator("> summary").click()
    expect(more.locator("th", has_text="parentUuid")).to_be_visible()
    message.scroll_into_view_if_needed()
    shot(page, "metadata-attributes-open")
    page.emulate_media(color_scheme="dark")
    shot(page, "metadata-attributes-open-dark")


def test_the_sessions_list_shows_and_sorts_by_a_metadata_column(live_server, login, page, tau_bench, shot):
    page.set_viewport_size(WIDE)
    login(page, "viewer")
    page.goto(live_server.url + "/?column=reward&sort=meta:reward&size=50")
    header = page.locator("#session-rows th.meta-column")
    expect(header).to_contain_text("reward")
    cells = page.locator("#session-rows td.meta-column")
    expect(cells.first).to_be_visible()
    values = [float(v) for v in cells.all_inner_texts()]
    assert values == sorted(values, reverse=True) and values[0] == 1.0
    shot(page, "metadata-list-reward-column")
    page.goto(live_server.url + "/?column=reward&sort=meta:reward&size=50&page=4")  # 200 runs: the last page
    values = [float(v) for v in page.locator("#session-rows td.meta-column").all_inner_texts()]
    assert values == sorted(values, reverse=True) and values[-1] == 0.0

    page.fill("input[name=meta]", "reward:0")
    page.locator("input[name=meta]").dispatch_event("change")
    expect(page.locator("#session-rows td.meta-column").first).to_have_text("0.0")
    assert set(page.locator("#session-rows td.meta-column").all_inner_texts()) == {"0.0"}

    page.set_viewport_size(PHONE)
    page.goto(live_server.url + "/?column=reward&sort=meta:reward")
    expect(page.locator("#session-rows td.meta-column").first).to_be_visible()
    shot(page, "metadata-list-reward-column-phone", full_page=False)


def test_a_bad_metadata_parameter_is_a_form_error_on_the_list(live_server, login, page, tau_bench):
    login(page, "viewer")
    response = page.goto(live_server.url + "/?column=no%20spaces&sort=meta:")
    assert response.status == 200
    expect(page.locator(".form-errors li")).to_have_count(2)


def test_a_page_opened_to_look_for_a_term_unfolds_the_texts_holding_it(live_server, login, page, tau_bench):
    login(page, "viewer")
    system = tau_bench.messages.get(seq=1)
    phrase = system.text[2000:2030]
    page.goto(session_url(live_server.url, tau_bench.key) + "?" + urlencode({"q": phrase}))
    raw = page.locator("#m-1")
    expect(raw.locator(".fold-rest")).to_be_visible()
    expect(raw.locator(".fold-rest")).to_contain_text(phrase)
    # A folded text without the term stays folded.
    page.goto(session_url(live_server.url, tau_bench.key) + "?q=no-such-phrase-anywhere")
    expect(page.locator("#m-1 .fold-rest")).to_be_hidden()
