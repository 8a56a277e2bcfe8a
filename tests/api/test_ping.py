"""GET /api/v1/ping: authenticates like every call and says which project and key it is (issue 20's HTTP
floor in the benchmark)."""

from sessions.models import Event, Message, Session


def test_ping_names_the_project_and_the_key(api, project):
    response = api.get("/ping")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["project"] == project.name
    assert body["key"] == "test-app"
    assert api.secret.startswith(body["key_prefix"])


def test_ping_answers_for_the_key_it_is_sent(api, other_key, other_project):
    assert api.with_key(other_key).get("/ping").json()["project"] == other_project.name


def test_ping_refuses_a_missing_a_wrong_and_a_revoked_key(api, revoked_key):
    from tests.api.conftest import UNKNOWN_SECRET

    assert api.get("/ping", secret=None).status_code == 401
    assert api.get("/ping", secret=UNKNOWN_SECRET).status_code == 401
    assert api.get("/ping", secret=revoked_key).status_code == 401


def test_ping_stores_nothing(api):
    api.get("/ping")
    assert not Session.objects.exists() and not Message.objects.exists() and not Event.objects.exists()
