"""The API keys page: admins create keys (the secret shown once, stored as a hash) and
revoke them; other roles manage no keys."""

import hashlib
import json

import pytest
from django.test import Client
from django.urls import reverse

from sessions.access.api_keys import create_api_key
from sessions.models import ApiKey
from tests.api.conftest import HOST

from .dom import parse

PAGE = reverse("api_keys")


def create(client, project="default", name="support-bot"):
    return client.post(PAGE, {"project": project, "name": name})


def shown_secret(client, **key) -> str:
    """Create a key (post), follow the redirect (get) and read the secret the page shows."""
    response = create(client, **key)
    assert (response.status_code, response["Location"]) == (302, PAGE)
    page = client.get(PAGE)
    assert page.status_code == 200
    return parse(page).one("code", id="new-secret").text()


def test_an_admin_sees_the_page_with_a_create_form(admin_client):
    doc = parse(admin_client.get(PAGE))
    form = doc.one("form", action=PAGE)
    assert [o.text() for o in form.one("select", name="project").find_all("option")] == ["default"]


def test_an_admin_creates_a_key_and_sees_its_secret_once(admin_client, admin_user):
    secret = shown_secret(admin_client)
    key = ApiKey.objects.get(name="support-bot")
    assert key.project.name == "default"
    assert key.created_by == admin_user
    assert key.secret_hash != secret
    assert key.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret.startswith(key.prefix)
    assert not ApiKey.objects.filter(secret_hash=secret).exists()
    again = admin_client.get(PAGE)
    assert secret.encode() not in again.content
    assert parse(again).find(id="new-secret") is None
    row = next(tr for tr in parse(again).find_all("tr") if "support-bot" in tr.text())
    assert key.prefix in row.text() and "active" in row.text()


def test_the_created_secret_works_against_the_api(admin_client, story):
    secret = shown_secret(admin_client)
    response = admin_client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200, response.content[:300]
    assert "story" in response.content.decode()


def test_the_secret_is_shown_once_after_a_redirect_never_cached_and_a_refresh_creates_no_second_key(
        admin_client):
    posted = create(admin_client)

    assert posted.status_code == 302 and posted["Location"] == PAGE
    assert b"ctx_" not in posted.content
    shown = admin_client.get(PAGE)
    secret = parse(shown).one("code", id="new-secret").text()
    assert secret.startswith("ctx_")
    assert "no-store" in shown["Cache-Control"]
    refreshed = admin_client.get(PAGE)
    assert secret.encode() not in refreshed.content
    assert parse(refreshed).find(id="new-secret") is None
    assert ApiKey.objects.count() == 1
    assert secret not in str(dict(admin_client.session))


def test_a_key_needs_a_name(admin_client):
    response = create(admin_client, name="   ")
    assert response.status_code == 200
    assert ApiKey.objects.count() == 0
    assert parse(response).find(id="new-secret") is None
    assert "name" in parse(response).one(cls="flash").text()


def test_an_admin_revokes_a_key_and_the_api_then_refuses_it(admin_client, project, story):
    key, secret = create_api_key(project, "old-app")
    auth = {"Authorization": f"Bearer {secret}"}
    assert admin_client.get("/api/v1/sessions", headers=auth).status_code == 200
    response = admin_client.post(reverse("api_key_revoke", args=[key.pk]))
    assert response.status_code == 302
    assert response["Location"] == PAGE
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert admin_client.get("/api/v1/sessions", headers=auth).status_code == 401
    row = next(tr for tr in parse(admin_client.get(PAGE)).find_all("tr") if "old-app" in tr.text())
    assert "revoked" in row.text()
    assert row.find("form") is None


def test_revoking_twice_keeps_the_first_revocation_time(admin_client, project):
    key, _ = create_api_key(project, "old-app")
    admin_client.post(reverse("api_key_revoke", args=[key.pk]))
    key.refresh_from_db()
    first = key.revoked_at
    admin_client.post(reverse("api_key_revoke", args=[key.pk]))
    key.refresh_from_db()
    assert key.revoked_at == first


def test_revoke_must_be_a_post(admin_client, project):
    key, _ = create_api_key(project, "old-app")
    assert admin_client.get(reverse("api_key_revoke", args=[key.pk])).status_code == 405
    key.refresh_from_db()
    assert key.revoked_at is None


def test_revoking_an_unknown_key_is_404(admin_client):
    assert admin_client.post(reverse("api_key_revoke", args=[999_999])).status_code == 404


@pytest.mark.parametrize("who", ["viewer_client", "editor_client"])
def test_viewers_and_editors_get_404_on_the_page_they_manage_no_keys(request, who, project):
    client = request.getfixturevalue(who)
    assert client.get(PAGE).status_code == 404
    assert create(client).status_code == 404
    assert ApiKey.objects.count() == 0
    nav = parse(client.get(reverse("sessions"))).one("header", cls="topbar").one("nav")
    assert PAGE not in [a.get("href") for a in nav.find_all("a")]


@pytest.mark.parametrize("who", ["viewer_client", "editor_client"])
def test_viewers_and_editors_cannot_revoke(request, who, project):
    client = request.getfixturevalue(who)
    key, _ = create_api_key(project, "app")
    assert client.post(reverse("api_key_revoke", args=[key.pk])).status_code in (403, 404)
    key.refresh_from_db()
    assert key.revoked_at is None


def test_an_admin_of_one_project_cannot_create_or_revoke_keys_of_another(admin_client, other_project):
    assert create(admin_client, project="other").status_code == 404
    assert not ApiKey.objects.filter(project=other_project).exists()
    key, _ = create_api_key(other_project, "their-app")
    assert admin_client.post(reverse("api_key_revoke", args=[key.pk])).status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None
    assert b"their-app" not in admin_client.get(PAGE).content


def test_an_admin_sees_the_api_keys_link(admin_client):
    nav = parse(admin_client.get(reverse("sessions"))).one("header", cls="topbar").one("nav")
    assert PAGE in [a.get("href") for a in nav.find_all("a")]


def test_a_superuser_manages_every_projects_keys(superuser_client, other_project):
    secret = shown_secret(superuser_client, project="other", name="theirs")
    assert ApiKey.objects.get(name="theirs").project == other_project
    assert secret


def test_each_key_shows_its_last_minutes_requests_bytes_and_refusals(admin_client, project, settings):
    settings.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE = 3
    busy, secret = create_api_key(project, "busy-bot")
    create_api_key(project, "idle-bot")
    api = Client(HTTP_HOST=HOST, headers={"Authorization": f"Bearer {secret}"})
    body = json.dumps({"messages": [{"role": "user", "content": "x" * 2000}]})
    for _ in range(3):
        assert api.post("/api/v1/tokens", body, content_type="application/json").status_code == 200
    assert api.get("/api/v1/sessions").status_code == 429

    doc = parse(admin_client.get(PAGE))
    assert "3 requests" in doc.one(id="rate-limits").text()
    rows = {tr.find_all("td")[0].text(): tr for tr in doc.find_all("tr") if tr.find_all("td")}
    busy_usage = rows["busy-bot"].one("td", cls="usage").text()
    assert "3 requests" in busy_usage and "6.0 KB sent" in busy_usage
    assert "1 refused" in busy_usage and "1 refused in all" in busy_usage
    assert rows["idle-bot"].one("td", cls="usage").text().startswith("0 requests, 0 bytes sent")
