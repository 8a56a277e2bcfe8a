"""The Python client asks for the model input again with the last answer's ETag (If-None-Match): while
the session is unchanged the live server answers 304 without building it, and the client returns the
input it remembered, as a fresh copy."""

import pytest
from ctxweb_client import Client

from sessions.http import model_input as sessions_api
from tests.client.conftest import LIVE

pytestmark = LIVE

TURN = [
    {"role": "user", "content": "What is the weather in Lisbon?"},
    {"role": "assistant", "content": "It is 24°C and sunny in Lisbon."},
]


@pytest.fixture
def seen(client, monkeypatch):
    """What the client got over the wire (statuses), and how many inputs the server built."""
    record = {"statuses": [], "built": 0}
    exchange = Client._exchange

    def recording(self, *args, **kwargs):
        answer = exchange(self, *args, **kwargs)
        record["statuses"].append(answer[0])
        return answer

    def counted(build):
        def counting(*args, **kwargs):
            built = build(*args, **kwargs)
            record["built"] += built is not None
            return built
        return counting

    # The input is built in full, or (the openai format) written from the stored renderings.
    for builder in ("build_model_input", "stored_openai_response"):
        monkeypatch.setattr(sessions_api, builder, counted(getattr(sessions_api, builder)))
    monkeypatch.setattr(Client, "_exchange", recording)
    return record


def test_an_unchanged_input_comes_back_304_and_is_not_built_again(client, seen):
    client.append("w", TURN)
    first = client.model_input("w", format="openai")
    again = client.model_input("w", format="openai")

    assert seen["statuses"][-2:] == [200, 304]
    assert seen["built"] == 1
    assert again == first


def test_the_remembered_input_is_a_fresh_copy_each_time(client, seen):
    client.append("w", TURN)
    first = client.model_input("w", format="openai")
    first.messages.append({"role": "assistant", "content": "the application's own reply"})

    again = client.model_input("w", format="openai")

    assert seen["statuses"][-1] == 304
    assert len(again.messages) == 2


def test_a_changed_session_is_sent_again(client, seen):
    client.append("w", TURN)
    client.model_input("w", format="openai")
    client.append("w", [{"role": "user", "content": "And tomorrow?"}])

    latest = client.model_input("w", format="openai")

    assert seen["statuses"][-1] == 200
    assert latest.messages[-1]["content"] == "And tomorrow?"
    assert client.model_input("w", format="openai") == latest
    assert seen["statuses"][-1] == 304


def test_each_format_and_as_of_is_remembered_apart(client, seen):
    client.append("w", TURN)
    openai = client.model_input("w", format="openai")
    anthropic = client.model_input("w", format="anthropic")
    earlier = client.model_input("w", format="openai", as_of=1)

    assert seen["statuses"][-3:] == [200, 200, 200]
    assert client.model_input("w", format="openai") == openai
    assert client.model_input("w", format="anthropic") == anthropic
    assert client.model_input("w", format="openai", as_of=1) == earlier
    assert seen["statuses"][-3:] == [304, 304, 304]


def test_the_cache_is_bounded_and_can_be_turned_off(live_server, api_secret, seen):
    small = Client(live_server.url, api_secret, model_input_cache_size=1)
    small.append("w", TURN)
    small.model_input("w", format="openai")
    small.model_input("w", format="anthropic")  # the openai one is forgotten
    small.model_input("w", format="openai")
    assert seen["statuses"][-1] == 200

    off = Client(live_server.url, api_secret, model_input_cache_size=0)
    off.model_input("w")
    off.model_input("w")
    assert seen["statuses"][-2:] == [200, 200]
