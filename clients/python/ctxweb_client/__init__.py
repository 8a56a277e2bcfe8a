"""A small Python client for the ctxweb HTTP API v1, with the standard library only (urllib + json):
the `ctxweb-client` distribution, installed without the server (pip install ./clients/python).

    from ctxweb_client import Client

    client = Client("http://127.0.0.1:8000", "ctx_...")
    client.put_session("support-42", title="Ticket 42", instructions="You are a support agent.")
    client.append("support-42", [{"role": "user", "content": "Hello"}])
    model_input = client.model_input("support-42", format="openai")

`model_input` remembers the last answer for each (session, format, as_of) with its ETag and sends the
tag back (If-None-Match): while the session is unchanged the server answers 304 without building the
input, and the remembered one is returned (as a fresh copy). `model_input_cache_size` bounds how many it
remembers (0: none).

Every message sent by `append` gets a client id before the first attempt, so retrying a batch after a
timeout stores nothing twice (the server answers `duplicate` for what it already has). Errors are
`CtxwebError` subclasses carrying the API's `code` and the HTTP `status`.

Importing this module never imports Django or the server's packages: it runs in any application.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode
from urllib.request import Request, urlopen

__all__ = [
    "AppendResult", "AppendedMessage", "AuthenticationError", "Checkpoint", "Client", "Compaction",
    "ConflictError", "ConnectionFailed", "CtxwebError", "Event", "EventPage", "Message", "MessagePage",
    "ModelInput", "NotFoundError", "Omission", "PayloadTooLargeError", "ServerError", "Session",
    "SessionPage", "Timeout", "TokenCount", "ValidationError", "ContextCheck", "ContextCheckFact", "RateLimitedError",
]

RETRYABLE_STATUS = {502, 503, 504}


# --- errors --------------------------------------------------------------------------------------


class CtxwebError(Exception):
    """An error from ctxweb or on the way to it. `status` is the HTTP status (None when no response
    came back), `code` the API's machine-readable code, `detail` its sentence, `body` the whole JSON."""

    def __init__(self, detail: str, *, status: int | None = None, code: str = "error", body: dict | None = None):
        super().__init__(f"{detail} ({code}{f', HTTP {status}' if status else ''})")
        self.detail = detail
        self.status = status
        self.code = code
        self.body = body or {}


class AuthenticationError(CtxwebError):
    """401: the API key is missing, unknown or revoked."""


class NotFoundError(CtxwebError):
    """404: no such session, message or route in the key's project."""


class ConflictError(CtxwebError):
    """409: for example a message id already stored with different content."""


class PayloadTooLargeError(CtxwebError):
    """413: the request body or an image is over the server's limit."""


class ValidationError(CtxwebError):
    """400 or 422: the request was refused as it is; sending it again will not help."""


class RateLimitedError(CtxwebError):
    """429: the API key's rate limit is reached; nothing of the request was taken. `retry_after` is the
    seconds the server said to wait (its Retry-After). The client waits that long and sends the request
    again by itself (`rate_limit_retries` times, if the wait is at most `max_retry_after`)."""

    retry_after: float = 1.0


class ServerError(CtxwebError):
    """5xx: the server failed; the request may be retried."""


class Timeout(CtxwebError):
    """No answer within the client's timeout. The request may or may not have been carried out."""


class ConnectionFailed(CtxwebError):
    """The server could not be reached."""


ERRORS_BY_STATUS = {400: ValidationError, 401: AuthenticationError, 404: NotFoundError, 409: ConflictError,
                    413: PayloadTooLargeError, 422: ValidationError, 429: RateLimitedError}


