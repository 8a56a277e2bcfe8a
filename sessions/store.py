"""Sessions: finding them, creating and updating them (SPEC §1, §5.1)."""

import re

from django.db import IntegrityError, transaction
from django.utils import timezone

from .errors import DomainError, NotFound
from .event_types import SessionCreated, SessionUpdated
from .events import record
from .model_input import refresh_input_tokens
from .models import SESSION_KEY_RE, Project, Role, Session
from .summarizers import SUMMARIZERS
from .tokens import REPLY_PRIMING, count_message
from .validation import check_json, check_text

_KEY = re.compile(SESSION_KEY_RE)


def check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise DomainError(
            "A session key is 1-200 characters of A-Z a-z 0-9 . _ : @ -", code="invalid_session_key"
        )
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


def _positive_int(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 100_000_000:
        raise DomainError(f"{name} must be a whole number between 1 and 100000000", code="invalid_settings")
    return value


def clean_session_fields(data: dict) -> dict:
    """Validate the fields a client may set on a session; returns model field -> value."""
    fields = {}
    if "title" in data and data["title"] is not None:
        title = data["title"]
        if not isinstance(title, str) or len(title) > 300:
            raise DomainError("title must be a string of at most 300 characters", code="invalid_field")
        check_text(title, None, "title")
        fields["title"] = title
    if "metadata" in data and data["metadata"] is not None:
        if not isinstance(data["metadata"], dict):
            raise DomainError("metadata must be an object", code="invalid_field")
        check_json(data["metadata"], None, "metadata")
        fields["metadata"] = data["metadata"]
    if "instructions" in data and data["instructions"] is not None:
        if not isinstance(data["instructions"], str):
            raise DomainError("instructions must be a string", code="invalid_field")
        check_text(data["instructions"], None, "instructions")
        fields["instructions"] = data["instructions"]
    compaction = data.get("compaction")
    if compaction is not None:
        if not isinstance(compaction, dict):
            raise DomainError("compaction must be an object", code="invalid_settings")
        unknown = set(compaction) - {"max_tokens", "keep_recent_tokens", "auto", "summarizer"}
        if unknown:
            raise DomainError(f"unknown compaction setting(s): {', '.join(sorted(unknown))}", code="invalid_settings")
        if "max_tokens" in compaction:
            fields["max_tokens"] = _positive_int(compaction["max_tokens"], "max_tokens")
        if "keep_recent_tokens" in compaction:
            fields["keep_recent_tokens"] = _positive_int(compaction["keep_recent_tokens"], "keep_recent_tokens")
        if "auto" in compaction:
            if compaction["auto"] is not None and not isinstance(compaction["auto"], bool):
                raise DomainError("auto must be true, false or null", code="invalid_settings")
            fields["auto_compact"] = compaction["auto"]
        if "summarizer" in compaction:
            name = compaction["summarizer"] or ""
            if name and name not in SUMMARIZERS:
                raise DomainError(
                    f"summarizer must be one of {', '.join(SUMMARIZERS)}", code="invalid_settings"
                )
            fields["summarizer"] = name
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
