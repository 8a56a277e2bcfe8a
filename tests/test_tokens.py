"""Token accounting: OpenAI's documented counting, checked against tiktoken directly."""

import os

import pytest

from sessions.checks import check_token_encoding
from sessions.context.model_input import build_model_input
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, Message, Session
from sessions.wire import tokens
from tests.counting import REPLY_PRIMING, message_tokens, text_tokens

TEXT = "The quick brown fox jumps over the lazy dog, twice: 🦊🦊."


def test_a_message_costs_three_plus_its_role_and_its_text():
    assert tokens.count_message("user", TEXT).total == 3 + text_tokens("user") + text_tokens(TEXT)
    assert tokens.count_message("assistant", "Hi").total == 3 + text_tokens("assistant") + text_tokens("Hi")


def test_an_empty_message_costs_three_plus_its_role():
    assert tokens.count_message("assistant", "").total == 3 + text_tokens("assistant")


def test_a_name_costs_its_tokens_plus_one():
    name = "customer_support_bot"
    without = tokens.count_message("user", TEXT).total
    assert tokens.count_message("user", TEXT, name=name).total == without + text_tokens(name) + 1


def test_a_name_counts_as_the_openai_format_sends_it():
    without = tokens.count_message("user", TEXT).total
    sent = "Bob_Smith-O_Neil"  # what the openai format makes of "Bob Smith-O'Neil"
    assert tokens.count_message("user", TEXT, name="Bob Smith-O'Neil").total == without + text_tokens(sent) + 1
    assert text_tokens(sent) != text_tokens("Bob Smith-O'Neil")


def test_a_tool_messages_name_costs_nothing_since_no_provider_format_sends_it():
    assert tokens.count_message("tool", "24°C", name="get_weather").total == tokens.count_message("tool", "24°C").total


def test_text_parts_count_like_text():
    parts = [{"type": "text", "text": "first part"}, {"type": "text", "text": "second part, longer"}]
    expected = 3 + text_tokens("user") + text_tokens("first part") + text_tokens("second part, longer")
    assert tokens.count_message("user", parts).total == expected


def test_tool_calls_count_their_name_and_arguments():
    calls = [
        {"id": "call_abc", "name": "get_reservation_details", "arguments": '{"reservation_id": "4WQ150"}'},
        {"id": "call_def", "name": "search_flights", "arguments": '{"origin": "JFK", "destination": "SFO"}'},
    ]
    figures = tokens.count_message("assistant", "Let me look.", tool_calls=calls)
    per_call = [text_tokens(c["name"]) + text_tokens(c["arguments"]) for c in calls]
    assert figures.tool_calls == per_call
    assert figures.total == 3 + text_tokens("assistant") + text_tokens("Let me look.") + sum(per_call)


def test_reasoning_is_counted_separately_and_not_in_the_total():
    reasoning = "The user wants the weather; I should call the tool first."
    figures = tokens.count_message("assistant", "It is sunny.", reasoning=reasoning)
    assert figures.reasoning == text_tokens(reasoning)
    assert figures.total == 3 + text_tokens("assistant") + text_tokens("It is sunny.")


@pytest.mark.parametrize(
    ("width", "height", "detail", "expected"),
    [
        (1024, 1024, "high", 765),  # scaled to 768x768: 4 tiles
        (2048, 4096, "high", 1105),  # scaled to 1024x2048, then 768x1536: 6 tiles
        (2048, 4096, None, 1105),  # no detail means auto, which is high for a known size
        (512, 512, "high", 255),  # one tile
        (500, 300, "auto", 255),  # small images are not scaled up
        (768, 1024, "high", 765),  # already 768 on the short side: 2x2 tiles
        (1500, 300, "high", 595),  # 3x1 tiles
        (4096, 300, "high", 765),  # scaled to 2048x150: 4x1 tiles
        (1024, 1024, "low", 85),
        (8000, 8000, "low", 85),
    ],
)
def test_images_count_by_openais_tile_formula(width, height, detail, expected):
    assert tokens.count_image(width, height, detail) == expected


def test_an_image_of_unknown_size_counts_the_flat_estimate():
    assert tokens.IMAGE_FLAT_ESTIMATE > 0
    assert tokens.count_image(None, None) == tokens.IMAGE_FLAT_ESTIMATE
    assert tokens.count_image(1024, None, "high") == tokens.IMAGE_FLAT_ESTIMATE


def test_an_images_url_is_not_counted_as_text(append):
    url = "https://example.com/" + "very-long-path/" * 50 + "photo.png"
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "url": url, "width": 1024, "height": 1024},
        {"type": "image", "url": "https://example.com/b.png"},
    ]
    result = append("s1", [{"role": "user", "content": content}])
    expected = 3 + text_tokens("user") + text_tokens("What is this?") + 765 + tokens.IMAGE_FLAT_ESTIMATE
    assert result.messages[0].tokens == expected
    assert Message.objects.get(session__key="s1").tokens == expected


def test_a_whole_input_costs_three_more_for_reply_priming(project, append):
    update_session(project, "s1", {"instructions": "You are a travel agent. Be concise."})
    call = {"id": "call_1", "name": "find_flight", "arguments": '{"to": "Lisbon"}'}
    append(
        "s1",
        [
            {"role": "user", "content": "Book me a flight to Lisbon", "name": "maria"},
            {"role": "assistant", "content": None, "tool_calls": [call], "reasoning": "need to search first"},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"flight": "TP 123"}'},
            {"role": "agent", "content": "Continue with the booking."},
            {"role": "assistant", "content": "Booked TP 123."},
        ],
    )
    expected = REPLY_PRIMING + sum(
        [
            message_tokens("system", "You are a travel agent. Be concise."),
            message_tokens("user", "Book me a flight to Lisbon", name="maria"),
            message_tokens("assistant", "", tool_calls=[call]),
            message_tokens("tool", '{"flight": "TP 123"}'),
            message_tokens("user", "Continue with the booking."),  # agent is user input to the provider
            message_tokens("assistant", "Booked TP 123."),
        ]
    )
    session = Session.objects.get(key="s1")
    assert build_model_input(session).tokens == expected
    assert session.input_tokens == expected