def _error_for(status: int, body: dict, headers=None) -> CtxwebError:
    cls = ERRORS_BY_STATUS.get(status) or (ServerError if status >= 500 else CtxwebError)
    detail = body.get("detail") if isinstance(body.get("detail"), str) else f"HTTP {status}"
    error = cls(detail, status=status, code=body.get("code") or f"http_{status}", body=body)
    if isinstance(error, RateLimitedError):
        try:  # seconds; an HTTP date or nothing: a second
            error.retry_after = max(0.0, float((headers or {}).get("Retry-After") or 1))
        except ValueError:
            error.retry_after = 1.0
    return error


# --- values --------------------------------------------------------------------------------------


def _datetime(value):
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def _build(cls, data: dict):
    """A dataclass from a JSON object: known fields only, datetimes parsed."""
    names = {f.name for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in names}
    for name in ("created_at", "updated_at", "last_activity_at", "started_at", "ended_at"):
        if name in values:
            values[name] = _datetime(values[name])
    return cls(**values)


@dataclass
class Session:
    key: str
    title: str
    metadata: dict[str, Any]
    instructions: str
    instructions_tokens: int
    compaction: dict[str, Any]
    message_count: int
    raw_tokens: int
    model_input_tokens: int
    checkpoint_count: int
    created_at: datetime
    updated_at: datetime
    last_activity_at: datetime
    source: str = "api"  # requests (rebuilt from recorded requests) | import | api
    request_count: int = 0  # recorded requests it was rebuilt from
    pinned_facts: list[dict[str, str]] = field(default_factory=list)  # literals no summary may lose
    created: bool = False  # put_session: whether this call created it


@dataclass
class SessionPage:
    items: list[Session]
    next_cursor: str | None


@dataclass
class AppendedMessage:
    index: int
    seq: int | None
    id: str
    tokens: int
    stored: bool
    duplicate: bool


@dataclass
class Checkpoint:
    id: int
    number: int  # 1, 2, 3 within the session, as the dashboard and exports name it
    previous_id: int | None
    first_seq: int
    last_seq: int
    created_at_seq: int
    summary: str
    summary_tokens: int
    replaced_tokens: int
    tokens_before: int
    tokens_after: int
    summarizer: str
    trigger: str
    created_at: datetime
    facts: dict[str, int] = field(default_factory=dict)  # {"kept", "lost"}: the covered messages' salient literals
    lost: list[dict[str, Any]] = field(default_factory=list)  # those the summary does not carry


@dataclass
class Event:
    id: int
    type: str
    actor: str
    data: dict[str, Any]
    created_at: datetime


@dataclass
class EventPage:
    items: list[Event]
    next_after: int | None


@dataclass
class Compaction:
    status: str  # completed | skipped | failed
    max_tokens: int
    keep_recent_tokens: int
    tokens_before: int
    reason: str | None = None
    error: str | None = None
    tokens_after: int | None = None
    replaced_tokens: int | None = None
    summary_tokens: int | None = None
    still_over_threshold: bool | None = None
    budget_reached: bool | None = None  # completed: the run stopped at its budget; another run has turns left to cover
    checkpoint: Checkpoint | None = None
    events: list[Event] = field(default_factory=list)
    explanation: str | None = None  # skipped (under_threshold, nothing_to_compact): why, in plain words

    @classmethod
    def from_json(cls, data: dict | None) -> Compaction | None:
        if data is None:
            return None
        compaction = _build(cls, data)
        compaction.checkpoint = _build(Checkpoint, data["checkpoint"]) if data.get("checkpoint") else None
        compaction.events = [_build(Event, e) for e in data.get("events") or ()]
        return compaction


@dataclass
class CompactionRun:
    """A compaction run on the server's background worker."""

    id: int
    status: str  # queued | running | completed | skipped | failed
    trigger: str  # auto | request
    attempts: int
    max_attempts: int
    created_at: datetime
    url: str
    last_error: str | None = None
    run_after: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: Compaction | None = None

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "skipped", "failed")

    @classmethod
    def from_json(cls, data: dict | None) -> CompactionRun | None:
        if data is None:
            return None
        run = _build(cls, data)
        for name in ("run_after", "started_at", "finished_at"):
            if getattr(run, name):
                setattr(run, name, _datetime(getattr(run, name)))
        run.outcome = Compaction.from_json(data.get("outcome"))
        return run


