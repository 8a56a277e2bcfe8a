"""Hand-written SQL on the message table (and the session row a read checks against): the reads and
writes every append and every model-input fetch make. Each statement says why it is SQL rather than the
ORM's, with what was measured; tests/test_hot_path_sql.py, tests/test_query_plans.py and
tests/test_model_input_from_values.py compare them with the ORM's rows. The callers keep the logic: these
functions run one statement (or one batch of them) and hand back rows."""

import operator
import sqlite3
import time

from django.db import connection, connections, models, router
from django.db.models import Func, IntegerField

from sessions.models import MODEL_FIELDS, Message, Role, Session

# --- the visible messages of a model input -------------------------------------------------------------

# visible_messages' conditions written as SQL, for the two reads below that every model input and every
# append make: parameters session id, the seq after which to read, Role.SYSTEM.
VISIBLE_SQL = (f'FROM "{Message._meta.db_table}" WHERE "session_id" = %s AND "seq" > %s AND "include_in_messages" '
               'AND "role" <> %s')


# The content of each message: whether it is a string sent as its own text, and that text or the JSON
# text of any other value. SQLite stores the JSON text itself. On PostgreSQL (jsonb) writing every value
# out as JSON text was most of the read (2.4 of 2.9 ms for 727 messages); a string's own text (#>> '{}')
# costs half as much and needs no decoding.
CONTENT_SQL = {"postgresql": 'jsonb_typeof("content") = \'string\', "content" #>> \'{}\''}


CONTENT_AS_JSON_SQL = 'NULL, CAST("content" AS text)'


# On SQLite, for StoredText: whether the JSON text is a string (but the empty one), and the text.
CONTENT_AS_STORED_SQL = 'substr("content", 1, 1) = \'"\' AND "content" <> \'""\', CAST("content" AS text)'


def model_field_columns() -> str:
    """The columns of MODEL_FIELDS, in their order, booleans as 0 and 1."""
    return ", ".join(f'CAST("{name}" AS integer)' if isinstance(default, bool) else f'"{name}"'
                     for name, default in MODEL_FIELDS.items())


def stored_messages_sql(vendor: str, text_as_stored: bool = False) -> str:
    """The read of every model input: StoredMessage's columns (MODEL_FIELDS among them), the content as
    above, the other JSON columns as their text and the booleans as 0 and 1 (so SQLite's driver calls no
    converter per value). Written as SQL: building it through the ORM (and converting each row's booleans) was a fifth
    of a 240-message input's build; tests/test_model_input_from_values.py compares every response byte for
    byte with the input built from Message instances."""
    return (
        f'SELECT "seq", "role", {content_sql(vendor, text_as_stored)}, "tokens", "client_id", '
        'CAST("tool_calls" AS text), CAST("tool_call_tokens" AS text), "tool_call_id", "call_seq", '
        f'{model_field_columns()}, CAST("has_content" AS integer) {VISIBLE_SQL}'
    )


def content_sql(vendor: str, text_as_stored: bool) -> str:
    """The two columns of a stored message's content (see CONTENT_SQL)."""
    if vendor == "sqlite" and text_as_stored:
        return CONTENT_AS_STORED_SQL
    return CONTENT_SQL.get(vendor, CONTENT_AS_JSON_SQL)


RECENT_ROWS = 16


# The read of every append's stored figures: the last RECENT_ROWS visible rows before the new ones, newest
# first, through the (session, seq) index (_Row's columns). Written as SQL because building it through the
# ORM (related manager, filters, annotations, slice, compiler) took 0.68 ms of CPU against 0.04 ms to run
# it; tests/test_hot_path_sql.py compares it with the ORM's rows.
RECENT_ROWS_SQL = (
    'SELECT "seq", "role", "tokens", CAST("call_ids" AS text), CAST("tool_call_tokens" AS text), "tool_call_id", '
    f'"call_seq", "has_content" {VISIBLE_SQL} AND "seq" < %s ORDER BY "seq" DESC LIMIT {RECENT_ROWS}'
)


def stored_message_rows(session: Session, after_seq: int, as_of: int | None, text_as_stored: bool) -> tuple[str, list]:
    """The rows of stored_messages_sql for the visible messages after `after_seq` (up to `as_of`), in seq
    order, read where the checkpoint and session are read; and that database's vendor."""
    up_to = "" if as_of is None else ' AND "seq" <= %s'
    db = connections[router.db_for_read(Message, instance=session)]
    with db.cursor() as cursor:
        cursor.execute(f'{stored_messages_sql(db.vendor, text_as_stored)}{up_to} ORDER BY "seq"',
                       [session.pk, after_seq, Role.SYSTEM, *([] if as_of is None else [as_of])])
        return db.vendor, cursor.fetchall()


def recent_visible_row_values(session: Session, before_seq: int) -> list[tuple]:
    """The last RECENT_ROWS visible messages before `before_seq` (after the checkpoint), newest first."""
    with connection.cursor() as cursor:
        cursor.execute(RECENT_ROWS_SQL, [session.pk, session.checkpoint_last_seq, Role.SYSTEM, before_seq])
        return cursor.fetchall()


