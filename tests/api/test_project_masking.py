"""GET /project and PATCH /project (masking of personal data), and the answers of an API key marked
`masked` (sessions/access/masking_policy.py): where the project masks, every JSON answer and download it
gets is masked; the application's own keys get the real text; a masked key cannot turn masking off."""

import json

import pytest
from django.utils import timezone

from sessions.access.api_keys import create_api_key
from sessions.ingest.append import append_messages
from sessions.ingest.importers import import_file
from sessions.ingest.recorded_requests import CapturedRequest, record_requests
from sessions.models import Message, Project, RecordedRequest, Session
from sessions.store.project_settings import set_masking
from sessions.wire.tokens import count_message
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
    assert (body["name"], body["key_masked"], body["masking"]) == (
        "default", False, {"enabled": False, "patterns": [], "at_capture": False})
    assert EMAIL in raw(masked_api.get("/sessions/pii/messages"))
    body = api.patch("/project", json={"masking": {"enabled": True, "patterns": [
        {"name": "order", "pattern": "W[0-9]{7}"}]}}).json()
    assert body["masking"] == {"enabled": True, "patterns": [{"name": "order", "pattern": "W[0-9]{7}"}],
                               "at_capture": False}
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


def test_masking_at_capture_stores_no_personal_data_and_counts_the_masked_text(api, project):
    api.patch("/project", json={"masking": {"at_capture": True}})
    response = api.post("/sessions/captured/messages", json={"messages": [
        {"role": "user", "content": f"Refund {CARD} for {EMAIL}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "name": "refund", "arguments": json.dumps({"card": CARD, "key": SECRET})}]}]})
    assert response.status_code == 200, response.content
    stored = list(Message.objects.filter(session__key="captured").order_by("seq"))
    assert stored[0].text == "Refund [card •••• 1111] for [email]"
    assert json.loads(stored[1].tool_calls[0]["arguments"]) == {"card": "[card •••• 1111]", "key": "[secret]"}
    for message in stored:  # the figures are the stored text's
        assert message.tokens == count_message(message.role, message.content, message.name, message.tool_calls).total
    # Everyone sees what was stored, the application's own key too: nothing personal is kept.
    assert EMAIL not in raw(api.get("/sessions/captured/messages"))
    api.put("/sessions/captured", json={"title": f"Refund for {EMAIL}", "metadata": {"email": EMAIL}})
    session = Session.objects.get(key="captured")
    assert (session.title, session.metadata) == ("Refund for [email]", {"email": "[email]"})


def test_masking_at_capture_covers_recorded_requests(project):
    set_masking(project, {"at_capture": True})
    request = CapturedRequest(conversation="spans", external_id="s1", source="otlp", started_at=timezone.now(),
                              messages=[{"role": "user", "content": f"I am {EMAIL}"}],
                              response=[{"role": "assistant", "content": f"Noted, {EMAIL}."}])
    assert record_requests(project, [request]).stored == 1
    recorded = RecordedRequest.objects.get(session__key="spans")
    assert recorded.messages == [{"role": "user", "content": "I am [email]"}]
    assert [m.text for m in Message.objects.filter(session__key="spans").order_by("seq")] == [
        "I am [email]", "Noted, [email]."]


def test_masking_at_capture_covers_imports(project, tmp_path):
    set_masking(project, {"at_capture": True})
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": f"Write to {EMAIL}"},
                                {"role": "assistant", "content": "Done."}]))
    report = import_file(project, path)
    assert report.error is None
    assert [m.text for m in Message.objects.filter(session__project=project).order_by("seq")] == [
        "Write to [email]", "Done."]


def test_a_masked_key_finds_nothing_by_personal_data(api, masked_api, pii):
    api.patch("/project", json={"masking": {"enabled": True}})
    assert [s["key"] for s in api.get("/sessions", query={"q": EMAIL}).json()["items"]] == ["pii"]
    assert masked_api.get("/sessions", query={"q": EMAIL}).json()["items"] == []
    assert_error(masked_api.get("/sessions/pii/trace", query={"q": EMAIL}), 403, "masked")
    assert api.get("/sessions/pii/trace", query={"q": EMAIL}).status_code == 200
