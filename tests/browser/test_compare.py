"""Comparing two conversations in Chromium (issue 40, item 4): from a tau-bench run's page, "Compare with…"
another run of the same task (task 6 of tests/data: run 6 earned reward 1, run 56 reward 0); the page says
where they first differ, shows both rewards, and lines up what is the same."""

import pytest

from sessions.models import Session

from .stored_data import stored
from .test_metadata import TAU_BENCH, imported

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GOOD, BAD = "tau-bench-gpt-4o-airline:6", "tau-bench-gpt-4o-airline:56"


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_a_viewer_compares_two_runs_of_one_task_and_finds_where_they_diverge(live_server, login, page, project,
                                                                             shot, width, height):
    stored(project, imported, TAU_BENCH)
    page.set_viewport_size({"width": width, "height": height})
    login(page, "viewer")
    page.goto(live_server.url + Session.objects.get(project=project, key=GOOD).get_absolute_url())
    with page.expect_navigation():
        page.click("a.compare-link")
    page.fill("input[name=b]", BAD)
    with page.expect_navigation():
        page.click(".compare-form button[type=submit]")

    verdict = page.locator("[data-testid=compare-verdict]")
    assert "first differ at" in verdict.inner_text()
    heads = page.locator(".compare-side")
    assert "reward" in heads.nth(0).inner_text() and "reward" in heads.nth(1).inner_text()
    assert page.locator("tr.same").count() > 0
    diverged = page.locator("tr.diverged")
    assert diverged.count() == 1
    shot(page, f"compare-tau-bench-top-{width}")
    verdict.locator("a").click()
    assert diverged.is_visible()
    shot(page, f"compare-tau-bench-{width}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
