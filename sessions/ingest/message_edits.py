"""Changing a stored message: only its include_in_messages flag and its attributes.
Everything the model saw stays as it was stored."""

from django.db import transaction
from django.utils import timezone

from sessions.context.figures import refresh_input_tokens
from sessions.errors import DomainError, NotFound
from sessions.ingest.session_store import get_session
from sessions.models import Message, Project
from sessions.store.event_types import AttributesChange, MessageUpdated
from sessions.store.events import record
from sessions.wire.validation import check_json


def update_message(project: Project, key: str, seq: int, data: dict, actor: str = "system") -> Message:
    unknown = set(data) - {"include_in_messages", "attributes"}
    if unknown:
        raise DomainError(f"only include_in_messages and attributes can change, not {', '.join(sorted(unknown))}",
                          code="field_not_allowed")
    include = data.get("include_in_messages")
    attributes = data.get("attributes")
    if include is not None and not isinstance(include, bool):
        raise DomainError("include_in_messages must be true or false", code="invalid_field")
    if attributes is not None:
        if not isinstance(attributes, dict):
            raise DomainError("attributes must be an object", code="invalid_field")
        check_json(attributes, None, "attributes")
    with transaction.atomic():
        session = get_session(project, key, for_update=True)
        try:
            message = session.messages.get(seq=seq)
        except Message.DoesNotExist:
            raise NotFound(f"No message #{seq} in session {key!r}.", code="message_not_found") from None
        changes = {}
        if include is not None and include != message.include_in_messages:
            changes["include_in_messages"] = {"from": message.include_in_messages, "to": include}
            message.include_in_messages = include
        if attributes is not None and attributes != message.attributes:
            changes["attributes"] = AttributesChange.between(message.attributes, attributes)
            message.attributes = attributes
        if not changes:
            return message
        message.save(update_fields=list(changes))
        input_tokens = session.input_tokens
        if "include_in_messages" in changes:
            input_tokens = refresh_input_tokens(session)
            # What the model input holds changed: its tag (model_input.model_input_tag) moves with updated_at.
            session.updated_at = timezone.now()
            session.save(update_fields=["updated_at"])
        record(session, actor, MessageUpdated(
            seq=seq, id=message.client_id, changes=changes, input_tokens=input_tokens, at_seq=session.message_count,
        ))
    return message