@dataclass
class AppendResult:
    session: str
    session_created: bool
    messages: list[AppendedMessage]
    compaction: CompactionRun | None = None  # the automatic run it enqueued; the append does not wait

    @property
    def stored_count(self) -> int:
        return sum(1 for m in self.messages if m.stored)

    @property
    def duplicate_count(self) -> int:
        return sum(1 for m in self.messages if m.duplicate)


@dataclass
class Explanation:
    """Where a stored message is in the model input, or why not (GET messages gives one per message)."""

    code: str  # in_input, covered_by_checkpoint, ..., dropped_by_application, replaced_by_application_summary
    sentence: str
    position: int | None = None
    checkpoint_id: int | None = None
    checkpoint_number: int | None = None
    dropped_tool_calls: list[str] = field(default_factory=list)
    pending_tool_calls: list[str] = field(default_factory=list)
    request: int | None = None  # rebuilt from requests: the latest request, which sent it
    request_position: int | None = None
    last_sent_request: int | None = None  # dropped/replaced by the application: the last request that sent it
    first_missing_request: int | None = None  # ... and the first without it
    replacements: list[int] = field(default_factory=list)  # positions of the application's own summary in it
    edited_by_application: bool = False  # sent in a form of the application's own (a trimmed output)


@dataclass
class Message:
    seq: int
    id: str
    role: str
    content: str | list[dict[str, Any]]
    reasoning: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    name: str
    attributes: dict[str, Any]
    include_in_messages: bool
    created_at: datetime
    tokens: int
    reasoning_tokens: int
    is_error: bool = False  # tool messages: the tool reported a failure
    explain: Explanation | None = None

    @classmethod
    def from_json(cls, data: dict) -> Message:
        message = _build(cls, data)
        message.explain = _build(Explanation, data["explain"]) if data.get("explain") else None
        return message


@dataclass
class MessagePage:
    items: list[Message]
    next_after: int | None


@dataclass
class Omission:
    seq: int | None
    reason: str
    whole_message: bool
    tool_call_id: str | None = None
    request_index: int | None = None


@dataclass
class ModelInput:
    format: str
    session: str
    as_of: int | None
    checkpoint: Checkpoint | None
    tokens: dict[str, int]  # total, instructions, summary, messages, request
    messages: list[dict[str, Any]]
    omitted: list[Omission]
    system: str | None = None  # anthropic format: the instructions
    # Tool calls awaiting their results ({"seq", "request_index", "id", "name", "arguments"}): left out
    # of the provider formats until the results are appended.
    pending_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # Where it comes from: "recorded_request" (what the application sent: request number `request`, its
    # response and the messages stored after it) or "raw_log" (built by ctxweb from the raw log).
    basis: str = "raw_log"
    request: int | None = None
    derived_from: str | None = None  # a request worked out from the source's configuration, not captured


@dataclass
class RecordedRequestSummary:
    """A request the application sent its model, captured from outside (OpenTelemetry, a request log)."""

    number: int
    started_at: datetime
    ended_at: datetime | None
    source: str  # otlp | request_log
    model: str
    provider: str
    tokens: int  # ours
    usage_input_tokens: int | None  # the provider's
    usage_output_tokens: int | None
    message_count: int
    dropped_seqs: list[int]  # raw seqs the application stopped sending at this request
    unmatched_count: int  # messages sent that match no stored one: the application's own summaries


@dataclass
class RecordedRequestPage:
    items: list[RecordedRequestSummary]
    next_after: int | None


