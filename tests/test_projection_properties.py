"""Property tests of the model input in provider formats: for any session the API accepts, built
from random appends (every role, tool calls with reused, odd or missing ids, orphan results, images),
hidden and re-shown messages, compactions with supplied summaries at random points and requests with
unpersisted messages, the `openai` and `anthropic` renderings are requests those providers accept.

The checkers below are written from the providers' documented rules, independently of sessions.context.provider_input
and sessions.context.model_input. Both providers refuse a tool call without its result, the newest assistant
message's too, so calls still awaiting their results are left out (SPEC §2); an input with no message to
send is answered 409 nothing_to_send instead of rendered. The token total of every input is a recount of
its `openai` rendering (POST /tokens), images aside: they are counted as images, whatever the
rendering makes of them (docs/api.md).
"""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.context.compaction_runs import compact
from sessions.context.model_input import build_model_input
from sessions.context.provider_input import NothingToSend, check_something_to_send, render_model_input
from sessions.errors import DomainError
from sessions.ingest.append import append_messages
from sessions.ingest.message_edits import update_message
from sessions.ingest.next_request import build_request
from sessions.ingest.session_store import get_session, update_session
from sessions.models import Session
from sessions.wire.anthropic import ANTHROPIC_OPENING
from sessions.wire.validation import count_openai_messages

pytestmark = pytest.mark.django_db

SESSIONS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])

# --- OpenAI Chat Completions ---------------------------------------------------------------------

OPENAI_FIELDS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls"},
    "tool": {"role", "content", "tool_call_id"},
}
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Image inputs OpenAI documents: an http(s) URL, or a base64 data URL of PNG, JPEG, WEBP or GIF.
OPENAI_IMAGE_URL = re.compile(r"^(https?://\S+|data:image/(png|jpeg|webp|gif);base64,[A-Za-z0-9+/]*={0,2})$")


def openai_part_problem(part, role: str) -> str | None:
    if not isinstance(part, dict):
        return "a content part is not an object"
    if part.get("type") == "text":
        return None if set(part) == {"type", "text"} and isinstance(part["text"], str) else f"bad text part {part}"
    if part.get("type") == "image_url" and role == "user":
        image = part.get("image_url")
        if set(part) != {"type", "image_url"} or not isinstance(image, dict) or set(image) - {"url", "detail"}:
            return f"bad image_url part {part}"
        if not isinstance(image.get("url"), str) or not OPENAI_IMAGE_URL.match(image["url"]):
            return f"image url OpenAI does not take: {str(image.get('url'))[:60]}"
        if image.get("detail", "auto") not in ("low", "high", "auto"):
            return "bad image detail"
        return None
    return f"a {part.get('type')!r} part in a {role} message"


def openai_problems(messages) -> list[str]:
    """Why OpenAI Chat Completions would refuse `messages` (an empty list means it would not)."""
    problems = []

    def bad(i, why):
        problems.append(f"messages[{i}]: {why}")

    if not isinstance(messages, list) or not messages:
        return ["messages is not a non-empty list"]
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in OPENAI_FIELDS:
            bad(i, f"role {role!r}")
            continue
        if set(m) - OPENAI_FIELDS[role]:
            bad(i, f"fields {set(m) - OPENAI_FIELDS[role]} on a {role} message")
        if "name" in m and not (isinstance(m["name"], str) and OPENAI_NAME.match(m["name"])):
            bad(i, f"name {m['name']!r} does not match {OPENAI_NAME.pattern}")
        calls = m.get("tool_calls")
        if "tool_calls" in m:
            if not isinstance(calls, list) or not calls:
                bad(i, "tool_calls is not a non-empty list")
                calls = []
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                if (set(call) != {"id", "type", "function"} or not isinstance(call["id"], str) or not call["id"]
                        or call["type"] != "function" or not isinstance(function, dict)
                        or set(function) != {"name", "arguments"} or not isinstance(function["name"], str)
                        or not function["name"] or not isinstance(function["arguments"], str)):
                    bad(i, f"bad tool call {call}")
            ids = [call.get("id") for call in calls if isinstance(call, dict)]
            if len(set(ids)) != len(ids):
                bad(i, "a tool call id twice in one message")
        content = m.get("content", KeyError)
        if content is None and role == "assistant" and calls:
            pass
        elif isinstance(content, str):
            pass
        elif isinstance(content, list) and content:
            for part in content:
                why = openai_part_problem(part, role)
                if why:
                    bad(i, why)
        else:
            bad(i, f"content {content!r} on a {role} message")
        if role == "tool" and not (isinstance(m.get("tool_call_id"), str) and m["tool_call_id"]):
            bad(i, "a tool message without tool_call_id")
    if problems:
        return problems

    i = 0
    while i < len(messages):
        m = messages[i]
        if m["role"] == "tool":
            bad(i, "a tool message that does not follow an assistant message with tool_calls")
        elif m["role"] == "assistant" and m.get("tool_calls"):
            ids = {call["id"] for call in m["tool_calls"]}
            answered = set()
            j = i + 1
            while j < len(messages) and messages[j]["role"] == "tool":
                call_id = messages[j]["tool_call_id"]
                if call_id not in ids:
                    bad(j, f"tool_call_id {call_id!r} is not a call of the assistant message before it")
                elif call_id in answered:
                    bad(j, f"tool_call_id {call_id!r} answered twice")
                answered.add(call_id)
                j += 1
            if ids - answered:
                bad(i, f"tool calls {sorted(ids - answered)} get no tool message")
            i = j
            continue
        i += 1
    return problems


