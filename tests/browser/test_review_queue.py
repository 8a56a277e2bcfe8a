"""A viewer works through a review queue in Chromium (issue 40, items 1-3): the queue of the failed runs
(`meta=reward<1`, three of four sessions), "Start reviewing", a review on each session page with "Save
and next", until the queue says it is done, with its progress by verdict and the review on the list."""

import pytest

from sessions.ingest.append import append_messages
from sessions.models import Review, Session
from sessions.store.review_queues import create_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VERDICTS = ["problem", "ok", "unsure"]


def failed_runs(project, users) -> int:
    for n in range(4):
        append_messages(project, f"run-{n}", [{"role": "user", "content": f"Refund order W{n:04d}, please."},
                                              {"role": "assistant", "content": f"Order W{n:04d} is refunded."}], "test")
        Session.objects.filter(project=project, key=f"run-{n}").update(metadata={"reward": 1 if n == 3 else 0})
    return create_queue(project, users["admin"], "Failed runs", "meta=reward<1", ["wrong-refund", "rude"]).pk


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_a_viewer_works_through_a_queue_of_three_sessions(live_server, login, users, page, project, shot, width, height):
    queue = failed_runs(project, users)
    page.set_viewport_size({"width": width, "height": height})
    login(page, "viewer")
    page.goto(live_server.url + "/queues/")
    with page.expect_navigation():
        page.click("text=Failed runs")
    assert page.locator("[data-testid=queue-reviewed]").inner_text() == "0 of 3"
    with page.expect_navigation():
        page.click("text=Start reviewing")

    seen = []
    for verdict in VERDICTS:
        assert page.url.endswith(f"?queue={queue}")
        seen.append(page.url.split("/s/")[1].split("/")[0])
        assert "yours until" in page.locator("[data-testid=queue-banner]").inner_text()
        page.click("text=record your review")
        form = page.locator("form.review-form")
        form.locator(f"input[name=verdict][value={verdict}]").check()
        if verdict == "problem":
            form.locator("input[name=labels][value=wrong-refund]").check()
            form.locator("select[name=score]").select_option("2")
            form.locator("input[name=seqs]").fill("2")
            form.locator("textarea[name=comment]").fill("Refunded the order before checking the policy.")
            shot(page, f"review-form-{width}")
        with page.expect_navigation():
            form.locator("button[name=next]").click()
        assert "saved" in page.locator(".flash").inner_text()

    assert sorted(seen) == ["run-0", "run-1", "run-2"]  # each once, never the run with reward 1
    assert page.url.endswith(f"/queues/{queue}/")
    assert "is done" in page.locator(".flash").inner_text()
    assert page.locator("[data-testid=queue-reviewed]").inner_text() == "3 of 3"
    assert page.locator("table.by-verdict tbody").inner_text().split() == ["ok", "1", "problem", "1", "unsure", "1"]
    assert page.locator("text=Download the reviews (CSV)").count() == 1
    shot(page, f"review-queue-done-{width}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    problem = Review.objects.get(verdict="problem")
    assert (problem.labels, problem.score, problem.seqs) == (["wrong-refund"], 2, [2])

    # The list shows each run's verdict, and filters by it.
    page.goto(live_server.url + "/?verdict=problem")
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 1 and problem.session.key in rows.first.inner_text()
