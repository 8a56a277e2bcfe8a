"""Hand-written SQL on the auth failure table: the count of recent failures per subject that the
brute-force check reads (sessions.access.throttle), and the PostgreSQL advisory lock failures are recorded
under. tests/test_auth_sql.py compares the count with the ORM's."""

from sessions.models import AuthFailure

# PostgreSQL: failures are recorded one at a time, under this transaction-level advisory lock. SQLite
# needs none: its write transactions (BEGIN IMMEDIATE, see settings) already run one at a time.
LOCK_ID = 0x63747877_6562  # "ctxweb"


def recent_counts(connection, pairs, since) -> tuple:
    """The row of how many failures each (scope, subject) of `pairs` has had since `since`, read on
    `connection`: one query, the usual path of every API request, through the (subject, scope,
    -created_at) index. Written as SQL once: the ORM's filtered aggregate took 0.7 ms of CPU in process
    to build against a tenth of that to run. tests/test_auth_sql.py compares it with the ORM's count."""
    created = AuthFailure._meta.get_field("created_at").get_db_prep_value(since, connection)
    counts = ", ".join('COUNT(CASE WHEN "scope" = %s AND "subject" = %s THEN 1 END)' for _ in pairs)
    which = " OR ".join('("scope" = %s AND "subject" = %s)' for _ in pairs)
    flat = [str(value) for pair in pairs for value in pair]
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {counts} FROM "{AuthFailure._meta.db_table}" WHERE ({which}) AND "created_at" > %s',
                       [*flat, *flat, created])
        return cursor.fetchone()


def lock_recording(connection) -> None:
    """Takes the lock under which failures are recorded one at a time, until `connection`'s transaction
    ends: PostgreSQL's transaction-level advisory lock LOCK_ID; nothing on SQLite, which needs none."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_ID])