# --- Anthropic Messages --------------------------------------------------------------------------

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
ANTHROPIC_MEDIA_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def anthropic_block_problem(block, role: str, inside_result: bool = False) -> str | None:
    if not isinstance(block, dict):
        return "a content block is not an object"
    kind = block.get("type")
    if kind == "text":
        if set(block) != {"type", "text"} or not isinstance(block["text"], str) or not block["text"].strip():
            return f"text block {block!r} is empty or malformed"
        return None
    if kind == "image" and (role == "user" or inside_result):
        source = block.get("source")
        if set(block) != {"type", "source"} or not isinstance(source, dict):
            return "malformed image block"
        if source.get("type") == "base64":
            if set(source) != {"type", "media_type", "data"} or source["media_type"] not in ANTHROPIC_MEDIA_TYPES:
                return f"base64 image of media type {source.get('media_type')!r}"
            if not isinstance(source["data"], str) or not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", source["data"]):
                return "base64 image data is not base64"
            return None
        if source.get("type") == "url":
            ok = set(source) == {"type", "url"} and re.match(r"^https?://\S+$", str(source["url"]))
            return None if ok else f"image url source {str(source.get('url'))[:60]}"
        return "image source of unknown type"
    if kind == "tool_use" and role == "assistant" and not inside_result:
        if set(block) != {"type", "id", "name", "input"}:
            return f"malformed tool_use {block}"
        if not isinstance(block["id"], str) or not ANTHROPIC_ID.match(block["id"]):
            return f"tool_use id {block['id']!r} does not match {ANTHROPIC_ID.pattern}"
        if not isinstance(block["name"], str) or not block["name"] or not isinstance(block["input"], dict):
            return f"malformed tool_use {block}"
        return None
    if kind == "tool_result" and role == "user" and not inside_result:
        if set(block) - {"type", "tool_use_id", "content", "is_error"}:
            return f"malformed tool_result {block}"
        if not isinstance(block.get("tool_use_id"), str) or not ANTHROPIC_ID.match(block["tool_use_id"]):
            return f"tool_result tool_use_id {block.get('tool_use_id')!r} does not match {ANTHROPIC_ID.pattern}"
        if "content" in block:
            content = block["content"]
            if isinstance(content, str):
                return None if content.strip() else "tool_result content is empty text"
            if not isinstance(content, list) or not content:
                return "tool_result content is neither text nor a non-empty list of blocks"
            for inner in content:
                why = anthropic_block_problem(inner, role, inside_result=True)
                if why:
                    return f"in a tool_result: {why}"
        return None
    return f"a {kind!r} block in a {role} message"


