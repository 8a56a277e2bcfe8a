"""GET /project and PATCH /project (masking of personal data), and the answers of an API key marked
`masked` (sessions/access/masking_policy.py): where the project masks, every JSON answer and download it
gets is masked; the application's own keys get the real text; a masked key cannot turn masking off."""

import json

import pytest

from sessions.access.api_keys import create_api_key
from sessions.ingest.append import append_messages
from sessions.models import Project
from tests.api.conftest import Api, assert_error

pytestmark = pytest.mark.django_db

EMAIL, CARD, SECRET = "mia.li@example.com", "4111 1111 1111 1111", "sk-proj-Abcdef1234567890XYZabcdef1234"


@pytest.fixture
def masked_api(project) -> Api:
    return Api(create_api_key(project, "support-tool", masked=True)[1])


@pytest.fixture
def pii(project):
    append_messages(project, "pii", [
        {"role": "user", "content": f"I am {EMAIL}; card {CARD}."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "name": "charge", "arguments": json.dumps({"card": CARD, "key": SECRET})}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ], "test")


def raw(response) -> str:
    assert response.status_code == 200, response.content[:300]
    return (b"".join(response.streaming_content) if response.streaming else response.content).decode()


def test_masking_is_off_until_the_project_turns_it_on(api, masked_api, pii):
    body = api.get("/project").json()
    assert (body["name"], body["key_masked"], body["masking"]) == ("default", False, {"enabled": False, "patterns": []})
    assert EMAIL in raw(masked_api.get("/sessions/pii/messages"))
    body = api.patch("/project", json={"masking": {"enabled": True, "patterns": [
        {"name": "order", "pattern": "W[0-9]{7}"}]}}).json()
    assert body["masking"] == {"enabled": True, "patterns": [{"name": "order", "pattern": "W[0-9]{7}"}]}
    assert Project.objects.get(name="default").masking["enabled"] is True


@pytest.mark.parametrize("path", ["/sessions/pii/messages", "/sessions/pii/model-input", "/sessions/pii",
                                  "/sessions/pii/export?format=json", "/sessions/pii/export?format=jsonl",
                                  "/sessions/pii/export?format=markdown", "/sessions/pii/events"])
def test_a_masked_key_gets_every_answer_masked_and_the_applications_key_does_not(api, masked_api, pii, path):
    api.patch("/project", json={"masking": {"enabled": True}})
    masked, real = raw(masked_api.get(path)), raw(api.get(path))
    assert EMAIL not in masked and CARD not in masked and SECRET not in masked, path
    if "messages" in path or "export" in path or "model-input" in path:
        assert "[email]" in masked and "[card •••• 1111]" in masked, path
        assert EMAIL in real or json.dumps(EMAIL)[1:-1] in real, path


def test_a_masked_key_cannot_turn_masking_off(api, masked_api):
    api.patch("/project", json={"masking": {"enabled": True}})
    assert_error(masked_api.patch("/project", json={"masking": {"enabled": False}}), 403, "forbidden")
    assert Project.objects.get(name="default").masking["enabled"] is True
    assert masked_api.get("/project").json()["key_masked"] is True


@pytest.mark.parametrize(("masking", "code"), [
    ({"enabled": "yes"}, None),
    ({"patterns": [{"name": "bad name!", "pattern": "x"}]}, "invalid_masking"),
    ({"patterns": [{"name": "loop", "pattern": "(a+)+\\1"}]}, "invalid_masking"),
    ({"patterns": [{"name": "x", "pattern": "x"}] * 21}, None),
    ({"colour": "red"}, None),
])
def test_bad_masking_settings_are_refused_and_nothing_changes(api, masking, code):
    assert_error(api.patch("/project", json={"masking": masking}), 422, code)
    assert Project.objects.get(name="default").masking == {}
