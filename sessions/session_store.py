"""Sessions: finding them, creating and updating them."""

import re

from django.db import IntegrityError, transaction
from django.utils import timezone

from .errors import DomainError, NotFound
from .event_types import SessionCreated, SessionUpdated
from .events import record
from .model_input import refresh_input_tokens
from .models import SESSION_KEY_RE, SESSION_KEY_RULE, Project, Role, Session
from .schemas import SessionIn
from .tokens import REPLY_PRIMING, count_message
from .validation import validated

_KEY = re.compile(SESSION_KEY_RE)


def check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise DomainError(SESSION_KEY_RULE, code="invalid_session_key")
    return key


def get_session(project: Project, key: str, *, for_update: bool = False) -> Session:
    check_key(key)
    qs = Session.objects.select_related("project")
    if for_update:
        qs = qs.select_for_update(of=("self",))
    try:
        return qs.get(project=project, key=key)
    except Session.DoesNotExist:
        raise NotFound(f"No session {key!r} in this project.", code="session_not_found") from None


def get_or_create_locked(project: Project, key: str, actor: str) -> tuple[Session, bool]:
    """The session, row-locked for the current transaction, created first when missing."""
    check_key(key)
    try:
        return get_session(project, key, for_update=True), False
    except NotFound:
        pass
    try:
        with transaction.atomic():
            # An empty model input still costs the reply priming.
            session = Session.objects.create(project=project, key=key, input_tokens=REPLY_PRIMING)
    except IntegrityError:  # created concurrently
        return get_session(project, key, for_update=True), False
    record(session, actor, SessionCreated(key=key))
    return get_session(project, key, for_update=True), True


def clean_session_fields(data: dict) -> dict:
    """Validate the fields a client may set on a session (the schema SessionIn); returns model field ->
    value for the fields given."""
    given = {name: value for name, value in data.items() if value is not None}
    fields = validated(SessionIn, given).model_dump(exclude_unset=True)
    compaction = fields.pop("compaction", None) or {}
    renamed = {"auto": "auto_compact"}
    for name, value in compaction.items():
        fields[renamed.get(name, name)] = "" if name == "summarizer" and value is None else value
    return fields


def update_session(project: Project, key: str, data: dict, actor: str = "system") -> tuple[Session, bool]:
    """Create or update a session (PUT semantics for the fields given). Returns (session, created)."""
    fields = clean_session_fields(data)
    with transaction.atomic():
        session, created = get_or_create_locked(project, key, actor)
        changed = [name for name, value in fields.items() if getattr(session, name) != value]
        for name in changed:
            setattr(session, name, fields[name])
        if "instructions" in changed:
            session.instructions_tokens = (
                count_message(Role.SYSTEM, session.instructions).total if session.instructions else 0
            )
            changed.append("instructions_tokens")
        if changed:
            session.updated_at = timezone.now()
            session.save(update_fields=[*changed, "updated_at"])
            if "instructions" in changed:
                refresh_input_tokens(session)
            if not created:
                record(session, actor, SessionUpdated(fields=[c for c in changed if c != "instructions_tokens"]))
    return session, created
