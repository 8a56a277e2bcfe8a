"""Request logs: JSON Lines where each line is one request an application sent to an OpenAI Chat
Completions endpoint, so the conversation is rebuilt from the requests (sessions.ingest.recorded_requests)
rather than read as one message list.

A line is one of:
- a request body with its response: `{"request": {body}, "response": {...}}`, or the body's fields at the
  top level beside `response`;
- a record with `type` `request`, a `timestamp`, and the messages sent under `messages` or
  `request_params.messages` (with the other parameters beside them), optionally with its `response`;
  a following record of `type` `response` is that request's response (SWE-agent's llm_interactions
  logs write the two as separate lines, and a request retried before its response came has none).

A response is a Chat Completions response (`choices[].message`, `usage`), a message or a list of
messages, or SWE-agent's `outputs` (`[{message, tool_calls}]`) with `input_tokens`/`output_tokens`.
Records of other types are skipped and counted. Nothing is stored here: the runner hands the
CapturedRequests to record_requests.
"""

import hashlib
import json
from datetime import UTC, datetime, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from sessions.ingest.recorded_requests import CapturedRequest
from sessions.wire.json_body import nested_too_deep, too_deep
from sessions.wire.parsed import MAX_KEY, Source, TranscriptError, safe_key, shorten

FORMAT = "request-log"
SOURCE = "request_log"
REQUEST_TYPES = {"request", "llm_request", "chat.completion.request"}
RESPONSE_TYPES = {"response", "llm_response", "chat.completion"}
# Fields of a record around the request body, not part of it.
RECORD_FIELDS = {"type", "timestamp", "time", "created_at", "request", "request_params", "response", "outputs",
                 "input_tokens", "output_tokens", "cost"}
# Body fields that are credentials, never stored as parameters.
SECRET_FIELDS = {"api_key", "api-key", "authorization", "Authorization", "headers", "extra_headers"}
CONVERSATION_FIELDS = ("conversation_id", "session_id", "thread_id")


def _body(record: dict) -> dict | None:
    """The request body a record holds (with its `messages`), or None when it holds none."""
    for name in ("request", "request_params"):
        if isinstance(record.get(name), dict) and "messages" in record[name]:
            return record[name]
    if "messages" in record:
        return {k: v for k, v in record.items() if k not in RECORD_FIELDS}
    return None


def _is_response_record(record: dict) -> bool:
    return record.get("type") in RESPONSE_TYPES and _body(record) is None


def looks_like(value) -> bool:
    """Records of requests: one with a request body and either a `type` of request, a `response`, or the
    body under `request` / `request_params`. A plain record with `messages` is a transcript, not this."""
    records = value if isinstance(value, list) else [value]
    for record in records:
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("request"), dict) and "messages" in record["request"]:
            return True
        if isinstance(record.get("request_params"), dict) and "messages" in record["request_params"]:
            return True
        if "messages" in record and (record.get("type") in REQUEST_TYPES or "response" in record):
            return True
    return False


def _lines(name: str, data: bytes) -> list[tuple[int, str, object]]:
    """(line number, line text, value) of each line that is not blank; a JSON list's items numbered from 1."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if nested_too_deep(data):
        raise TranscriptError(too_deep("the file"))
    stripped = text.lstrip()
    if stripped.startswith("[") and not name.lower().endswith((".jsonl", ".ndjson")):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list):
            return [(n, json.dumps(item, sort_keys=True), item) for n, item in enumerate(items, start=1)]
    out = []
    for number, line in enumerate(text.split("\n"), start=1):  # "\n" only, as detect.load reads lines
        if not line.strip():
            continue
        try:
            out.append((number, line.rstrip("\r"), json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"line {number} is not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not out:
        raise TranscriptError("the file is empty")
    return out


def _time(value) -> datetime | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 10**11 else value  # milliseconds or seconds since the epoch
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed is not None and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed
    return None


def _record_time(record: dict) -> datetime | None:
    for name in ("timestamp", "time", "created_at"):
        if (found := _time(record.get(name))) is not None:
            return found
    return None


def _count(value, where: str, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TranscriptError(f"{where}: {name} must be a whole number of tokens, not {value!r}")
    return value


def _message(value, where: str) -> dict:
    """A response message: its fields as given, less those that are null (content stays)."""
    if not isinstance(value, dict) or not isinstance(value.get("role", "assistant"), str):
        raise TranscriptError(f"{where}: a response message must be an object")
    message = {k: v for k, v in value.items() if v is not None or k == "content"}
    message.setdefault("role", "assistant")
    message.setdefault("content", None)
    return message


def _outputs(outputs, where: str) -> list[dict]:
    """SWE-agent's `outputs`: [{message, tool_calls}], one per choice; the first is the response."""
    if not isinstance(outputs, list):
        raise TranscriptError(f"{where}: outputs must be a list")
    for output in outputs[:1]:
        if not isinstance(output, dict):
            raise TranscriptError(f"{where}: an output must be an object")
        calls = output.get("tool_calls") or []
        text = output.get("message")
        if text is not None and not isinstance(text, str):
            raise TranscriptError(f"{where}: an output's message must be text")
        message = {"role": "assistant", "content": text if text or not calls else None}
        if calls:
            message["tool_calls"] = calls
        return [message]
    return []