@dataclass
class RecordedRequest(RecordedRequestSummary):
    format: str
    messages: list[dict[str, Any]]  # openai: exactly as sent
    message_seqs: list[int | None]  # the raw seq each message sent matched
    unmatched: list[int]
    response: list[dict[str, Any]]
    response_seqs: list[int]
    parameters: dict[str, Any]
    external_id: str
    trace_id: str
    system: str | None = None  # anthropic format: the system messages sent


@dataclass
class TokenCount:
    total: int
    messages: list[int]


@dataclass
class ContextCheckFact:
    """One pinned or expected literal of a context check: where it first appears, and what lost it."""

    name: str
    literal: str
    first_seq: int | None
    passed: bool
    lost_count: int
    lost_at: list[int]
    lost_by: list[int]


@dataclass
class ContextCheck:
    """A context check (POST /context-checks): `passed` when every named fact survived every model input
    after its first message."""

    conversation: str
    passed: bool
    messages: int
    checkpoints: int
    failed_runs: list[str]
    facts: list[ContextCheckFact]
    seconds: float

    @property
    def lost(self) -> list[ContextCheckFact]:
        return [fact for fact in self.facts if not fact.passed]


# --- the client ----------------------------------------------------------------------------------


def new_message_id() -> str:
    return "msg_" + uuid.uuid4().hex


def _every(page_after):
    """Every item of a paged list (raw log, recorded requests): `page_after(after)` gives the page after
    `after`, whose `next_after` says where the next starts, or None at the end."""
    after = 0
    while True:
        page = page_after(after)
        yield from page.items
        if page.next_after is None:
            return
        after = page.next_after


