"""Summarizers for compaction. Each takes the previous summary and the covered messages the
model would have seen, and returns the text of the new summary."""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from sessions.context.facts import carries, fold, ranked, tally
from sessions.context.model_input import split_turns
from sessions.models import Message, Role
from sessions.store.leases import pulse
from sessions.wire.tokens import count_text


class SummarizerError(Exception):
    pass


def _one_line(text: str, limit: int) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text if len(text) <= limit else text[: max(limit - 1, 1)].rstrip() + "…"


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" "))]


def _message_text(message: Message) -> str:
    text = message.text
    if isinstance(message.content, list):
        images = sum(1 for part in message.content if part.get("type") == "image")
        if images:
            text = (text + f" [{images} image(s)]").strip()
    return text


def transcript(previous_summary: str, messages: list[Message]) -> str:
    """The plain-text transcript a summarizer receives."""
    lines = []
    if previous_summary:
        lines += ["Summary so far:", previous_summary, ""]
    for m in messages:
        role = "user (agent)" if m.role == Role.AGENT else m.role
        head = f"[#{m.seq} {role}]"
        if m.role == Role.TOOL:
            head = f"[#{m.seq} tool result for {m.tool_call_id}]"
        text = _message_text(m)
        if text:
            lines.append(f"{head} {text}")
        for call in m.tool_calls:
            lines.append(f"[#{m.seq} tool call {call['id']}] {call['name']}({call['arguments']})")
    return "\n".join(lines)


# --- extractive ----------------------------------------------------------------------------------

ERROR_HINT = re.compile(r"\b(error|exception|traceback|failed|not found|denied)\b|returncode>[1-9]", re.IGNORECASE)
FAILED_STATES = {"error", "failed", "failure", "denied"}


def result_failed(text: str) -> bool:
    """Whether a tool result reads as a failure: a JSON object with an error or a failed state, or
    error words in plain text."""
    try:
        value = json.loads(text)
    except ValueError:
        return bool(ERROR_HINT.search(text[:400]))
    if isinstance(value, dict):
        if value.get("error") or value.get("errors") or value.get("exception"):
            return True
        return any(str(value.get(key, "")).lower() in FAILED_STATES for key in ("status", "state", "result"))
    return False


def _arguments(arguments: str, limit: int) -> str:
    """Tool arguments as short key=value pairs when they are a JSON object."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return _one_line(arguments, limit)
    if not isinstance(value, dict):
        return _one_line(arguments, limit)
    pairs = ", ".join(
        f"{key}={item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}" for key, item in value.items()
    )
    return _one_line(pairs, limit)


def _digest_lines(messages: list[Message], limit: int, result_limit: int) -> list[str]:
    lines = []
    results = {(m.call_seq, m.tool_call_id): m for m in messages if m.role == Role.TOOL}
    for turn in split_turns(messages):
        first = turn[0]
        if first.role == Role.USER:
            lines.append(f"#{first.seq} user asked: {_one_line(_message_text(first), limit)}")
        for m in turn:
            if m.role == Role.AGENT:
                lines.append(f"  #{m.seq} app note: {_one_line(_message_text(m), limit // 2)}")
            for call in m.tool_calls:
                result = results.get((m.seq, call["id"]))
                if result is None:
                    outcome = "no result"
                else:
                    text = _message_text(result)
                    failed = result_failed(text)
                    outcome = "error" if failed else "ok"
                    snippet = result_limit if not failed else max(result_limit, 60)
                    if snippet:
                        outcome += f": {_one_line(text, snippet)}"
                lines.append(f"  #{m.seq} {call['name']}({_arguments(call['arguments'], limit // 2)}) → {outcome}")
        answers = [m for m in turn if m.role == Role.ASSISTANT and m.text.strip()]
        if answers:
            last = answers[-1]
            lines.append(f"  #{last.seq} assistant concluded: {_one_line(last.text, limit)}")
    return lines


SHRINK_STEPS = ((400, 120), (300, 80), (200, 0), (120, 0), (80, 0), (50, 0))
FACTS_HEAD = "Facts: "
FACTS_JOIN = " · "


@dataclass
class Digest:
    """The extractive summary, and the salient literals of what it covers that it had to leave out."""

    text: str
    dropped: list[str] = field(default_factory=list)


def _shortened(previous: list[str], messages: list[Message], budget: int) -> list[str]:
    """The digest at each shrink step that fits `budget`, longest first; the last resort (start and end
    of the digest, with what was left out in between) when none fits."""
    fitting = []
    for limit, result_limit in SHRINK_STEPS:
        head = [_indent(line) + _one_line(line, limit) for line in previous]
        text = "\n".join(head + _digest_lines(messages, limit, result_limit))
        if count_text(text) <= budget:
            fitting.append(text)
    if fitting:
        return fitting
    lines = [_indent(line) + _one_line(line, 50) for line in previous] + _digest_lines(messages, 50, 0)
    keep = len(lines)
    text = "\n".join(lines)
    shorter = []
    while keep > 0:
        keep = max(keep * 3 // 4, 2) if keep > 2 else keep - 1
        front = keep // 2
        left_out = len(lines) - keep
        shown = (lines[:front] + [f"… {left_out} line{'' if left_out == 1 else 's'} left out …"]
                 + lines[len(lines) - (keep - front):])
        if keep == 0:
            shown = [f"… {len(lines)} line{'' if len(lines) == 1 else 's'} left out …"]
        text = "\n".join(shown)
        if count_text(text) <= budget:
            shorter.append(text)
    # The first that fits is the digest without facts; the shorter ones leave room for them.
    return shorter or [text]


def _with_facts(digest: str, wanted: list[str], budget: int) -> Digest:
    """`digest` plus a line of the `wanted` literals it does not carry, as many as fit `budget`, in
    their order (most repeated, then most recent, first)."""
    folded = fold(digest)
    missing = [literal for literal in wanted if not carries(folded, literal)]
    if not missing:
        return Digest(digest, [])
    room = budget - count_text(digest) - count_text("\n" + FACTS_HEAD)
    chosen: list[str] = []
    used = 0
    for literal in missing:
        cost = count_text(FACTS_JOIN + literal)
        if used + cost <= room:
            chosen.append(literal)
            used += cost
    while chosen:
        text = digest + "\n" + FACTS_HEAD + FACTS_JOIN.join(chosen)
        if count_text(text) <= budget:
            break
        chosen.pop()
    if not chosen:
        return Digest(digest, missing)
    kept = set(chosen)
    return Digest(text, [literal for literal in missing if literal not in kept])


def extractive_digest(previous_summary: str, messages: list[Message], budget: int, *, keep_facts: bool = True) -> Digest:
    """A deterministic digest, not an LLM: who asked what, which tools ran with what outcome, and what
    the assistant concluded, shortened step by step until it fits `budget` tokens. With `keep_facts`,
    the salient literals of the messages and the previous summary (sessions/context/facts.py) that the digest
    does not carry are added on a last line, most repeated and most recent first, as many as fit; of the
    shrink steps that fit, the one that leaves out the fewest literals wins (the longest on a tie), and
    the literals that did not fit are reported in `dropped`."""
    previous = [line for line in (previous_summary or "").splitlines() if line.strip()]
    candidates = _shortened(previous, messages, budget)
    if not keep_facts:
        return Digest(candidates[0])
    pulse()  # the digest's candidates were many steps; the facts are as many again (sessions/store/leases.py)
    found = tally(messages)
    pulse()
    for key, entry in tally([_PreviousSummary(previous_summary or "")]).items():
        found.setdefault(key, entry)
    wanted = [t.text for t in ranked(found.values())]
    best = None
    for digest in candidates:
        attempt = _with_facts(digest, wanted, budget)
        if best is None or len(attempt.dropped) < len(best.dropped):
            best = attempt
        if not best.dropped:
            break
    return best


@dataclass
class _PreviousSummary:
    """The previous summary seen as a message, so its facts are tallied like the covered messages'."""

    text: str
    tool_calls: tuple = ()
    seq: int = 0


