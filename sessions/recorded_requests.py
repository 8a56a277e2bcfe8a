"""Sessions rebuilt from recorded requests: what an application sent its model, one request at a time
(OpenTelemetry spans of LLM calls, request-log lines), and what it dropped between two requests.

Every source (sessions.otlp, the request-log importer) turns what it reads into CapturedRequest objects
and hands them to record_requests, which stores each once and rebuilds the session's raw log from the
sequence of requests.
"""

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class CapturedRequest:
    """One request as a source read it, before it is stored."""

    conversation: str  # the session key: session.id / gen_ai.conversation.id, else the trace id, else the file
    external_id: str  # span id (hex), or a digest of the request-log file and line
    source: str  # "otlp" | "request_log"
    started_at: datetime
    messages: list[dict]  # exactly as sent, as OpenAI Chat Completions message objects
    response: list[dict] = field(default_factory=list)  # the response's messages, same shape
    model: str = ""
    provider: str = ""
    parameters: dict = field(default_factory=dict)
    usage_input_tokens: int | None = None
    usage_output_tokens: int | None = None
    trace_id: str = ""
    ended_at: datetime | None = None


@dataclass
class RecordResult:
    stored: int = 0  # requests stored
    duplicates: int = 0  # already stored (a retried export): nothing stored twice
    sessions: list[str] = field(default_factory=list)  # keys of the sessions touched, in order


def record_requests(project, captured: list[CapturedRequest], actor: str = "system") -> RecordResult:
    """Store `captured` (any sessions, any order) and rebuild each touched session. Raises DomainError
    (4xx) for a request whose messages are not valid OpenAI messages; nothing of its session is stored."""
    raise NotImplementedError("record_requests lands on main shortly")
