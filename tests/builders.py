"""Messages of a known token size, and checks on what the model input looks like, for tests.

Sizes are measured with the same code the app stores them with (sessions.wire.tokens.count_message: 3 per
message plus role and text, tool calls by name and arguments), so a test states the size it wants and
the builder pads the text until it is exactly that.
"""

from sessions.models import Event, Message
from sessions.wire.tokens import REPLY_PRIMING, count_message

PAD = " a"  # one token in cl100k_base, whatever comes before it


def sized(role: str, tokens: int, text: str, **fields) -> dict:
    """A ctxweb message of `role` costing exactly `tokens`: `text` padded with filler words."""
    calls = fields.get("tool_calls", ())
    name = fields.get("name", "")
    bare = count_message(role, text, name, calls).total
    missing = tokens - bare
    assert missing >= 0, f"{text!r} alone already costs {bare} tokens, more than {tokens}"
    content = text + PAD * missing
    assert count_message(role, content, name, calls).total == tokens
    return {"role": role, "content": content, **fields}


def user(tokens: int, text: str, **fields) -> dict:
    return sized("user", tokens, text, **fields)


def assistant(tokens: int, text: str, **fields) -> dict:
    return sized("assistant", tokens, text, **fields)


def agent(tokens: int, text: str, **fields) -> dict:
    return sized("agent", tokens, text, **fields)


def tool(tokens: int, call_id: str, text: str, **fields) -> dict:
    return sized("tool", tokens, text, tool_call_id=call_id, **fields)


def call(call_id: str, name: str, arguments: str = "{}") -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def input_tokens(*sizes: int, instructions: int = 0) -> int:
    """What a model input of messages of these sizes costs: their sum plus reply priming."""
    return REPLY_PRIMING + instructions + sum(sizes)


def raw_log(session) -> list[dict]:
    """Every stored field of every message of the session, for before/after comparisons."""
    return list(Message.objects.filter(session=session).order_by("seq").values())


def compaction_events(session) -> list[Event]:
    return list(Event.objects.filter(session=session, type__startswith="COMPACTION_").order_by("id"))


def event_types(session) -> list[str]:
    return [event.type for event in compaction_events(session)]


def openai_input_problems(messages: list[dict]) -> list[str]:
    """Why an OpenAI Chat Completions message list would be rejected, or [] when it is valid.

    Tool results must follow, as one block, the assistant message whose calls they answer, each call
    answered once; every call is answered, the newest assistant message's too (OpenAI refuses a call
    whose result has not come yet), and the list is not empty.
    """
    problems = [] if messages else ["no message"]
    i = 0
    while i < len(messages):
        message = messages[i]
        if message["role"] == "tool":
            problems.append(f"[{i}] tool result {message.get('tool_call_id')!r} does not follow its call")
            i += 1
            continue
        if message["role"] not in ("system", "user", "assistant"):
            problems.append(f"[{i}] role {message['role']!r} is not an OpenAI role")
        calls = [c["id"] for c in message.get("tool_calls") or ()]
        if message.get("tool_calls") == []:
            problems.append(f"[{i}] empty tool_calls list")
        i += 1
        answered = []
        while i < len(messages) and messages[i]["role"] == "tool":
            call_id = messages[i].get("tool_call_id")
            if call_id not in calls or call_id in answered:
                problems.append(f"[{i}] tool result {call_id!r} answers no open call of [{i - 1 - len(answered)}]")
            answered.append(call_id)
            i += 1
        unanswered = [c for c in calls if c not in answered]
        if unanswered:
            problems.append(f"unanswered tool call(s) {unanswered}")
    return problems
