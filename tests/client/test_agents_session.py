"""ctxweb.agents.CtxwebSession with the real openai-agents package: a Runner with a scripted model (no
network) holds a two-turn conversation with a function tool call; the items come back from ctxweb as
the SDK's own session keeps them; pop_item and clear_session hide instead of deleting; and the
conversation reads in the dashboard."""

import asyncio

import pytest
from django.contrib.auth import get_user_model
from django.test import Client as DjangoClient
from django.urls import reverse

from ctxweb.agents import CtxwebSession, item_to_message
from sessions.models import Event, EventType, Message
from tests.client.conftest import LIVE

pytestmark = LIVE

QUESTION_1 = "What is the weather in Lisbon today?"
QUESTION_2 = "Should I take an umbrella?"
ANSWER_1 = "It is 24°C and sunny in Lisbon."
ANSWER_2 = "No umbrella needed: no rain is expected."


@pytest.fixture(scope="module")
def sdk():
    """openai-agents and the scripted model (tests/client/scripted_agent.py), imported when a test of this
    module first needs them rather than when the module is collected."""
    from tests.client import scripted_agent

    return scripted_agent


@pytest.fixture
def ctxweb_session(client):
    return CtxwebSession("agents-demo", client)


@pytest.fixture
def conversation(sdk, ctxweb_session):
    """The conversation held through ctxweb, and the same one held by the SDK's own SQLiteSession."""
    turns = (QUESTION_1, QUESTION_2), (ANSWER_1, ANSWER_2)
    model, first, second = asyncio.run(sdk.converse(ctxweb_session, *turns))
    reference = sdk.SQLiteSession("reference")
    asyncio.run(sdk.converse(reference, *turns))
    return {"model": model, "answers": (first, second), "reference": asyncio.run(reference.get_items())}


def test_it_implements_the_session_protocol(sdk, ctxweb_session):
    assert isinstance(ctxweb_session, sdk.SessionProtocol)


def test_the_items_come_back_as_the_sdk_saved_them(ctxweb_session, conversation):
    items = asyncio.run(ctxweb_session.get_items())

    assert conversation["answers"] == (ANSWER_1, ANSWER_2)
    assert items == conversation["reference"]
    assert [item.get("type", "message") for item in items] == [
        "message", "function_call", "function_call_output", "message", "message", "message"]
    assert asyncio.run(ctxweb_session.get_items(limit=2)) == items[-2:]


def test_the_second_turn_got_the_first_from_ctxweb(conversation):
    second_turn_input = conversation["model"].inputs[2]

    assert second_turn_input[:4] == conversation["reference"][:4]
    assert second_turn_input[-1]["content"] == QUESTION_2


def test_items_are_stored_as_readable_messages(ctxweb_session, conversation):
    rows = list(Message.objects.filter(session__key="agents-demo").order_by("seq"))

    assert [(m.role, m.text) for m in rows] == [
        ("user", QUESTION_1), ("assistant", ""), ("tool", "Lisbon: 24°C, sunny"), ("assistant", ANSWER_1),
        ("user", QUESTION_2), ("assistant", ANSWER_2),
    ]
    assert rows[1].tool_calls == [{"id": "call_weather_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]
    assert rows[2].tool_call_id == "call_weather_1" and rows[2].call_seq == 2
    assert [m.attributes["agents_item"] for m in rows] == conversation["reference"]


def test_pop_item_hides_the_newest_item_and_keeps_the_row(ctxweb_session, conversation):
    popped = asyncio.run(ctxweb_session.pop_item())

    assert popped == conversation["reference"][-1]
    assert asyncio.run(ctxweb_session.get_items()) == conversation["reference"][:-1]
    row = Message.objects.get(session__key="agents-demo", seq=6)
    assert row.include_in_messages is False and row.text == ANSWER_2
    event = Event.objects.get(session__key="agents-demo", type=EventType.MESSAGE_UPDATED)
    assert event.data["seq"] == 6
    assert event.data["changes"] == {"include_in_messages": {"from": True, "to": False}}


def test_clear_session_hides_everything_and_deletes_nothing(ctxweb_session, conversation):
    asyncio.run(ctxweb_session.clear_session())

    assert asyncio.run(ctxweb_session.get_items()) == []
    assert asyncio.run(ctxweb_session.pop_item()) is None
    assert Message.objects.filter(session__key="agents-demo").count() == 6
    assert Event.objects.filter(session__key="agents-demo", type=EventType.MESSAGE_UPDATED).count() == 6


def test_a_session_that_does_not_exist_yet_is_empty(client):
    assert asyncio.run(CtxwebSession("never-used", client).get_items()) == []


def test_other_items_are_agent_messages_with_a_short_text():
    item = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think " * 100}]}

    message = item_to_message(item)

    assert message["role"] == "agent" and message["attributes"] == {"agents_item": item}
    assert message["content"].startswith("[reasoning] Think") and len(message["content"]) <= 200


def test_the_dashboard_shows_the_conversation(conversation):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    browser = DjangoClient(HTTP_HOST="127.0.0.1")
    browser.force_login(admin)

    response = browser.get(reverse("session", args=["default", "agents-demo"]))

    assert response.status_code == 200
    page = response.content.decode()
    for text in (QUESTION_1, "get_weather", "Lisbon: 24°C, sunny", ANSWER_1, QUESTION_2, ANSWER_2):
        assert text in page, text
