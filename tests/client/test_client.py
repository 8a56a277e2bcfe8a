"""ctxweb_client.Client against a live server: every method, errors raised with the API's code and
status, and a batch retried after a timeout stored once."""

import subprocess
import sys
import time
from datetime import datetime

import pytest
from ctxweb_client import (
    AppendResult,
    AuthenticationError,
    Checkpoint,
    Client,
    Compaction,
    ConflictError,
    ConnectionFailed,
    CtxwebError,
    Message,
    ModelInput,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    Session,
    Timeout,
    ValidationError,
)

from sessions.models import Event, EventType
from sessions.models import Message as MessageRow
from tests.builders import assistant, call, tool, user
from tests.client.conftest import LIVE, SlowProxy

pytestmark = LIVE

WEATHER = [
    {"role": "user", "content": "What is the weather in Lisbon?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "name": "get_weather",
                                                           "arguments": {"city": "Lisbon"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"},
    {"role": "assistant", "content": "It is 24°C and sunny in Lisbon."},
]


def test_importing_the_client_does_not_import_django():
    code = "import sys, ctxweb_client; print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'sessions')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_put_session_creates_then_updates(client):
    created = client.put_session("trip", title="Trip", metadata={"customer": 7}, instructions="Be brief.",
                                 compaction={"max_tokens": 500, "auto": False})
    updated = client.put_session("trip", title="Trip to Lisbon")

    assert isinstance(created, Session) and created.created and not updated.created
    assert (updated.title, updated.metadata, updated.instructions) == ("Trip to Lisbon", {"customer": 7}, "Be brief.")
    assert updated.compaction["max_tokens"] == 500 and updated.compaction["auto"] is False
    assert isinstance(updated.created_at, datetime) and updated.created_at.tzinfo is not None


def test_get_and_list_sessions(client):
    for key in ("a", "b", "c"):
        client.append(key, [{"role": "user", "content": f"hello {key}"}])

    one = client.get_session("b")
    first = client.list_sessions(limit=2)
    rest = client.list_sessions(limit=2, cursor=first.next_cursor)

    assert (one.key, one.message_count, one.raw_tokens > 0) == ("b", 1, True)
    assert [s.key for s in first.items] + [s.key for s in rest.items] == ["c", "b", "a"]
    assert rest.next_cursor is None
    assert [s.key for s in client.list_sessions(q="b").items] == ["b"]


def test_append_gives_each_message_an_id_before_sending(client):
    batch = [dict(m) for m in WEATHER]

    result = client.append("w", batch)

    assert isinstance(result, AppendResult) and result.session_created and result.compaction is None
    assert result.stored_count == 4 and result.duplicate_count == 0
    assert [m.seq for m in result.messages] == [1, 2, 3, 4]
    assert all(m.id.startswith("msg_") for m in result.messages)
    assert "id" not in batch[0]  # the caller's dicts are left alone
    assert [m.id for m in result.messages] == list(
        MessageRow.objects.filter(session__key="w").order_by("seq").values_list("client_id", flat=True))


def test_append_keeps_given_ids_and_reports_duplicates(client):
    client.append("w", [{"id": "m1", "role": "user", "content": "hi"}])

    again = client.append("w", [{"id": "m1", "role": "user", "content": "hi"}])

    assert again.duplicate_count == 1 and again.messages[0].seq == 1


def test_raw_log_pages_and_update_message(client):
    client.append("w", WEATHER)

    page = client.messages("w", after=1, limit=2)
    everything = list(client.raw_log("w", page_size=3))
    hidden = client.update_message("w", 4, include_in_messages=False, attributes={"reviewed": True})

    assert [m.seq for m in page.items] == [2, 3] and page.next_after == 3
    assert [m.seq for m in everything] == [1, 2, 3, 4]
    assert isinstance(everything[1], Message) and everything[1].tool_calls[0]["arguments"] == '{"city": "Lisbon"}'
    assert (hidden.include_in_messages, hidden.attributes) == (False, {"reviewed": True})
    assert Event.objects.filter(type=EventType.MESSAGE_UPDATED, data__seq=4).exists()


def test_model_input_in_each_format_and_as_of(client):
    client.put_session("w", instructions="You are a weather assistant.")
    client.append("w", WEATHER)

    openai = client.model_input("w", format="openai")
    anthropic = client.model_input("w", format="anthropic")
    earlier = client.model_input("w", format="ctxweb", as_of=1)

    assert isinstance(openai, ModelInput) and openai.checkpoint is None and openai.omitted == []
    assert [m["role"] for m in openai.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert openai.tokens["total"] == client.get_session("w").model_input_tokens
    assert anthropic.system == "You are a weather assistant."
    assert [m["role"] for m in anthropic.messages] == ["user", "assistant", "user", "assistant"]
    assert earlier.as_of == 1 and [m["role"] for m in earlier.messages] == ["system", "user"]


def test_a_failed_tool_result_and_calls_awaiting_results_reach_the_client(client):
    client.append("gate", [
        {"role": "user", "content": "Gate 12 and the lounge?"},
        {"role": "assistant", "content": None, "tool_calls": [call("c_map", "gate_map"), call("c_lounge", "lounge")]},
        {"role": "tool", "tool_call_id": "c_map", "content": "map service unavailable", "is_error": True},
    ])

    messages = list(client.raw_log("gate"))
    model_input = client.model_input("gate", format="anthropic")

    assert [m.is_error for m in messages] == [False, False, True]
    assert [c["id"] for c in model_input.pending_tool_calls] == ["c_lounge"]
    assert model_input.messages[-1]["content"][0]["is_error"] is True


def test_compact_checkpoints_and_events(client):
    client.put_session("long", compaction={"max_tokens": 300, "keep_recent_tokens": 150, "auto": False})
    messages = []
    for n in range(1, 5):
        messages += [user(40, f"Question {n}"), assistant(60, f"Answer {n}")]
    client.append("long", messages)

    outcome = client.compact("long", summary="Three questions were answered.")
    skipped = client.compact("long", force=True, keep_recent_tokens=0)

    assert isinstance(outcome, Compaction) and outcome.status == "completed"
    assert isinstance(outcome.checkpoint, Checkpoint) and outcome.checkpoint.last_seq == 6
    assert [e.type for e in outcome.events] == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]
    assert skipped.status == "skipped" and skipped.reason == "nothing_to_compact"
    assert [c.id for c in client.checkpoints("long")] == [outcome.checkpoint.id]
    events = client.events("long", type="COMPACTION_")
    assert [e.type for e in events.items] == ["COMPACTION_STARTED", "COMPACTION_COMPLETED",
                                              "COMPACTION_STARTED", "COMPACTION_SKIPPED"]
    assert [e.type for e in client.events("long", type="COMPACTION_SKIPPED").items] == ["COMPACTION_SKIPPED"]
    assert client.model_input("long").checkpoint.id == outcome.checkpoint.id


def test_count_tokens_and_export(client):
    client.append("w", [user(20, "Hello"), assistant(30, "Hi", tool_calls=[call("c", "f")]), tool(10, "c", "ok")])

    count = client.count_tokens([{"role": "user", "content": "Hello there"}])
    exported = client.export("w")
    markdown = client.export("w", format="markdown")

    assert count.total == 3 + count.messages[0] and len(count.messages) == 1
    assert exported["format"] == "ctxweb-session" and len(exported["messages"]) == 3
    assert markdown.startswith("# w")


# --- errors ----------------------------------------------------------------------------------------


def test_a_missing_session_is_not_found_with_the_api_code(client):
    with pytest.raises(NotFoundError) as error:
        client.get_session("nope")
    assert (error.value.status, error.value.code) == (404, "session_not_found")
    assert isinstance(error.value, CtxwebError) and "nope" in error.value.detail


def test_a_bad_key_is_an_authentication_error(live_server):
    with pytest.raises(AuthenticationError) as error:
        Client(live_server.url, "ctx_not-a-key").get_session("w")
    assert (error.value.status, error.value.code) == (401, "invalid_api_key")


def test_refused_input_is_a_validation_error_and_stores_nothing(client):
    with pytest.raises(ValidationError) as error:
        client.append("w", [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "?"}])
    assert (error.value.status, error.value.code, error.value.body["index"]) == (422, "unknown_tool_call_id", 1)
    assert MessageRow.objects.count() == 0

    with pytest.raises(ValidationError) as error:
        client.put_session("bad key!")
    assert error.value.code == "invalid_session_key"


def test_the_same_id_with_other_content_is_a_conflict(client):
    client.append("w", [{"id": "m1", "role": "user", "content": "hi"}])

    with pytest.raises(ConflictError) as error:
        client.append("w", [{"id": "m1", "role": "user", "content": "something else"}])
    assert (error.value.status, error.value.code, error.value.body["seq"]) == (409, "id_conflict", 1)


def test_a_body_over_the_limit_is_payload_too_large(client, settings):
    settings.CTXWEB_MAX_REQUEST_BYTES = 2048

    with pytest.raises(PayloadTooLargeError) as error:
        client.append("w", [{"role": "user", "content": "x" * 5000}])
    assert (error.value.status, error.value.code) == (413, "request_too_large")


def test_an_unreachable_server_is_a_connection_error(api_secret):
    unreachable = Client("http://127.0.0.1:9", api_secret, timeout=2, retries=1, backoff=0.01)

    with pytest.raises(ConnectionFailed) as error:
        unreachable.get_session("w")
    assert (error.value.status, error.value.code) == (None, "connection_failed")


# --- retries ---------------------------------------------------------------------------------------


def test_a_batch_retried_after_a_timeout_is_stored_once(live_server, api_secret):
    with SlowProxy(live_server.url, "/messages", delay=2.5) as proxy:
        client = Client(proxy.url, api_secret, timeout=1, retries=2, backoff=0.05)

        result = client.append("w", WEATHER)

    # The first attempt was stored, but its answer came too late; the retry found every message stored.
    assert proxy.forwarded == ["POST /api/v1/sessions/w/messages"] * 2
    assert result.stored_count == 0 and result.duplicate_count == 4
    assert [m.seq for m in result.messages] == [1, 2, 3, 4]
    rows = list(MessageRow.objects.filter(session__key="w").order_by("seq").values_list("seq", "client_id"))
    assert rows == [(m.seq, m.id) for m in result.messages]
    assert Event.objects.filter(type=EventType.MESSAGES_APPENDED).count() == 1


def test_without_retries_a_timeout_is_raised_and_retrying_the_same_batch_stores_nothing(live_server, api_secret):
    batch = [{**m, "id": f"w{n}"} for n, m in enumerate(WEATHER)]
    with SlowProxy(live_server.url, "/messages", delay=2.5) as proxy:
        client = Client(proxy.url, api_secret, timeout=1, retries=0)
        with pytest.raises(Timeout) as error:
            client.append("w", batch)
        assert (error.value.status, error.value.code) == (None, "timeout")

        retried = client.append("w", batch)

    assert retried.duplicate_count == 4
    assert MessageRow.objects.filter(session__key="w").count() == 4


def test_compaction_requests_are_not_retried(live_server, api_secret):
    with SlowProxy(live_server.url, "/compact", delay=2.5) as proxy:
        client = Client(proxy.url, api_secret, timeout=1, retries=3, backoff=0.01)
        client.append("w", [{"role": "user", "content": "hi"}])
        with pytest.raises(Timeout):
            client.compact("w", force=True)

    assert proxy.forwarded.count("POST /api/v1/sessions/w/compact") == 1


def test_check_context_on_a_real_tau_bench_run_fails_without_the_pin_and_passes_with_it(client):
    """Issue 41: the context check through the client, as a test in an application's own repository would
    run it (docs/compaction.md, "A context check in your tests")."""
    import json
    from pathlib import Path

    run = json.loads((Path(__file__).resolve().parents[1] / "data" / "transcripts" / "openai-chat"
                      / "tau-bench-gpt-4o-airline.json").read_text())[6]["traj"]
    settings = {"max_tokens": 1500, "keep_recent_tokens": 300, "expect": ["Denver"]}
    lost = client.check_context(messages=run, format="openai", **settings)
    assert not lost.passed and [f.literal for f in lost.lost] == ["Denver"] and lost.lost[0].lost_by == [1, 2]
    kept = client.check_context(messages=run, format="openai", **settings,
                                pinned_facts=[{"name": "city", "pattern": '"city": "[A-Z][a-z]+"'}])
    assert kept.passed and kept.checkpoints == lost.checkpoints


# --- rate limits -----------------------------------------------------------------------------------


def test_a_429_is_waited_out_as_its_retry_after_says_then_sent_again(live_server, api_secret, settings):
    """A refused request took nothing, so the client waits the server's Retry-After and sends it again,
    even an append it would not retry after a timeout; a client told not to wait gets RateLimitedError."""
    # One each 2 seconds, and a minute's worth at once: the 30 requests that spend it must take under the
    # 2 seconds a token takes to come back (at one a second, 60 took over a second on a loaded machine, and
    # the append was let in).
    settings.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE = 30
    client = Client(live_server.url, api_secret, retries=0)
    client.put_session("limited")
    for _ in range(29):
        client.get_session("limited")
    started = time.monotonic()
    appended = client.append("limited", [{"role": "user", "content": "still here"}])  # refused first, then stored once
    assert time.monotonic() - started >= 0.9 and appended.stored_count == 1
    assert MessageRow.objects.filter(session__key="limited").count() == 1
    impatient = Client(live_server.url, api_secret, rate_limit_retries=0)
    with pytest.raises(RateLimitedError) as caught:
        impatient.get_session("limited")
    assert caught.value.status == 429 and caught.value.code == "rate_limited" and caught.value.retry_after >= 1
