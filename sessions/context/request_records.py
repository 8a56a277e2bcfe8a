"""A session's recorded requests as the API gives them (GET /sessions/{key}/requests[/{n}]): pages of
their figures, and one request with its messages in any model-input format.

The messages are stored exactly as the application sent them, in OpenAI Chat Completions shape, so the
`openai` format returns them untouched; the other formats read them with the importers' OpenAI parser
(sessions.context.recorded_input.sent_entries) and render them with the code that renders the model input
(sessions.context.provider_input), so a request and the model input look alike in every format.
"""

from sessions.context.model_input import ModelInput
from sessions.context.provider_input import FORMATS, render_model_input
from sessions.context.recorded_input import sent_entries
from sessions.errors import DomainError, NotFound
from sessions.models import RecordedRequest, Session

# What a page of requests reads: not the messages and responses themselves (message_seqs has one item
# per message sent, so it gives their count).
LIST_FIELDS = ("number", "started_at", "ended_at", "source", "model", "provider", "tokens", "usage_input_tokens",
               "usage_output_tokens", "message_seqs", "unmatched", "dropped_seqs", "response_seqs")


def request_page(session: Session, after: int, limit: int) -> tuple[list[RecordedRequest], int | None]:
    """The session's requests numbered after `after`, at most `limit`, and the number to ask after next."""
    page = list(RecordedRequest.objects.filter(session=session, number__gt=after).order_by("number")
                .only(*LIST_FIELDS)[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, page[-1].number if more else None


def get_request(session: Session, number: int) -> RecordedRequest:
    found = RecordedRequest.objects.filter(session=session, number=number).first()
    if found is None:
        raise NotFound(f"No request {number} in session {session.key!r}.", code="request_not_found")
    return found


def render_request(session: Session, recorded: RecordedRequest, fmt: str) -> RecordedRequest:
    """The request, ready for schemas.RecordedRequestOut: its messages rendered in `fmt` (openai: exactly
    as stored) as `rendered_messages`, Anthropic's system text as `rendered_system`."""
    if fmt not in FORMATS:
        raise DomainError(f"format must be one of {', '.join(FORMATS)}", code="invalid_format")
    system = None
    if fmt == "openai":
        messages = recorded.messages
    else:
        rendered = render_model_input(ModelInput(session, None, None, sent_entries(recorded), []), fmt)
        if fmt == "anthropic":
            messages, system = rendered["messages"], rendered.get("system")
        else:
            messages = rendered
    recorded.format, recorded.rendered_system, recorded.rendered_messages = fmt, system, messages
    return recorded
