"""With DEBUG on, as under `make run`, a page of the product that does not exist gets the product's own
404 page, not Django's technical one (issue 39, item 10). The API keeps its JSON."""

import json

import pytest
from django.test import override_settings

from .dom import parse


@pytest.fixture
def debug_on():
    with override_settings(DEBUG=True):
        yield


@pytest.mark.parametrize("path", ["/p/default/s/no-such-session/", "/no-such-page/", "/p/nowhere/"])
def test_a_missing_page_is_the_products_404_page_in_debug_mode(debug_on, viewer_client, story, path):
    response = viewer_client.get(path)
    assert response.status_code == 404
    html = response.content.decode()
    assert "URLconf" not in html and "Using the URLconf" not in html and "technical_404" not in html
    doc = parse(response)
    assert doc.one("header", cls="topbar").one("a", cls="brand").get("href") == "/"
    assert doc.one("main").text().strip()


def test_a_views_sentence_is_kept(debug_on, viewer_client, story):
    response = viewer_client.get("/p/default/s/no-such-session/")
    assert "No" in parse(response).one("main").text()


def test_the_api_still_answers_json_in_debug_mode(debug_on, client):
    response = client.get("/api/v1/no-such-endpoint")
    assert response.status_code in (401, 404)
    json.loads(response.content)