# --- the `openai` input from the stored renderings ------------------------------------------------------

# The stored renderings of the visible messages after the checkpoint, in seq order, and whether the session
# row is still as the request read it (UNCHANGED_SQL): the figures the response is written from come from
# that row, and one statement reads from one state of the database, so the two agree. Parameters:
# UNCHANGED_SQL's, VISIBLE_SQL's, then the seqs to skip.
#
# On SQLite the renderings are joined by commas in the database, with how many messages there are and
# how many have a rendering (a NULL is not joined): joining 700 renderings in Python took longer than
# reading them (a 766-message input: read 0.31 ms, joined 0.40; joined in the read, 0.16 in all). SQLite
# 3.40 takes no ORDER BY in an aggregate: the rows come in order from a subquery, which SQLite does not
# flatten into an aggregate that it feeds (its flattening rule 16). The text comes as bytes, as the
# response is written. On PostgreSQL the rows are read and joined here: string_agg, ordered or fed by an
# ordered subquery, took 1.9-2.5 ms for 726 messages where reading the rows and joining them took 1.1-1.5.
UNCHANGED_SQL = (f'(SELECT count(*) FROM "{Session._meta.db_table}" WHERE "id" = %s AND "message_count" = %s '
                 'AND "checkpoint_count" = %s AND "updated_at" = %s)')


STORED_OPENAI_SQL = {
    "sqlite": f'SELECT {UNCHANGED_SQL}, count(*), count("openai_message"), '
              'CAST(group_concat("openai_message", \',\') AS BLOB) '
              f'FROM (SELECT "openai_message" {VISIBLE_SQL}{{skip}} ORDER BY "seq")',
    "postgresql": f'SELECT {UNCHANGED_SQL}, "openai_message" {VISIBLE_SQL}{{skip}} ORDER BY "seq"',
}


def stored_renderings(db, session: Session, after_seq: int, skipped: list[int]) -> tuple[int, bytes] | None:
    """How many stored messages the input sends, and their renderings joined by commas. None when one of
    them has no rendering, or the session changed since it was read (an append, a checkpoint, a flag, its
    instructions or settings: each moves one of UNCHANGED_SQL's columns)."""
    skip = f' AND "seq" NOT IN ({", ".join(["%s"] * len(skipped))})' if skipped else ""
    as_read = [session.pk, session.message_count, session.checkpoint_count,
               db.ops.adapt_datetimefield_value(session.updated_at)]
    with db.cursor() as cursor:
        cursor.execute(STORED_OPENAI_SQL[db.vendor].format(skip=skip),
                       [*as_read, session.pk, after_seq, Role.SYSTEM, *skipped])
        if db.vendor == "sqlite":
            unchanged, count, rendered, joined = cursor.fetchone()
            return (count, joined or b"") if unchanged and rendered == count else None
        rows = cursor.fetchall()
        if not rows:  # no message to send: whether the session changed is asked on its own
            cursor.execute(f"SELECT {UNCHANGED_SQL}", as_read)
            return (0, b"") if cursor.fetchone()[0] else None
    if not rows[0][0]:
        return None
    renderings = [text for _, text in rows]
    if None in renderings:
        return None
    return len(renderings), ",".join(renderings).encode()


# --- appends ----------------------------------------------------------------------------------------------

# The duplicate-id check of every append that sends ids, written as SQL: building it through the ORM cost
# several times running it (tests/test_hot_path_sql.py compares the two). No ORDER BY: with the
# model's (session, seq) ordering SQLite walked the whole session's seq index instead of probing the unique
# (session, client_id) index, so appends slowed as sessions grew (tests/test_query_plans.py).
STORED_WITH_IDS_SQL = (
    f'SELECT "client_id", "seq", "digest", "tokens" FROM "{Message._meta.db_table}" '
    'WHERE "session_id" = %s AND "client_id" IN ({})'
)


def stored_with_ids(session: Session, client_ids: list[str]) -> dict[str, dict]:
    """client id -> {seq, digest, tokens} of the session's stored messages that have one of these ids."""
    with connection.cursor() as cursor:
        cursor.execute(STORED_WITH_IDS_SQL.format(", ".join(["%s"] * len(client_ids))), [session.pk, *client_ids])
        return {client_id: {"seq": seq, "digest": digest, "tokens": tokens}
                for client_id, seq, digest, tokens in cursor.fetchall()}


# The digests and token counts of raw messages by seq, which matching a recorded request to the raw log
# reads (sessions.ingest.recorded_requests): through the ORM (a queryset built and compiled each time) it
# took 0.6 ms in process against a few hundredths in the database, twice a span.
DIGESTS_SQL = f'SELECT "seq", "digest", "tokens" FROM "{Message._meta.db_table}" WHERE "session_id" = %s AND "seq" {{}}'