def anthropic_problems(request) -> list[str]:
    """Why the Anthropic Messages API would refuse `request` ({"system"?, "messages"})."""
    problems = []

    def bad(i, why):
        problems.append(f"messages[{i}]: {why}")

    if set(request) - {"system", "messages"}:
        problems.append(f"fields {set(request) - {'system', 'messages'}}")
    if "system" in request and not (isinstance(request["system"], str) and request["system"].strip()):
        problems.append("system is not a non-empty string")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages is not a non-empty list"]
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"} or m["role"] not in ("user", "assistant"):
            bad(i, f"malformed message {m!r}")
            continue
        expected_role = "user" if i % 2 == 0 else "assistant"
        if m["role"] != expected_role:
            bad(i, f"a {m['role']} message where the roles call for {expected_role} (they alternate from user)")
        if not isinstance(m["content"], list) or not m["content"]:
            bad(i, "content is not a non-empty list of blocks")
            continue
        for block in m["content"]:
            why = anthropic_block_problem(block, m["role"])
            if why:
                bad(i, why)
        kinds = [b.get("type") for b in m["content"] if isinstance(b, dict)]
        if "tool_result" in kinds and kinds[: kinds.count("tool_result")] != ["tool_result"] * kinds.count("tool_result"):
            bad(i, "tool_result blocks must come first in a user message")
    if problems:
        return problems

    uses = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    if len(set(uses)) != len(uses):
        problems.append(f"tool_use ids are not unique in the request: {sorted(uses)}")
    for i, m in enumerate(messages):
        results = [b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"]
        if results:
            before = messages[i - 1] if i > 0 else None
            calls = {b["id"] for b in before["content"] if b["type"] == "tool_use"} if before else set()
            for tool_use_id in results:
                if tool_use_id not in calls:
                    bad(i, f"tool_result for {tool_use_id!r}, not a tool_use of the message before")
            if len(set(results)) != len(results):
                bad(i, "a tool_use answered twice")
        if m["role"] == "assistant":
            calls = {b["id"] for b in m["content"] if b["type"] == "tool_use"}
            after = messages[i + 1] if i + 1 < len(messages) else None
            answered = {b["tool_use_id"] for b in after["content"] if b["type"] == "tool_result"} if after else set()
            if calls - answered:
                bad(i, f"tool_use {sorted(calls - answered)} without a tool_result in the next message")
    return problems


# --- the checkers check ---------------------------------------------------------------------------


def test_the_openai_checker_refuses_what_openai_refuses():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    answer = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    user = {"role": "user", "content": "hi"}
    assert openai_problems([user, assistant, answer, {"role": "assistant", "content": "done"}]) == []
    assert openai_problems([user, assistant])  # a call awaiting its result, even in the newest message
    assert openai_problems([])
    assert openai_problems([user, assistant, user])
    assert openai_problems([user, answer])
    assert openai_problems([user, assistant, answer, answer])
    assert openai_problems([user, assistant, {**answer, "tool_call_id": "c2"}])
    assert openai_problems([user, assistant, answer, {**assistant, "tool_calls": [{**call, "id": "c2"}]}, user])
    assert openai_problems([{"role": "agent", "content": "x"}])
    assert openai_problems([{"role": "user", "content": "x", "name": "Bob Smith"}])
    assert openai_problems([{"role": "user", "content": []}])
    assert openai_problems([{"role": "assistant", "content": None}])
    assert openai_problems([{"role": "assistant", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}])
    assert openai_problems([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,x"}}]}])
    assert openai_problems([{"role": "tool", "tool_call_id": "c1", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}])


def test_the_anthropic_checker_refuses_what_anthropic_refuses():
    def msg(role, *blocks):
        return {"role": role, "content": list(blocks)}

    def text(t="hi"):
        return {"type": "text", "text": t}

    use = {"type": "tool_use", "id": "c1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    assert anthropic_problems({"system": "s", "messages": [msg("user", text()), msg("assistant", use),
                                                           msg("user", result, text())]}) == []
    assert anthropic_problems({"messages": [msg("user", text()), msg("assistant", use)]})  # awaiting its result
    assert anthropic_problems({"system": "s", "messages": []})
    assert anthropic_problems({"messages": [msg("assistant", text())]})
    assert anthropic_problems({"messages": [msg("user", text()), msg("user", text())]})
    assert anthropic_problems({"messages": [msg("user", text(" "))]})
    assert anthropic_problems({"messages": [msg("user")]})
    assert anthropic_problems({"messages": [msg("user", text()), msg("assistant", use), msg("user", text(), result)]})
    assert anthropic_problems({"messages": [msg("user", text()), msg("assistant", use), msg("user", text())]})
    assert anthropic_problems({"messages": [msg("user", result)]})
    assert anthropic_problems({"messages": [msg("user", text()), msg("assistant", {**use, "id": "a.b:1"}),
                                            msg("user", {**result, "tool_use_id": "a.b:1"})]})
    assert anthropic_problems({"messages": [msg("user", text()), msg("assistant", use), msg("user", result),
                                            msg("assistant", use), msg("user", result)]})
    assert anthropic_problems({"messages": [msg("user", text()), msg("assistant", {
        "type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}})]})
    assert anthropic_problems({"messages": [msg("user", {
        "type": "image", "source": {"type": "base64", "media_type": "image/svg+xml", "data": "PHN2Zz4="}})]})


# --- random sessions ------------------------------------------------------------------------------

TEXT = st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "\n\t", "Hello.", "What is the weather?"]))
IMAGE_URLS = st.sampled_from([
    "https://example.com/cat.png", "http://example.com/dog.jpg",
    "data:image/png;base64,iVBORw0KGgo=", "data:image/jpeg;base64,/9j/4AAQ", "data:image/webp;base64,UklGRg==",
    "data:image/gif;base64,R0lGODlh", "data:image/svg+xml;base64,PHN2Zz4=", "data:image/png,rawbytes",
    "data:image/bmp;base64,Qk0=",
])
IMAGE = st.fixed_dictionaries({"type": st.just("image"), "url": IMAGE_URLS},
                              optional={"detail": st.sampled_from(["low", "high"]),
                                        "media_type": st.sampled_from(["image/png", "image/heic"])})
PART = st.one_of(st.builds(lambda t: {"type": "text", "text": t}, TEXT), IMAGE)
CONTENT = st.one_of(TEXT, TEXT, st.lists(PART, max_size=3))
# Ids as providers write them, ids from other providers (dots, colons, slashes), and ids reused later.
CALL_IDS = st.one_of(
    st.integers(1, 40).map(lambda n: f"call_{n}"),
    st.sampled_from(["toolu_01A", "functions.search:0", "call/7", "call 8", "é", "call_1"]),
)
ARGUMENTS = st.sampled_from(['{"city": "Lisbon"}', "", "not json", "[1, 2]", '{"a": {"b": [1]}}', "null"])


@st.composite
def messages_for(draw, calls_so_far: list[str]):
    """One message of a random role; a tool result answers a call made so far (often the newest ones),
    and now and then a call never made."""
    role = draw(st.sampled_from(["user", "user", "assistant", "assistant", "assistant", "tool", "tool", "agent",
                                 "system"]))
    message = {"role": role}
    if role == "assistant":
        calls = draw(st.lists(st.builds(lambda i, n, a: {"id": i, "name": n, "arguments": a}, CALL_IDS,
                                        st.sampled_from(["search", "get_weather"]), ARGUMENTS),
                              max_size=3, unique_by=lambda c: c["id"]))
        if calls:
            message["tool_calls"] = calls
        message["content"] = draw(st.one_of(CONTENT, st.none())) if calls else draw(CONTENT)
        if draw(st.booleans()):
            message["reasoning"] = draw(TEXT)
    else:
        message["content"] = draw(CONTENT)
    if role == "tool":
        recent = calls_so_far[-3:]
        message["tool_call_id"] = draw(st.sampled_from(recent or ["call_unknown"]) if draw(st.integers(0, 5))
                                       else st.one_of(CALL_IDS, st.sampled_from(calls_so_far or ["x"])))
    if draw(st.integers(0, 8)) == 0:
        message["name"] = draw(st.sampled_from(["alice", "Bob Smith", "tool_runner"]))
    return message


@st.composite
def tool_round(draw, calls_so_far: list[str]):
    """An assistant message with tool calls and results for some of them: in any order, now and then one
    answered twice, one left unanswered, or a result for an older call in between."""
    calls = draw(st.lists(CALL_IDS, min_size=1, max_size=3, unique=True))
    assistant = {"role": "assistant", "content": draw(st.one_of(st.none(), CONTENT)),
                 "tool_calls": [{"id": c, "name": "search", "arguments": draw(ARGUMENTS)} for c in calls]}
    answered = draw(st.lists(st.sampled_from(calls + calls_so_far[-2:]), max_size=4))
    results = [{"role": "tool", "tool_call_id": c, "content": draw(CONTENT)} for c in answered]
    return [assistant, *results]


@st.composite
def batches(draw, calls_so_far: list[str]):
    calls = list(calls_so_far)
    batch = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["turn", "tool round", "message", "message"]))
        if kind == "turn":
            piece = [{"role": "user", "content": draw(CONTENT)}]
        elif kind == "tool round":
            piece = draw(tool_round(calls))
        else:
            piece = [draw(messages_for(calls))]
        for message in piece:
            if draw(st.integers(0, 9)) == 0:
                message["include_in_messages"] = False
            calls += [call["id"] for call in message.get("tool_calls", ())]
        batch += piece
    return batch


def has_images(model_input) -> bool:
    return any(isinstance(e.content, list) and any(p["type"] == "image" for p in e.content)
               for e in model_input.entries)


def assert_provider_valid(model_input, what: str):
    """Each provider format is a request its provider takes, or is refused as nothing to send when it
    would have no message; the token total is a recount of the `openai` rendering."""
    for fmt, problems in (("openai", openai_problems), ("anthropic", anthropic_problems)):
        payload = render_model_input(model_input, fmt)
        try:
            check_something_to_send(model_input, fmt)
        except NothingToSend:
            assert not (payload["messages"] if fmt == "anthropic" else payload), (what, payload)
            continue
        assert problems(payload) == [], (what, fmt, payload)
        if fmt == "openai" and not has_images(model_input):
            assert count_openai_messages(payload)[0] == model_input.tokens, (what, payload)


@SESSIONS
@given(data=st.data())
def test_every_accepted_session_renders_as_requests_openai_and_anthropic_accept(data, project):
    key = f"p{Session.objects.count()}"
    calls: list[str] = []
    if data.draw(st.booleans(), label="instructions"):
        update_session(project, key, {"instructions": data.draw(st.sampled_from(["Be brief.", "You are a bot.", " "]))})
    for _ in range(data.draw(st.integers(1, 10), label="steps")):
        step = data.draw(st.sampled_from(["append", "append", "append", "append", "toggle", "compact", "request"]))
        try:
            if step == "append":
                batch = data.draw(batches(calls), label="batch")
                append_messages(project, key, batch)
                calls += [call["id"] for message in batch for call in message.get("tool_calls", ())]
            elif step == "toggle":
                session = get_session(project, key)
                seq = data.draw(st.integers(1, max(session.message_count, 1)), label="seq")
                update_message(project, key, seq, {"include_in_messages": data.draw(st.booleans(), label="include")})
            elif step == "compact":
                session = get_session(project, key)
                compact(session, force=True, keep_recent_tokens=data.draw(st.integers(1, 300), label="keep"),
                        summary=data.draw(st.one_of(st.none(), st.sampled_from(["They talked.", "Earlier: weather."])),
                                          label="summary"))
            else:
                batch = data.draw(batches(calls), label="request messages")
                for message in batch:
                    message["persist"] = data.draw(st.booleans(), label="persist")
                built = build_request(project, key, messages=batch, fmt="openai")
                calls += [c["id"] for message in batch if message["persist"] for c in message.get("tool_calls", ())]
                assert_provider_valid(built.model_input, "the built request")
        except DomainError:
            continue  # refused: nothing changed
        session = Session.objects.filter(project=project, key=key).first()
        if session is None:
            continue
        assert_provider_valid(build_model_input(session), "the model input")
        if session.message_count:
            as_of = data.draw(st.integers(0, session.message_count), label="as_of")
            assert_provider_valid(build_model_input(session, as_of=as_of), f"the model input as of {as_of}")


# --- what the properties found --------------------------------------------------------------------
# Each of these was a request a provider refuses, rendered from a session the API had accepted.


def model_input_of(append, project, key, messages):
    append(key, messages)
    return build_model_input(get_session(project, key))


def test_tool_ids_of_other_providers_are_made_valid_for_anthropic_and_results_still_match(append, project):
    model_input = model_input_of(append, project, "kimi", [
        {"role": "user", "content": "Search."},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "functions.search:0", "name": "search", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "functions.search:0", "content": "found"},
    ])

    messages = render_model_input(model_input, "anthropic")["messages"]

    assert messages[1]["content"][0]["id"] == "functions_search_0"
    assert messages[2]["content"][0]["tool_use_id"] == "functions_search_0"
    assert render_model_input(model_input, "openai")[1]["tool_calls"][0]["id"] == "functions.search:0"  # unchanged there
    assert_provider_valid(model_input, "ids from another provider")