def test_the_stored_token_figures_are_the_counts(append):
    call = {"id": "call_1", "name": "lookup", "arguments": '{"q": "tides"}'}
    append(
        "s1",
        [
            {"role": "user", "content": TEXT},
            {"role": "assistant", "content": "Checking.", "tool_calls": [call], "reasoning": "use the tool"},
            {"role": "tool", "tool_call_id": "call_1", "content": "high tide 14:02", "name": "lookup"},
        ],
    )
    user, assistant, tool = Message.objects.filter(session__key="s1").order_by("seq")
    assert user.tokens == message_tokens("user", TEXT)
    assert assistant.tokens == message_tokens("assistant", "Checking.", tool_calls=[call])
    assert assistant.tool_call_tokens == [text_tokens("lookup") + text_tokens('{"q": "tides"}')]
    assert assistant.reasoning_tokens == text_tokens("use the tool")
    assert tool.tokens == message_tokens("tool", "high tide 14:02")  # its name is not sent
    assert Session.objects.get(key="s1").raw_tokens == user.tokens + assistant.tokens + tool.tokens


def test_text_with_special_token_markers_counts_as_text(append):
    text = "Documents end with <|endoftext|> and chats with <|im_end|>."
    assert tokens.count_text(text) == text_tokens(text)
    assert tokens.count_text("<|endoftext|>") > 1  # not the single special token
    result = append("s1", [{"role": "user", "content": text}])
    assert result.messages[0].tokens == message_tokens("user", text)


@pytest.fixture
def fresh_encoding_cache(settings):
    tokens.load_encoding.cache_clear()
    yield settings
    tokens.load_encoding.cache_clear()


def test_an_unknown_encoding_is_a_system_check_error(fresh_encoding_cache):
    fresh_encoding_cache.CTXWEB_TOKEN_ENCODING = "no_such_encoding"
    errors = check_token_encoding(None)
    assert [e.id for e in errors] == ["ctxweb.E001"]
    assert "no_such_encoding" in errors[0].msg
    assert "CTXWEB_TOKEN_ENCODING" in errors[0].msg


def test_the_default_encoding_passes_the_system_check(fresh_encoding_cache):
    assert fresh_encoding_cache.CTXWEB_TOKEN_ENCODING == "cl100k_base"
    assert check_token_encoding(None) == []


def test_the_migration_recounts_the_names_of_messages_stored_before(project, append):
    """Migration 0006: messages stored when names were counted as given get the figures a new append
    gives them, and so do their sessions' raw_tokens and input_tokens (hidden and covered messages
    count in the raw log only)."""
    from importlib import import_module

    from django.apps import apps

    from sessions.context.figures import refresh_input_tokens

    migration = import_module("sessions.migrations.0006_message_name_tokens")
    call = {"id": "call_1", "name": "lookup", "arguments": "{}"}
    append("s1", [
        {"role": "user", "content": "covered", "name": "Bob Smith"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": TEXT, "name": "Bob Smith"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "found", "name": "lookup"},
        {"role": "user", "content": "hidden", "name": "Ann", "include_in_messages": False},
    ])
    session = Session.objects.get(key="s1")
    Checkpoint.objects.create(session=session, summary="s", first_seq=1, last_seq=2, created_at_seq=6,
                              summary_tokens=10, summarizer="test")
    refresh_input_tokens(session)
    now = {m.seq: m.tokens for m in Message.objects.filter(session=session)}
    figures = (session.raw_tokens, session.input_tokens)
    for message in Message.objects.filter(session=session).exclude(name=""):  # as counted before
        before, after = migration.name_tokens(message.role, message.name, text_tokens)
        Message.objects.filter(pk=message.pk).update(tokens=message.tokens + before - after)
    Session.objects.filter(pk=session.pk).update(raw_tokens=sum(Message.objects.filter(session=session)
                                                                .values_list("tokens", flat=True)))
    stale = {m.seq: m.tokens for m in Message.objects.filter(session=session)}
    assert stale[5] == now[5] + text_tokens("lookup") + 1 and stale[3] != now[3]
    Session.objects.filter(pk=session.pk).update(input_tokens=figures[1] + stale[3] - now[3] + stale[5] - now[5])

    migration.recount_names(apps, None)

    assert {m.seq: m.tokens for m in Message.objects.filter(session=session)} == now
    session.refresh_from_db()
    assert (session.raw_tokens, session.input_tokens) == figures


def test_a_web_process_loads_the_token_encoding_as_it_starts():
    """ctxweb/wsgi.py loads the encoding when gunicorn loads the application, so the first append a web
    process answers does not wait for it (a worker's first bulk append took 330 ms against 85)."""
    import subprocess
    import sys

    script = ("import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'ctxweb.settings'); import django; "
              "django.setup(); import tiktoken.registry as r; before = sorted(r.ENCODINGS); import ctxweb.wsgi; "
              "print(before, sorted(r.ENCODINGS))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "DEBUG": "1"}).stdout.strip()
    before, after = out.split("] [")
    assert before == "[" and after != "]", out
