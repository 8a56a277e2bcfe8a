"""Hand-written SQL on the recorded request table, for what recording a captured request reads once a
span (sessions.ingest.recorded_requests): the session's latest request and which of an export's requests
it holds already (the new rows are inserted by rows.insert_all). Each read is a few hundredths of a
millisecond in the database; built through the ORM, each took 0.5 to 0.8 ms in process (a queryset
compiled, an ordering and a deferral resolved). tests/test_recorded_request_sql.py compares them with
the ORM's."""

from django.db import connections, router

from sessions.db.rows import first, select
from sessions.models import RecordedRequest, Session

TABLE = RecordedRequest._meta.db_table

# The request's messages, as sent and as answered, and its parameters: the largest columns, which
# matching does not read (a request's message keys say what it sent), deferred as the ORM's defer() does.
UNREAD = ("messages", "response", "parameters")

LATEST_SQL = f'{select(RecordedRequest, UNREAD)} WHERE "session_id" = %s{{started}} ORDER BY "started_at" DESC, "number" DESC LIMIT 1'


def latest_request(session: Session, started_by=None) -> RecordedRequest | None:
    """The session's latest request (started no later than `started_by`, when given), its messages,
    response and parameters deferred; through the (session, started_at) index."""
    db = connections[router.db_for_write(RecordedRequest)]  # read inside the capture's transaction
    params = [session.pk]
    started = ""
    if started_by is not None:
        started = ' AND "started_at" <= %s'
        params.append(db.ops.adapt_datetimefield_value(started_by))
    return first(RecordedRequest, LATEST_SQL.format(started=started), params, db, UNREAD)


def stored_external_ids(session: Session, external_ids: list[str]) -> set[str]:
    """Which of `external_ids` the session's recorded requests have (its unique (session, external_id) key)."""
    if not external_ids:
        return set()
    with connections[router.db_for_write(RecordedRequest)].cursor() as cursor:
        cursor.execute(f'SELECT "external_id" FROM "{TABLE}" WHERE "session_id" = %s AND "external_id" IN '
                       f'({", ".join(["%s"] * len(external_ids))})', [session.pk, *external_ids])
        return {external_id for (external_id,) in cursor.fetchall()}