def test_a_tool_call_id_reused_in_a_later_turn_gets_an_id_of_its_own_for_anthropic(append, project):
    round_trip = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "name": "weather", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]
    model_input = model_input_of(append, project, "reuse", round_trip + round_trip)

    messages = render_model_input(model_input, "anthropic")["messages"]

    uses = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert uses == results == ["call_0", "call_0_2"]
    assert_provider_valid(model_input, "a reused id")


def test_an_image_in_an_assistant_message_reaches_both_providers_as_a_placeholder(append, project):
    image = {"type": "image", "url": "https://example.com/chart.png"}
    model_input = model_input_of(append, project, "drawn", [
        {"role": "user", "content": "Draw a chart."},
        {"role": "assistant", "content": [{"type": "text", "text": "Here:"}, image]},
    ])

    assert render_model_input(model_input, "openai")[1]["content"][1] == {"type": "text",
                                                              "text": "[image: https://example.com/chart.png]"}
    assert render_model_input(model_input, "anthropic")["messages"][1]["content"][1] == {
        "type": "text", "text": "[image: https://example.com/chart.png]"}
    assert_provider_valid(model_input, "an assistant image")


@pytest.mark.parametrize("url", ["data:image/svg+xml;base64,PHN2Zz4=", "data:image/png,rawbytes",
                                 "data:image/bmp;base64,Qk0="])