class Client:
    """The ctxweb API v1 at `base_url` (the server's address, with or without /api/v1)."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0, retries: int = 2, backoff: float = 0.5,
                 user_agent: str = "ctxweb-python-client/1", model_input_cache_size: int = 64,
                 rate_limit_retries: int = 3, max_retry_after: float = 60.0):
        base = base_url.rstrip("/")
        self.base_url = base if base.endswith("/api/v1") else base + "/api/v1"
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.user_agent = user_agent
        self.model_input_cache_size = model_input_cache_size
        # A 429 took nothing, so any request is sent again after the server's Retry-After, this many times,
        # when that wait is at most max_retry_after seconds; otherwise RateLimitedError is raised.
        self.rate_limit_retries = rate_limit_retries
        self.max_retry_after = max_retry_after
        # (key, format, as_of) -> (ETag, the response body as sent), least recently used first.
        self._model_inputs: OrderedDict[tuple, tuple[str, bytes]] = OrderedDict()
        self._model_inputs_lock = threading.Lock()

    # --- transport -------------------------------------------------------------------------------

    def _once(self, method: str, path: str, body: Any = None, query: dict | None = None) -> tuple[int, Any]:
        status, raw, headers = self._exchange(method, path, body, query)
        return status, self._decode(raw, headers)

    @staticmethod
    def _decode(raw: bytes, headers) -> Any:
        if headers.get("Content-Type", "").split(";")[0].strip() == "application/json":
            return json.loads(raw) if raw else None
        return raw.decode("utf-8")

    def _exchange(self, method: str, path: str, body: Any = None, query: dict | None = None,
                  headers: dict | None = None) -> tuple[int, bytes, Any]:
        """One request: (status, the raw body, the response headers). A 304 is an answer, not an error."""
        url = self.base_url + path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v is not None and v != ""})
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        request = Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.api_key}")
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", self.user_agent)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urlopen(request, timeout=self.timeout) as response:
                return response.status, response.read(), response.headers
        except HTTPError as exc:
            if exc.code == 304:
                return 304, b"", exc.headers
            raw = exc.read()
            try:
                payload = json.loads(raw) if raw else {}
            except ValueError:
                payload = {}
            raise _error_for(exc.code, payload if isinstance(payload, dict) else {}, exc.headers) from None
        except TimeoutError as exc:
            raise Timeout(f"no answer from {url} within {self.timeout} s", code="timeout") from exc
        except URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise Timeout(f"no answer from {url} within {self.timeout} s", code="timeout") from exc
            raise ConnectionFailed(f"cannot reach {url}: {exc.reason}", code="connection_failed") from exc
        except (ConnectionError, OSError, http.client.HTTPException) as exc:
            raise ConnectionFailed(f"connection to {url} failed: {exc}", code="connection_failed") from exc

    def _request(self, method: str, path: str, body: Any = None, query: dict | None = None,
                 retries: int = 0) -> tuple[int, Any]:
        """One request; `retries` more attempts after a timeout, a lost connection or a 502/503/504.
        Only requests that are safe to repeat are retried (reads, and appends with client ids)."""
        return self._retrying(lambda: self._once(method, path, body, query), retries)

    def _retrying(self, send, retries: int):
        attempt = limited = 0
        while True:
            try:
                return send()
            except RateLimitedError as exc:  # refused before anything was done: safe to send again
                if limited >= self.rate_limit_retries or exc.retry_after > self.max_retry_after:
                    raise
                limited += 1
                time.sleep(exc.retry_after)
                continue
            except (Timeout, ConnectionFailed, ServerError) as exc:
                if attempt >= retries or (isinstance(exc, ServerError) and exc.status not in RETRYABLE_STATUS):
                    raise
            time.sleep(self.backoff * (2 ** attempt))
            attempt += 1

    @staticmethod
    def _key(key: str) -> str:
        return "/sessions/" + quote(key, safe="")

    # --- sessions --------------------------------------------------------------------------------

    def put_session(self, key: str, *, title: str | None = None, metadata: dict | None = None,
                    instructions: str | None = None, compaction: dict | None = None,
                    pinned_facts: list[dict] | None = None) -> Session:
        """Create or update a session; only the fields given change. `.created` tells which. `pinned_facts`:
        literals no summary may lose ({"name", "pattern"} or {"name", "value"})."""
        body = {name: value for name, value in (("title", title), ("metadata", metadata),
                ("instructions", instructions), ("compaction", compaction), ("pinned_facts", pinned_facts))
                if value is not None}
        status, data = self._request("PUT", self._key(key), body, retries=self.retries)
        session = _build(Session, data)
        session.created = status == 201
        return session

    def get_session(self, key: str) -> Session:
        return _build(Session, self._request("GET", self._key(key), retries=self.retries)[1])

    def list_sessions(self, q: str = "", limit: int = 50, cursor: str | None = None) -> SessionPage:
        data = self._request("GET", "/sessions", query={"q": q, "limit": limit, "cursor": cursor},
                             retries=self.retries)[1]
        return SessionPage([_build(Session, s) for s in data["items"]], data.get("next_cursor"))

    # --- messages --------------------------------------------------------------------------------

    def append(self, key: str, messages: list[dict], *, format: str = "ctxweb", system=None,
               retries: int | None = None) -> AppendResult:
        """Append a batch (all or nothing). `format`: ctxweb, or a provider's own message shape (openai,
        anthropic with its `system` given apart). In the ctxweb format, messages without an `id` get one
        before the first attempt, so a retry after a timeout or a lost connection stores nothing twice;
        provider messages carry no ids, so retry those only when you can tolerate a second copy."""
        if format == "ctxweb":
            batch = [dict(m) if m.get("id") else {**m, "id": new_message_id()} for m in messages]
        else:
            batch = list(messages)
        body = {"messages": batch} if format == "ctxweb" else {"format": format, "messages": batch}
        if system is not None:
            body["system"] = system
        retries = self.retries if retries is None else retries
        data = self._request("POST", self._key(key) + "/messages", body, retries=retries)[1]
        return AppendResult(
            session=data["session"],
            session_created=data["session_created"],
            messages=[_build(AppendedMessage, m) for m in data["messages"]],
            compaction=CompactionRun.from_json(data.get("compaction")),
        )

    def messages(self, key: str, after: int = 0, limit: int = 100) -> MessagePage:
        """One page of the raw log, in seq order."""
        data = self._request("GET", self._key(key) + "/messages", query={"after": after, "limit": limit},
                             retries=self.retries)[1]
        return MessagePage([Message.from_json(m) for m in data["items"]], data.get("next_after"))

    def raw_log(self, key: str, page_size: int = 500) -> Iterator[Message]:
        """Every stored message of the session, in seq order, fetched page by page."""
        return _every(lambda after: self.messages(key, after=after, limit=page_size))

    def update_message(self, key: str, seq: int, *, include_in_messages: bool | None = None,
                       attributes: dict | None = None) -> Message:
        """Change a stored message's include_in_messages flag and/or attributes (recorded as an event)."""
        body = {name: value for name, value in (("include_in_messages", include_in_messages),
                                                ("attributes", attributes)) if value is not None}
        data = self._request("PATCH", f"{self._key(key)}/messages/{int(seq)}", body, retries=self.retries)[1]
        return Message.from_json(data)

    # --- recorded requests -----------------------------------------------------------------------

    def requests(self, key: str, after: int = 0, limit: int = 100) -> RecordedRequestPage:
        """One page of the session's recorded requests (OpenTelemetry spans, request-log lines), in order."""
        data = self._request("GET", self._key(key) + "/requests", query={"after": after, "limit": limit},
                             retries=self.retries)[1]
        return RecordedRequestPage([_build(RecordedRequestSummary, r) for r in data["items"]], data.get("next_after"))

    def recorded_requests(self, key: str, page_size: int = 500) -> Iterator[RecordedRequestSummary]:
        """Every recorded request of the session, fetched page by page."""
        return _every(lambda after: self.requests(key, after=after, limit=page_size))

    def recorded_request(self, key: str, number: int, format: str = "openai") -> RecordedRequest:
        """One recorded request with its messages in `format` (openai: exactly as the application sent them)."""
        data = self._request("GET", f"{self._key(key)}/requests/{int(number)}", query={"format": format},
                             retries=self.retries)[1]
        return _build(RecordedRequest, data)

    # --- model input, compaction, tokens ---------------------------------------------------------

    def model_input(self, key: str, format: str = "openai", as_of: int | None = None,
                    basis: str | None = None) -> ModelInput:
        """The model input (on the session's own basis unless `basis` says: raw_log, what ctxweb would
        build from the raw log; recorded_request, what the application sent). Asked again for the same
        session, format, as_of and basis, it is sent only when it changed (If-None-Match with the last
        answer's ETag); otherwise the last answer is returned."""
        remembered = (key, format, as_of, basis)
        with self._model_inputs_lock:
            last = self._model_inputs.get(remembered)
        path, query = self._key(key) + "/model-input", {"format": format, "as_of": as_of, "basis": basis}
        headers = {"If-None-Match": last[0]} if last else None
        status, raw, response_headers = self._retrying(
            lambda: self._exchange("GET", path, query=query, headers=headers), self.retries)
        if status == 304 and last:
            raw = last[1]
        else:
            self._remember_model_input(remembered, response_headers.get("ETag"), raw)
        data = json.loads(raw)  # parsed anew each time: the caller may change what it is given
        return ModelInput(
            format=data["format"],
            session=data["session"],
            as_of=data.get("as_of"),
            checkpoint=_build(Checkpoint, data["checkpoint"]) if data.get("checkpoint") else None,
            tokens=data["tokens"],
            messages=data["messages"],
            omitted=[_build(Omission, o) for o in data.get("omitted") or ()],
            system=data.get("system"),
            pending_tool_calls=data.get("pending_tool_calls") or [],
            basis=data.get("basis", "raw_log"),
            request=data.get("request"),
            derived_from=data.get("derived_from"),
        )

    def _remember_model_input(self, remembered: tuple, tag: str | None, raw: bytes) -> None:
        with self._model_inputs_lock:
            self._model_inputs.pop(remembered, None)
            if not tag or self.model_input_cache_size <= 0:
                return
            self._model_inputs[remembered] = (tag, raw)
            while len(self._model_inputs) > self.model_input_cache_size:
                self._model_inputs.popitem(last=False)

    def compact(self, key: str, *, force: bool = False, max_tokens: int | None = None,
                keep_recent_tokens: int | None = None, summary: str | None = None,
                summarizer: str | None = None, wait: bool = True) -> Compaction | CompactionRun:
        """Request compaction. Not retried: a repeated request could compact again. The server runs it
        on its worker and waits for it up to its bound: the outcome, or (past the bound, or with
        wait=False) the run still under way, to follow with compaction_run()."""
        body = {"force": force, "wait": wait}
        for name, value in (("max_tokens", max_tokens), ("keep_recent_tokens", keep_recent_tokens),
                            ("summary", summary), ("summarizer", summarizer)):
            if value is not None:
                body[name] = value
        status, data = self._request("POST", self._key(key) + "/compact", body)
        return CompactionRun.from_json(data) if status == 202 else Compaction.from_json(data)

    def compaction_run(self, key: str, run_id: int) -> CompactionRun:
        """A compaction run's state, attempts, last error, and outcome once finished."""
        data = self._request("GET", f"{self._key(key)}/compactions/{int(run_id)}", retries=self.retries)[1]
        return CompactionRun.from_json(data)

    def count_tokens(self, messages: list[dict]) -> TokenCount:
        """Tokens of an OpenAI-format message list, in total and per message."""
        data = self._request("POST", "/tokens", {"messages": messages}, retries=self.retries)[1]
        return TokenCount(data["total"], data["messages"])

    def check_context(self, *, messages: list[dict] | None = None, session: str | None = None,
                      format: str = "ctxweb", system=None, pinned_facts: list[dict] | None = None,
                      expect: list[str] | None = None, max_tokens: int | None = None,
                      keep_recent_tokens: int | None = None, summarizer: str | None = None) -> ContextCheck:
        """Replay `messages` (in `format`), or the existing `session`, through ctxweb's compaction on a scratch
        copy that stores nothing, and report whether every pinned fact (`{"name", "pattern"}` or
        `{"name", "value"}`) and every `expect` literal survived. A check in a test: `assert check.passed`."""
        body = {"messages": messages, "session": session, "format": format, "system": system,
                "pinned_facts": pinned_facts, "expect": expect, "max_tokens": max_tokens,
                "keep_recent_tokens": keep_recent_tokens, "summarizer": summarizer}
        data = self._request("POST", "/context-checks", {k: v for k, v in body.items() if v is not None},
                             retries=self.retries)[1]
        check = _build(ContextCheck, {**data, "facts": []})
        check.facts = [_build(ContextCheckFact, fact) for fact in data.get("facts", [])]
        return check

    # --- checkpoints, events, export -------------------------------------------------------------

    def checkpoints(self, key: str) -> list[Checkpoint]:
        """Newest first."""
        data = self._request("GET", self._key(key) + "/checkpoints", retries=self.retries)[1]
        return [_build(Checkpoint, c) for c in data["items"]]

    def events(self, key: str, type: str = "", after: int = 0, limit: int = 200) -> EventPage:
        """Events in order; `type` is an exact type or a prefix ending with _ (e.g. "COMPACTION_")."""
        data = self._request("GET", self._key(key) + "/events", query={"type": type, "after": after, "limit": limit},
                             retries=self.retries)[1]
        return EventPage([_build(Event, e) for e in data["items"]], data.get("next_after"))

    def export(self, key: str, format: str = "json") -> dict | str:
        """The session as lossless JSON (a dict, re-importable), or JSON Lines / Markdown text."""
        return self._request("GET", self._key(key) + "/export", query={"format": format}, retries=self.retries)[1]
