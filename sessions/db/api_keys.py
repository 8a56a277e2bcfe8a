"""Hand-written SQL on the api key table: the read every API request authenticates with (the keys of a
secret's prefix, with their project and the failed attempts of its subjects; sessions.access.api_keys),
the UPDATE that admits a request under the key's rate limits, and SQLite's synchronous pragma that UPDATE
commits under (sessions.access.rate_limits). tests/test_auth_sql.py and tests/api/test_rate_limits.py
compare them with the ORM's."""

import functools

from django.db import connections, router

from sessions.db.rows import columns
from sessions.models import ApiKey, AuthFailure, Project

# Prefixes carry 48 random bits, so sharing one is rare; the cap only bounds a pathological case.
MAX_CANDIDATES = 20


@functools.cache
def keys_with_prefix_sql(subjects: int) -> str:
    """The SELECT of `keys_with_prefix_rows`, counting the failures of `subjects` (scope, subject) pairs."""
    failures = [f'(SELECT COUNT(*) FROM "{AuthFailure._meta.db_table}" WHERE "scope" = %s AND "subject" = %s '
                'AND "created_at" > %s)'] * subjects
    selected = ", ".join([*failures, columns(ApiKey, "k"), columns(Project, "p")])
    # From a one-row table, so that the failures are counted when no key has the prefix too.
    return (f'SELECT {selected} FROM (SELECT 1 AS "one") AS "one" '
            f'LEFT JOIN "{ApiKey._meta.db_table}" k ON k."prefix" = %s '
            f'LEFT JOIN "{Project._meta.db_table}" p ON p."id" = k."project_id" '
            f'ORDER BY k."id" LIMIT {MAX_CANDIDATES}')


def keys_with_prefix_rows(prefix: str, subjects=(), since=None) -> tuple[list[tuple], object]:
    """The rows of the keys whose secret starts with `prefix`, and the database connection that read
    them: in each, how many failed attempts each (scope, subject) of `subjects` has had since `since`,
    then the key's concrete columns, then its project's; one row of None columns after the counts when
    no key has the prefix. One query written as SQL: every API request runs it. Building the ORM's
    select_related query took 0.5 ms of CPU in process, most of what was left of a key's authentication,
    and the failures were a query of their own. tests/test_auth_sql.py compares both with the ORM's."""
    db = connections[router.db_for_read(ApiKey)]
    created = AuthFailure._meta.get_field("created_at").get_db_prep_value(since, db) if subjects else None
    params = [value for scope, subject in subjects for value in (str(scope), subject, created)]
    with db.cursor() as cursor:
        cursor.execute(keys_with_prefix_sql(len(subjects)), [*params, prefix])
        return cursor.fetchall(), db


# PostgreSQL: synchronous_commit off for the transaction of the one statement that admits a request (in
# autocommit, the statement is its transaction), set by the statement itself: one round trip, where
# BEGIN, SET LOCAL, the UPDATE and COMMIT were four. The WHERE clause reads the setting, so it is set
# before the row is.
UNFLUSHED_PREFIX = "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true) AS setting) "
UNFLUSHED_CONDITION = " AND (SELECT setting FROM unflushed) = 'off'"


@functools.cache
def admission_sql(vendor: str, limited: tuple[str, ...], unflushed: bool = False) -> str:
    """The UPDATE that admits a request, for the buckets named in `limited` (their fields): each bucket's
    refill moment moves on by the request's cost, the dashboard's figures count it (started anew when the
    window is more than a minute old), and last_used_at is set; the row is updated only when every bucket
    had room, full again no later than a minute from now. Every API request runs it: written as SQL once
    rather than built per request from ORM expressions, which took 1.4 ms of CPU in process on SQLite,
    most of a key's authentication. tests/api/test_rate_limits.py compares it with the ORM's UPDATE."""
    greatest = "GREATEST" if vendor == "postgresql" else "MAX"
    refills = [f'"{field}" = {greatest}("{field}", %s) + %s' for field in limited]
    stale = '"usage_since" <= %s'
    window = [f'"usage_since" = CASE WHEN {stale} THEN %s ELSE "usage_since" END',
              f'"usage_requests" = CASE WHEN {stale} THEN 1 ELSE "usage_requests" + 1 END',
              f'"usage_bytes" = CASE WHEN {stale} THEN %s ELSE "usage_bytes" + %s END',
              f'"usage_throttled" = CASE WHEN {stale} THEN 0 ELSE "usage_throttled" END']
    room = "".join(f' AND {greatest}("{field}", %s) <= %s' for field in limited)
    # The requests bucket's new refill moment comes back with the answer: the RateLimit-* headers.
    returning = ' RETURNING "requests_refilled_at"' if "requests_refilled_at" in limited else ""
    update = (f'UPDATE "{ApiKey._meta.db_table}" SET {", ".join([*refills, *window])}, "last_used_at" = %s '
              f'WHERE "id" = %s{room}')
    return (UNFLUSHED_PREFIX + update + UNFLUSHED_CONDITION if unflushed else update) + returning


def admit(connection, limited: tuple[str, ...], params: list) -> tuple[bool, float | None]:
    """Runs `admission_sql` for the buckets `limited` on `connection` with `params` (in the statement's
    order), unflushed on PostgreSQL when it is its own transaction (autocommit): whether it updated the row
    (the request was admitted; not when it was refused, or the key is gone), and then the requests
    bucket's new refill moment (None when that bucket is not limited)."""
    with connection.cursor() as cursor:
        unflushed = connection.vendor == "postgresql" and not connection.in_atomic_block
        cursor.execute(admission_sql(connection.vendor, limited, unflushed), params)
        if "requests_refilled_at" not in limited:
            return cursor.rowcount > 0, None
        row = cursor.fetchone()
        return row is not None, (row[0] if row else None)


SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")


def synchronous(database) -> int:
    """SQLite's synchronous level of the driver's connection `database` (a sqlite3 connection), read on
    the driver's connection: not a query of the request (sessions.access.rate_limits.unflushed)."""
    return database.execute("PRAGMA synchronous").fetchone()[0]


def set_synchronous(database, level: int | str) -> None:
    """Sets SQLite's synchronous level of the driver's connection `database` to `level` (a level's number,
    or its name: "NORMAL"), on the driver's connection: not a query of the request."""
    if not isinstance(level, int) and level not in SYNCHRONOUS_LEVELS:
        raise ValueError(f"not a synchronous level: {level!r}")
    database.execute(f"PRAGMA synchronous={level}")
