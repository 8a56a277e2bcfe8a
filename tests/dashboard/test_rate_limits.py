"""The dashboard's per-user rate limits (security issue 37, item 5; sessions/access/dashboard_limits.py): a
logged-in member's requests, and the CPU-heavy ones (previews, traces, exports, searches), are bounded per
minute like an API key's; past the bound the answer is a 429 page saying when to come back, with
Retry-After, and the request does nothing."""

import pytest

from sessions.models import DashboardBudget

from .conftest import session_url


@pytest.fixture
def limits(settings):
    settings.CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE = 600
    settings.CTXWEB_DASHBOARD_HEAVY_PER_MINUTE = 3
    return settings


def test_previews_past_the_heavy_budget_get_a_429_page_and_pages_still_answer(limits, viewer_client, story):
    preview = session_url(story.session, "what-if/", max_tokens=2000, keep_recent_tokens=500)
    answers = [viewer_client.get(preview).status_code for _ in range(5)]
    assert answers == [200, 200, 200, 429, 429]
    refused = viewer_client.get(preview)
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 20
    assert b"Too many requests (429)" in refused.content
    assert b"previews, traces, exports, searches and imports" in refused.content
    # Pages that are not heavy are still served, and another user has a budget of their own.
    assert viewer_client.get(session_url(story.session)).status_code == 200


def test_a_fragment_gets_a_sentence_for_its_target(limits, viewer_client, story):
    url = session_url(story.session, "trace/", q="Lisbon")
    for _ in range(3):
        assert viewer_client.get(url, headers={"HX-Request": "true"}).status_code == 200
    refused = viewer_client.get(url, headers={"HX-Request": "true"})
    assert refused.status_code == 429 and refused.content.startswith(b'<p class="notice bad" role="alert">')


def test_every_request_counts_against_the_requests_budget(limits, viewer_client, editor_client, story):
    limits.CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE = 4
    answers = [viewer_client.get(session_url(story.session)).status_code for _ in range(6)]
    assert answers == [200, 200, 200, 200, 429, 429]
    assert DashboardBudget.objects.get(user__username="viewer").throttled_total == 2
    assert editor_client.get(session_url(story.session)).status_code == 200


def test_the_api_and_static_files_are_not_counted_here(limits, viewer_client):
    limits.CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE = 1
    for _ in range(3):
        assert viewer_client.get("/api/v1/ping").status_code == 401  # the API's own key checks, not these
    assert not DashboardBudget.objects.exists()