def extractive(previous_summary: str, messages: list[Message], budget: int) -> str:
    return extractive_digest(previous_summary, messages, budget).text


# --- openai --------------------------------------------------------------------------------------

OPENAI_PROMPT = (
    "You compact a conversation between a user, an AI assistant and its tools. Write a concise summary "
    "that lets the assistant continue without the original messages: what the user asked for, decisions "
    "made, facts and identifiers learned from tools, what was done and what is still open. Fold the "
    "previous summary in if one is given. Answer with the summary only."
)


def openai_chat(previous_summary: str, messages: list[Message], budget: int) -> str:
    try:
        import openai
    except ImportError as exc:
        raise SummarizerError("the openai summarizer needs the optional extra: pip install 'ctxweb[llm]'") from exc
    client = openai.OpenAI(
        base_url=settings.CTXWEB_OPENAI_BASE_URL,
        api_key=settings.CTXWEB_OPENAI_API_KEY or "not-set",
        timeout=settings.CTXWEB_OPENAI_TIMEOUT,
        max_retries=0,
    )
    try:
        response = client.chat.completions.create(
            model=settings.CTXWEB_OPENAI_MODEL,
            messages=[
                {"role": "system", "content": OPENAI_PROMPT},
                {"role": "user", "content": transcript(previous_summary, messages)},
            ],
            max_tokens=budget,
        )
    except openai.APITimeoutError as exc:
        raise SummarizerError(f"summarizer timed out after {settings.CTXWEB_OPENAI_TIMEOUT:g}s") from exc
    except openai.APIStatusError as exc:
        raise SummarizerError(f"summarizer endpoint answered {exc.status_code}: {_one_line(str(exc.message), 300)}") from exc
    except openai.OpenAIError as exc:
        raise SummarizerError(f"summarizer request failed: {_one_line(str(exc), 300)}") from exc
    try:
        text = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError) as exc:
        raise SummarizerError(f"summarizer answer has no message: {_one_line(json.dumps(str(response)), 200)}") from exc
    return text or ""


SUMMARIZERS: dict[str, Callable[[str, list[Message], int], str]] = {
    "extractive": extractive,
    "openai": openai_chat,
}


def get_summarizer(name: str):
    try:
        return SUMMARIZERS[name]
    except KeyError:
        raise SummarizerError(f"unknown summarizer {name!r}") from None