def digests_of(session: Session, seqs: list[int]) -> list[tuple[int, str, int]]:
    """(seq, digest, tokens) of the session's raw messages with these seqs."""
    if not seqs:
        return []
    with connection.cursor() as cursor:
        cursor.execute(DIGESTS_SQL.format(f'IN ({", ".join(["%s"] * len(seqs))})'), [session.pk, *seqs])
        return cursor.fetchall()


def digests_between(session: Session, after: int, through: int) -> list[tuple[int, str, int]]:
    """(seq, digest, tokens) of the session's raw messages after seq `after` through seq `through`, in order."""
    with connection.cursor() as cursor:
        cursor.execute(DIGESTS_SQL.format('> %s AND "seq" <= %s ORDER BY "seq"'), [session.pk, after, through])
        return cursor.fetchall()


# The reads of the assistant messages before a batch, newest first, through the (session, role, seq) index:
# the first few, then (rarely: a result answers a call further back) CALL_SCAN_CHUNK at a time. Written
# as SQL, the call ids read as JSON text and only a non-empty list decoded: through the ORM (a queryset,
# and Django's JSON decoding of every row) the read of a result's call took 0.56 ms in process against
# STORED_CALLS_SQL's 0.03 (tests/test_hot_path_sql.py compares the two).
CALL_SCAN_FIRST = 16


CALL_SCAN_CHUNK = 200


STORED_CALLS_SQL = (
    f'SELECT "seq", CAST("call_ids" AS text) FROM "{Message._meta.db_table}" '
    'WHERE "session_id" = %s AND "role" = %s AND "seq" < %s ORDER BY "seq" DESC LIMIT %s'
)


def insert_messages(session: Session, rows: list) -> None:
    """Insert validated messages: with COPY on PostgreSQL, with an INSERT of a few hundred rows a
    statement on SQLite. The hot path of every append: the values are
    already checked and normalised, so they go to the database adapter as they are (JSON and dates
    adapted by the backend's own operations), without building a model instance per message. The
    columns are the model's; each is read from the NewMessage attribute of the same name."""
    ops = connection.ops
    empty = {list: ops.adapt_json_value([], None), dict: ops.adapt_json_value({}, None)}

    def adapt_json(value):
        # Most messages have no tool calls and no attributes: adapt those empty values once.
        if not value and type(value) in empty:
            return empty[type(value)]
        return ops.adapt_json_value(value, None)

    columns = [f for f in Message._meta.concrete_fields if not f.primary_key]
    readers = []
    for column in columns:
        if column.attname == "session_id":
            readers.append(lambda m: session.pk)
        elif isinstance(column, models.JSONField):
            readers.append(lambda m, name=column.attname: adapt_json(getattr(m, name)))
        elif isinstance(column, models.DateTimeField):
            readers.append(lambda m, name=column.attname: ops.adapt_datetimefield_value(getattr(m, name)))
        else:
            readers.append(operator.attrgetter(column.attname))
    table = ops.quote_name(Message._meta.db_table)
    names = ", ".join(ops.quote_name(c.column) for c in columns)
    if connection.vendor == "postgresql":
        # COPY, PostgreSQL's bulk load, with the same adapted values: 500 messages took 48-52 ms in
        # process against 127-184 ms as multi-row INSERTs, four messages 0.6-0.7 ms against 1.0 ms.
        # Django's cursor has no copy(): the statement goes through psycopg's own cursor, and is logged
        # as Django logs the others (connection.queries, assertNumQueries) when queries are logged.
        sql = f"COPY {table} ({names}) FROM STDIN"
        started = time.monotonic()
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            for m in rows:
                copy.write_row([read(m) for read in readers])
        if connection.queries_logged:
            connection.queries_log.append({"sql": f"{sql} -- {len(rows)} rows",
                                           "time": f"{time.monotonic() - started:.3f}"})
        return
    params = [value for m in rows for value in (read(m) for read in readers)]
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    # Many rows per statement rather than executemany's one statement per row: on SQLite each statement
    # is a savepoint, at which the full-text index (an FTS5 table kept by a trigger, migration 0003)
    # writes out what it holds, so row by row it wrote a segment per message and merged them again: two
    # thirds of the insert's time.
    per_statement = max(1, max_query_params() // len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            count = min(per_statement, len(rows) - start)
            values = params[start * len(columns):(start + count) * len(columns)]
            cursor.execute(f"INSERT INTO {table} ({names}) VALUES {', '.join([row] * count)}", values)


def max_query_params() -> int:
    """How many parameters one statement may hold on this connection."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        return connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return connection.features.max_query_params or 65_535


def assistant_call_ids_before(session: Session, before_seq: int, limit: int) -> list[tuple[int, str]]:
    """(seq, call ids as JSON text) of the `limit` newest assistant messages before `before_seq`."""
    with connection.cursor() as cursor:
        cursor.execute(STORED_CALLS_SQL, [session.pk, Role.ASSISTANT, before_seq, limit])
        return cursor.fetchall()


# --- sizes a compaction run reads -------------------------------------------------------------------------

class StoredBytes(Func):
    """A column's stored size in bytes, computed by the database (the content never leaves it)."""

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra)