def test_an_image_providers_do_not_take_reaches_them_as_a_placeholder(append, project, url):
    model_input = model_input_of(append, project, "odd-image", [
        {"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image", "url": url}]}])

    assert render_model_input(model_input, "openai")[0]["content"][1] == {"type": "text", "text": f"[image: {url}]"}
    assert render_model_input(model_input, "anthropic")["messages"][0]["content"][1] == {"type": "text", "text": f"[image: {url}]"}


def test_anthropic_takes_the_type_of_a_base64_image_from_its_bytes_not_the_clients_label(append, project):
    model_input = model_input_of(append, project, "label", [{"role": "user", "content": [
        {"type": "image", "url": "data:image/png;base64,iVBORw0KGgo=", "media_type": "image/heic"}]}])

    block = render_model_input(model_input, "anthropic")["messages"][0]["content"][0]

    assert block["source"] == {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


def test_an_empty_list_of_parts_is_empty_text_for_openai(append, project):
    model_input = model_input_of(append, project, "empty", [
        {"role": "user", "content": []}, {"role": "assistant", "content": []}, {"role": "user", "content": "hi"}])

    assert [m["content"] for m in render_model_input(model_input, "openai")] == ["", "", "hi"]
    assert_provider_valid(model_input, "empty parts")


def test_an_empty_tool_result_has_no_content_for_anthropic(append, project):
    model_input = model_input_of(append, project, "quiet-tool", [
        {"role": "user", "content": "Ping."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "ping", "arguments": ""},
                                                              {"id": "c2", "name": "ping", "arguments": ""}]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": " "}]},
    ])

    results = render_model_input(model_input, "anthropic")["messages"][2]["content"]

    assert results == [{"type": "tool_result", "tool_use_id": "c1"}, {"type": "tool_result", "tool_use_id": "c2"}]
    assert_provider_valid(model_input, "empty tool results")


