"""Sessions: finding them, creating and updating them."""

import functools
import re

from django.db import IntegrityError, connections, router, transaction
from django.utils import timezone

from sessions.access.masking import mask_value
from sessions.access.masking_policy import capture_masking
from sessions.context.figures import refresh_input_tokens
from sessions.context.pinned import clean_pinned
from sessions.context.pinned_status import refresh_pinned
from sessions.db.rows import first, select
from sessions.errors import Conflict, DomainError, NotFound
from sessions.models import SESSION_KEY_RE, SESSION_KEY_RULE, Project, Role, Session
from sessions.store.event_types import SessionCreated, SessionUpdated
from sessions.store.events import record
from sessions.wire.ctxweb import SessionIn
from sessions.wire.tokens import REPLY_PRIMING, count_message
from sessions.wire.validation import validated

_KEY = re.compile(SESSION_KEY_RE)


def check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise DomainError(SESSION_KEY_RULE, code="invalid_session_key")
    return key


def get_session(project: Project, key: str, *, for_update: bool = False, importing: bool = False) -> Session:
    """The session `key` of `project`. A session that a streamed import is still storing is only handed
    to that import (`importing`); anyone else is told to wait for it."""
    check_key(key)
    db = connections[router.db_for_write(Session) if for_update else router.db_for_read(Session)]
    session = first(Session, session_sql(for_update and db.features.has_select_for_update), [project.pk, key], db)
    if session is None:
        raise NotFound(f"No session {key!r} in this project.", code="session_not_found") from None
    session.project = project
    if session.being_imported and not importing:
        raise Conflict(
            f"Session {key!r} is being imported: it can be read and written once its import has stored "
            "every message (see the dashboard's Import page).", code="session_being_imported",
        )
    return session


@functools.cache
def session_sql(for_update: bool) -> str:
    """The read of one session by project and key, the first statement of nearly every API request,
    written as SQL: building it through the ORM (a queryset, a join to the project the caller already
    holds, `get`'s limit and compiler) took 0.4 ms of CPU against 0.05 ms for this, each column converted
    as the ORM converts it (sessions/db/rows.py). tests/test_hot_path_sql.py compares the two."""
    sql = f'{select(Session)} WHERE "project_id" = %s AND "key" = %s'
    return sql + " FOR UPDATE" if for_update else sql


def check_import_target(session: Session, source: str) -> None:
    """An import never changes a session the application writes to: it may only resume a session that an
    import of the same source file created, and that the application has not written to since."""
    key = session.key
    again = "Import the file with a key prefix to store it as new sessions."
    if not session.import_source:
        raise Conflict(f"Session {key!r} was created by the application, not by an import, so an import "
                       f"never changes it. {again}", code="import_refused")
    if session.import_source != source:
        raise Conflict(f"Session {key!r} was imported from {session.import_source!r}, not from {source!r}; an "
                       f"import only resumes the sessions it created from the same file. {again}",
                       code="import_refused")
    if session.written_by_application:
        raise Conflict(f"Session {key!r} was imported from this file, but the application has written to it "
                       f"since, so an import never changes it again. {again}", code="import_refused")


def get_or_create_locked(project: Project, key: str, actor: str, *, import_source: str | None = None
                         ) -> tuple[Session, bool]:
    """The session, row-locked for the current transaction, created first when missing. An import names
    its source file (`import_source`): a session it creates remembers it, and an existing session must
    be one it may resume (check_import_target)."""
    check_key(key)
    importing = import_source is not None
    try:
        session = get_session(project, key, for_update=True, importing=importing)
    except NotFound:
        pass
    else:
        if importing:
            check_import_target(session, import_source)
        return session, False
    try:
        with transaction.atomic():
            # An empty model input still costs the reply priming.
            session = Session.objects.create(project=project, key=key, input_tokens=REPLY_PRIMING,
                                             import_source=import_source or "")
    except IntegrityError:  # created concurrently
        return get_or_create_locked(project, key, actor, import_source=import_source)
    record(session, actor, SessionCreated(key=key))
    return get_session(project, key, for_update=True, importing=importing), True


def clean_session_fields(data: dict) -> dict:
    """Validate the fields a client may set on a session (the schema SessionIn); returns model field ->
    value for the fields given."""
    given = {name: value for name, value in data.items() if value is not None}
    fields = validated(SessionIn, given).model_dump(exclude_unset=True)
    if "pinned_facts" in fields:
        fields["pinned_facts"] = clean_pinned(fields["pinned_facts"])
    compaction = fields.pop("compaction", None) or {}
    renamed = {"auto": "auto_compact"}
    for name, value in compaction.items():
        fields[renamed.get(name, name)] = "" if name == "summarizer" and value is None else value
    return fields


CAPTURED_FIELDS = ("title", "metadata", "instructions")  # the session fields masked at capture


def update_session(project: Project, key: str, data: dict, actor: str = "system", *,
                   import_source: str | None = None) -> tuple[Session, bool]:
    """Create or update a session (PUT semantics for the fields given). Returns (session, created). An
    import names its source file (see get_or_create_locked); any other change is the application's."""
    if (patterns := capture_masking(project)) is not None:  # the project keeps no personal data
        data = {name: mask_value(value, patterns) if name in CAPTURED_FIELDS else value for name, value in data.items()}
    fields = clean_session_fields(data)
    with transaction.atomic():
        session, created = get_or_create_locked(project, key, actor, import_source=import_source)
        changed = [name for name, value in fields.items() if getattr(session, name) != value]
        if changed and import_source is None and session.import_source and not session.written_by_application:
            fields["written_by_application"] = True
            changed.append("written_by_application")
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
                record(session, actor, SessionUpdated(
                    fields=[c for c in changed if c not in ("instructions_tokens", "written_by_application")]
                ))
    if "pinned_facts" in changed:  # where the new pins stand: the sessions list's "pinned fact lost"
        refresh_pinned(session)
    return session, created
