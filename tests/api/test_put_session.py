"""PUT /api/v1/sessions/{key}: create (201) or update (200) a session."""

import pytest

from sessions.models import Event, Session
from sessions.wire.tokens import count_message
from tests.api.conftest import assert_error, session_state, stored, too_big_text

pytestmark = pytest.mark.django_db

FULL = {
    "title": "Trip planning",
    "metadata": {"customer": 42, "tags": ["travel"]},
    "instructions": "You are a travel assistant.",
    "compaction": {"max_tokens": 5000, "keep_recent_tokens": 1000, "auto": False, "summarizer": "extractive"},
}


@pytest.fixture
def trip(api):
    assert api.put("/sessions/trip", FULL).status_code == 201
    return "trip"


def test_it_creates_a_session_with_201_and_returns_it(api, project):
    response = api.put("/sessions/trip", FULL)

    assert response.status_code == 201
    body = response.json()
    assert body["key"] == "trip"
    assert body["title"] == "Trip planning"
    assert body["metadata"] == {"customer": 42, "tags": ["travel"]}
    assert body["instructions"] == "You are a travel assistant."
    assert body["instructions_tokens"] == count_message("system", "You are a travel assistant.").total
    assert body["compaction"] == {"max_tokens": 5000, "keep_recent_tokens": 1000, "auto": False,
                                  "summarizer": "extractive"}
    assert body["message_count"] == 0
    assert body["checkpoint_count"] == 0
    # An empty session's model input is its instructions plus reply priming.
    assert body["model_input_tokens"] == body["instructions_tokens"] + 3
    session = Session.objects.get(project=project, key="trip")
    assert session.max_tokens == 5000 and session.auto_compact is False
    assert list(session.events.values_list("type", "actor")) == [("SESSION_CREATED", "api:test-app")]


def test_it_creates_a_session_from_an_empty_body_with_the_default_settings(api, settings):
    settings.CTXWEB_MAX_TOKENS = 7777

    response = api.put("/sessions/bare", {})

    assert response.status_code == 201
    assert response.json()["title"] == ""
    assert response.json()["compaction"]["max_tokens"] == 7777


def test_it_updates_only_the_fields_given_with_200(api, trip, project):
    response = api.put("/sessions/trip", {"title": "Trip to Lisbon", "compaction": {"max_tokens": 6000}})

    assert response.status_code == 200
    body = response.json()
    assert body["title"] == "Trip to Lisbon"
    assert body["metadata"] == FULL["metadata"]
    assert body["instructions"] == FULL["instructions"]
    assert body["compaction"]["max_tokens"] == 6000
    assert body["compaction"]["keep_recent_tokens"] == 1000
    event = Event.objects.filter(session__key="trip", type="SESSION_UPDATED").get()
    assert sorted(event.data["fields"]) == ["max_tokens", "title"]


def test_new_instructions_change_the_model_input_tokens(api, trip):
    before = api.get("/sessions/trip").json()

    body = api.put("/sessions/trip", {"instructions": "You are a terse travel assistant who answers in French."}).json()

    assert body["instructions_tokens"] == count_message(
        "system", "You are a terse travel assistant who answers in French.").total
    assert body["model_input_tokens"] - before["model_input_tokens"] == (
        body["instructions_tokens"] - before["instructions_tokens"])


def test_it_records_nothing_when_nothing_changes(api, trip):
    before = stored()

    response = api.put("/sessions/trip", FULL)

    assert response.status_code == 200
    assert stored() == before


@pytest.mark.parametrize("body", [
    pytest.param({"title": "x", "colour": "blue"}, id="unknown field"),
    pytest.param({"title": 12}, id="title not a string"),
    pytest.param({"title": "x" * 301}, id="title too long"),
    pytest.param({"metadata": ["not", "an", "object"]}, id="metadata not an object"),
    pytest.param({"instructions": ["list"]}, id="instructions not a string"),
    pytest.param({"compaction": {"max_tokens": 0}}, id="max_tokens zero"),
    pytest.param({"compaction": {"max_tokens": -5}}, id="max_tokens negative"),
    pytest.param({"compaction": {"keep_recent_tokens": "many"}}, id="keep_recent_tokens not a number"),
    pytest.param({"compaction": {"summarizer": "magic"}}, id="unknown summarizer"),
    pytest.param({"compaction": {"maximum": 5}}, id="unknown compaction setting"),
    pytest.param([1, 2], id="body not an object"),
])
def test_it_rejects_a_bad_body_with_422_and_changes_nothing(api, trip, project, body):
    before, state = stored(), session_state(project, "trip")

    assert_error(api.put("/sessions/trip", body), 422, "invalid_request")
    assert_error(api.put("/sessions/new-one", body), 422, "invalid_request")

    assert stored() == before
    assert session_state(project, "trip") == state


def test_it_rejects_text_a_database_cannot_store_with_422(api, trip, project):
    before, state = stored(), session_state(project, "trip")

    assert_error(api.put("/sessions/trip", {"title": "nul \x00 byte"}), 422)
    assert_error(api.put("/sessions/new-one", {"metadata": {"k": "nul \x00 byte"}}), 422)

    assert stored() == before
    assert session_state(project, "trip") == state


def test_it_rejects_a_body_that_is_not_json_with_400(api, trip, project):
    before, state = stored(), session_state(project, "trip")

    assert_error(api.put("/sessions/trip", data="{title: 'x'"), 400, "invalid_json")
    assert_error(api.put("/sessions/new-one", data="title=x", content_type="text/plain"), 400, "invalid_json")

    assert stored() == before
    assert session_state(project, "trip") == state


def test_it_rejects_an_oversized_body_with_413(api, trip, project, small_request_limit):
    before, state = stored(), session_state(project, "trip")

    response = api.put("/sessions/trip", {"instructions": too_big_text(small_request_limit)})

    assert_error(response, 413, "request_too_large")
    assert stored() == before
    assert session_state(project, "trip") == state


@pytest.mark.parametrize("path", ["/sessions/bad%20key", "/sessions/semi%3Bcolon", "/sessions/" + "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, path):
    before = stored()

    assert_error(api.put(path, {"title": "x"}), 422, "invalid_session_key")

    assert stored() == before


def test_it_rejects_a_request_without_a_valid_key_with_401(api, trip, project, bad_credentials):
    kwargs, code = bad_credentials
    before, state = stored(), session_state(project, "trip")

    assert_error(api.put("/sessions/trip", {"title": "stolen"}, **kwargs), 401, code)
    assert_error(api.put("/sessions/new-one", {"title": "stolen"}, **kwargs), 401, code)

    assert stored() == before
    assert session_state(project, "trip") == state


def test_another_projects_key_creates_its_own_session_and_never_touches_this_one(other_api, trip, project,
                                                                                 other_project):
    state = session_state(project, "trip")

    response = other_api.put("/sessions/trip", {"title": "Theirs"})

    assert response.status_code == 201
    assert response.json()["title"] == "Theirs"
    assert response.json()["instructions"] == ""
    assert session_state(project, "trip") == state
    assert Session.objects.get(project=other_project, key="trip").title == "Theirs"