def test_an_anthropic_input_opening_with_the_assistant_opens_with_a_placeholder_user_message(append, project):
    model_input = model_input_of(append, project, "greeting", [
        {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Hi."}])

    messages = render_model_input(model_input, "anthropic")["messages"]

    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": ANTHROPIC_OPENING}]}
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [m["role"] for m in render_model_input(model_input, "openai")] == ["assistant", "user"]  # OpenAI takes it as it is
    assert_provider_valid(model_input, "an assistant greeting")


def test_a_name_openai_would_refuse_is_made_one_it_takes(append, project):
    model_input = model_input_of(append, project, "named", [
        {"role": "user", "content": "Hi.", "name": "Bob Smith (support)"},
        {"role": "assistant", "content": "Hello.", "name": "helper_bot"}])

    assert [m["name"] for m in render_model_input(model_input, "openai")] == ["Bob_Smith__support_", "helper_bot"]
    assert render_model_input(model_input, "ctxweb")[0]["name"] == "Bob Smith (support)"  # stored as sent
    assert_provider_valid(model_input, "names")


def test_blank_instructions_are_left_out_of_anthropics_system(append, project):
    update_session(project, "blank", {"instructions": "  \n"})
    model_input = model_input_of(append, project, "blank", [{"role": "user", "content": "Hi."}])

    assert "system" not in render_model_input(model_input, "anthropic")
    assert_provider_valid(model_input, "blank instructions")