def _response(record: dict, where: str) -> tuple[list[dict], int | None, int | None, str]:
    """The response messages, the provider's input and output token counts, and the model it names."""
    response = record.get("response")
    usage, model = {}, ""
    if response is None:
        messages = _outputs(record["outputs"], where) if "outputs" in record else []
    elif isinstance(response, list):
        messages = [_message(m, f"{where}, response[{i}]") for i, m in enumerate(response)]
    elif isinstance(response, dict) and isinstance(response.get("choices"), list):
        choices = [c for c in response["choices"] if isinstance(c, dict)]
        first = min(choices, key=lambda c: c.get("index") if isinstance(c.get("index"), int) else 0, default=None)
        messages = [_message(first["message"], f"{where}, response")] if first and first.get("message") else []
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        model = response.get("model") if isinstance(response.get("model"), str) else ""
    elif isinstance(response, dict) and "role" in response:
        messages = [_message(response, f"{where}, response")]
    elif isinstance(response, dict) and "outputs" in response:
        messages = _outputs(response["outputs"], where)
        usage = response
    else:
        raise TranscriptError(f"{where}: response must be a Chat Completions response (with choices), a message "
                              f"or a list of messages")
    inputs = usage.get("prompt_tokens", usage.get("input_tokens", record.get("input_tokens")))
    outputs = usage.get("completion_tokens", usage.get("output_tokens", record.get("output_tokens")))
    return messages, _count(inputs, where, "input tokens"), _count(outputs, where, "output tokens"), model


def _conversation(record: dict, body: dict) -> str | None:
    for holder in (record, body, record.get("metadata"), body.get("metadata")):
        if not isinstance(holder, dict):
            continue
        for name in CONVERSATION_FIELDS:
            if isinstance(holder.get(name), str | int) and not isinstance(holder.get(name), bool) and str(holder[name]):
                return str(holder[name])
    user = body.get("user", record.get("user"))
    return user if isinstance(user, str) and user else None


def external_id(name: str, number: int, line: str) -> str:
    """A request's id: the file's name, the line's number and its content, so re-importing the same file
    stores nothing twice, and a different line at that place is a different request."""
    return hashlib.sha256(f"{name}\n{number}\n{line}".encode()).hexdigest()[:40]


class _Pending:
    def __init__(self, number: int, line: str, record: dict, body: dict, at: datetime | None):
        self.number, self.line, self.record, self.body, self.at = number, line, record, body, at
        self.response: list[dict] = []
        self.usage: tuple[int | None, int | None] = (None, None)
        self.model = ""
        self.answered = False


def parse(name: str, data: bytes, source: Source) -> tuple[list[CapturedRequest], list[int]]:
    """Every request of a request-log file, as CapturedRequests of one conversation per file (or per
    conversation id, when the records carry one), and the line each was read from."""
    pending: list[_Pending] = []
    for number, line, record in _lines(name, data):
        where = f"line {number}"
        if not isinstance(record, dict):
            raise TranscriptError(f"{where} is not a JSON object")
        body = _body(record)
        if body is not None:
            messages = body.get("messages")
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise TranscriptError(f"{where}: messages must be a list of message objects")
            if not messages:
                raise TranscriptError(f"{where}: the request sends no message")
            request = _Pending(number, line, record, body, _record_time(record))
            if "response" in record or "outputs" in record:
                request.response, *usage, request.model = _response(record, where)
                request.usage, request.answered = tuple(usage), True
            pending.append(request)
        elif _is_response_record(record):
            if not pending or pending[-1].answered:
                continue  # a response whose request is not in the file (the log began after it)
            request = pending[-1]
            request.response, *usage, request.model = _response(record, where)
            request.usage, request.answered = tuple(usage), True
        # other records (errors, metadata, unknown types) carry no request: skipped
    if not pending:
        raise TranscriptError("no line holds a request (`messages`, or `request` / `request_params` with messages)")
    return _captured(pending, source), [p.number for p in pending]


def _captured(pending: list[_Pending], source: Source) -> list[CapturedRequest]:
    # Lines without a time of their own follow the line before them (a microsecond later), or, before any
    # line with a time, precede the first that has one; a file without times starts now.
    known = [p.at for p in pending if p.at is not None]
    clock = (known[0] if known else timezone.now()) - timedelta(microseconds=len(pending))
    out = []
    for request in pending:
        clock = request.at if request.at is not None else clock + timedelta(microseconds=1)
        body = request.body
        conversation = _conversation(request.record, body)
        key = (shorten(source.key_prefix + safe_key(conversation), MAX_KEY) if conversation is not None
               else source.key())
        parameters = {k: v for k, v in body.items() if k != "messages" and k not in SECRET_FIELDS}
        model = body.get("model") if isinstance(body.get("model"), str) else request.model
        out.append(CapturedRequest(
            conversation=key,
            external_id=external_id(source.name, request.number, request.line),
            source=SOURCE,
            started_at=clock,
            messages=body["messages"],
            response=request.response,
            model=model or "",
            parameters=parameters,
            usage_input_tokens=request.usage[0],
            usage_output_tokens=request.usage[1],
        ))
    return out
