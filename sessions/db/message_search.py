"""Hand-written SQL of the message search index: the statements that read the full-text index of message
text that migration 0003 built (and 0007 put back on SQLite): on PostgreSQL the stored, GIN-indexed
tsvector column search_vector of ctx_sessions_message, queried with websearch_to_tsquery (and
phraseto_tsquery for the exact phrase); on SQLite the FTS5 table ctx_message_fts, queried with MATCH and
ranked by bm25; on other databases, which have neither, a LIKE of every term. sessions/store/search.py
builds the terms, highlights the hits and reads the messages through the ORM; this module only ranks
the message ids and lists the sessions that hold a match."""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL


@dataclass(frozen=True)
class TextQuery:
    """What a search looks for, as the index reads it (sessions/store/search.py makes it from what was
    typed): the spaced words, and the runs of unspaced scripts as phrases of their pairs of characters
    (Message.search_grams holds the text's)."""

    words_query: str  # the spaced part as typed: websearch syntax on PostgreSQL ("quotes", -not, or)
    words: list[str]  # its words, lowercased
    runs: list[str]  # the runs of unspaced scripts, as typed ("最新の")
    grams: list[str]  # each run as the phrase of its pairs ("最新 新の"), or its one character
    phrase: str  # the whole query, spaces collapsed: messages holding it exactly rank first

    @property
    def empty(self) -> bool:
        return not self.words and not self.grams


def like_pattern(value: str) -> str:
    """A LIKE pattern (escape character backslash) that finds `value` anywhere in a text."""
    return "%" + value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _filters_sql(project_ids: list[int], role: str | None = None, since: datetime | None = None,
                 until: datetime | None = None, has_checkpoint: bool = False) -> tuple[str, list]:
    placeholders = ", ".join(["%s"] * len(project_ids))
    sql = [f"s.project_id IN ({placeholders})", "NOT s.being_imported"]
    params: list = list(project_ids)
    if role:
        sql.append("m.role = %s")
        params.append(role)
    if since:
        sql.append("m.created_at >= %s")
        params.append(since)
    if until:
        sql.append("m.created_at <= %s")
        params.append(until)
    if has_checkpoint:
        sql.append("s.checkpoint_count > 0")
    return " AND ".join(sql), params


def _fts5_string(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _tsquery(text: TextQuery) -> tuple[str, list]:
    """PostgreSQL: the tsquery of `text`, and its parameters."""
    parts = (["websearch_to_tsquery('english', %s)"] if text.words else []) + \
        ["phraseto_tsquery('english', %s)"] * len(text.grams)
    return f"({' && '.join(parts)})", ([text.words_query] if text.words else []) + text.grams


def _match(text: TextQuery) -> tuple[str, str, str, list]:
    """(FROM clause, text-match condition, rank expression, params) for this database."""
    vendor = connection.vendor
    if vendor == "postgresql":
        # search_vector is a stored, GIN-indexed column of the text and its search grams (migrations 0003
        # and 0025); a phrase of pairs matches where the run occurs in the text.
        # A one-row subquery the planner pulls up, so the condition is on a constant and the index is read.
        query, params = _tsquery(text)
        return (
            f"ctx_sessions_message m JOIN ctx_sessions_session s ON s.id = m.session_id, (SELECT {query} AS query) q",
            "m.search_vector @@ q.query",
            "ts_rank_cd(m.search_vector, q.query) DESC",
            params,
        )
    if vendor == "sqlite":
        # Words by prefix; an unspaced run as the phrase of its pairs, found in the search_grams column
        # (one character: any pair it begins).
        match = " ".join([_fts5_string(t) + "*" for t in text.words]
                         + [_fts5_string(g) + ("*" if len(g) == 1 else "") for g in text.grams])
        return (
            "ctx_message_fts f JOIN ctx_sessions_message m ON m.id = f.rowid "
            "JOIN ctx_sessions_session s ON s.id = m.session_id",
            "ctx_message_fts MATCH %s",
            "bm25(ctx_message_fts)",
            [match],
        )
    # No full-text index: every term must appear.
    terms = text.words + text.runs
    return (
        "ctx_sessions_message m JOIN ctx_sessions_session s ON s.id = m.session_id",
        " AND ".join(["LOWER(m.text) LIKE %s"] * len(terms)),
        "m.session_id",
        [like_pattern(t) for t in terms],
    )


# A search ranks at most this many matching messages, the newest: a word in a quarter of 10,000,000
# messages took seconds to rank whole, and its newest 2,000 are read from the end of the index in
# milliseconds (docs/performance.md, "A project of 100,000 sessions"). sessions/store/search.py says when
# more match.
RANKED_AT_MOST = 2000


def _newest_first() -> str:
    """The newest matching messages first: by the message's id, which on SQLite is the full-text table's
    rowid (FTS5 returns its matches in rowid order, either way, without sorting them)."""
    return "f.rowid DESC" if connection.vendor == "sqlite" else "m.id DESC"


def ranked_message_ids(text: TextQuery, limit: int, offset: int = 0, *, project_ids: list[int],
                       role: str | None = None, since: datetime | None = None, until: datetime | None = None,
                       has_checkpoint: bool = False) -> list[tuple[int, bool]]:
    """(id, exact) of the messages `text` finds in the projects `project_ids` (of the role `role`,
    written between `since` and `until`, in sessions with a checkpoint when `has_checkpoint`), best
    first: those that hold the exact phrase, then by rank, equal ranks in session then seq order;
    `limit` of them after skipping `offset`. Of the newest RANKED_AT_MOST matches only."""
    where, params = _filters_sql(project_ids, role, since, until, has_checkpoint)
    source, condition, rank, match_params = _match(text)
    if connection.vendor == "postgresql" and not text.grams:
        exact, phrase_param = "m.search_vector @@ phraseto_tsquery('english', %s)", text.phrase
    elif connection.vendor == "postgresql":  # only the matched rows' text is read for it
        exact, phrase_param = "strpos(m.text, %s) > 0", text.phrase
    else:
        exact, phrase_param = "m.text LIKE %s ESCAPE '\\'", like_pattern(text.phrase)
    # The newest matches by id (the primary key's order, backwards: PostgreSQL stops once it has them
    # where a word is common, and reads the full-text index where it is rare), ranked among themselves.
    if connection.vendor == "postgresql":
        # The newest matches are chosen first, then only they are ranked, each read again by its key (q
        # carries the tsquery out): ranked in the pass that found them, every match's rank and exact
        # phrase were computed (a phrase in each of 100,000 sessions: 100,000 tsvectors read twice more),
        # 250-260 ms against 170-180 ms; two common words 160-180 against 117-120 ms, a rare word 41-48
        # against 20 ms (docs/performance.md, "A project of 100,000 sessions").
        sql = f"""
            SELECT m.id, ({exact}) AS exact FROM (
                SELECT m.id, m.session_id, q.query
                FROM {source}
                WHERE {condition} AND {where}
                ORDER BY m.id DESC
                LIMIT %s
            ) AS q
            JOIN ctx_sessions_message m ON m.id = q.id AND m.session_id = q.session_id
            ORDER BY exact DESC, {rank}, m.session_id, m.seq
            LIMIT %s OFFSET %s"""
        with connection.cursor() as cursor:
            # Parameters in the order they appear: select list, the newest matches, LIMIT, OFFSET.
            cursor.execute(sql, [phrase_param, *match_params, *params, RANKED_AT_MOST, limit, offset])
            return [(row[0], bool(row[1])) for row in cursor.fetchall()]
    sql = f"""
        SELECT id, exact FROM (
            SELECT m.id, m.session_id, m.seq, ({exact}) AS exact, {rank.removesuffix(" DESC")} AS rank
            FROM {source}
            WHERE {condition} AND {where}
            ORDER BY {_newest_first()}
            LIMIT %s
        ) AS newest
        ORDER BY exact DESC, rank{" DESC" if rank.endswith(" DESC") else ""}, session_id, seq
        LIMIT %s OFFSET %s"""
    with connection.cursor() as cursor:
        # Parameters in the order they appear: select list, FROM (PostgreSQL), WHERE, LIMIT, OFFSET.
        cursor.execute(sql, [phrase_param, *match_params, *params, RANKED_AT_MOST, limit, offset])
        return [(row[0], bool(row[1])) for row in cursor.fetchall()]


def newest_matching_sessions(text: TextQuery, at_most: int) -> tuple[set[int], bool]:
    """PostgreSQL: the sessions of the newest `at_most` messages that `text` finds, of any project (the
    sessions list that asks keeps its own projects' sessions: another project's matches only make a word
    count as common sooner), and whether those were all the messages it finds. Without the join to the
    sessions, a rare word's few matches are read from the full-text index alone: joined, the planner
    (which cannot know a word is rare) hashed all 100,000 sessions of a project first, 270 ms."""
    query, params = _tsquery(text)
    sql = f"SELECT m.session_id FROM ctx_sessions_message m WHERE m.search_vector @@ {query} ORDER BY m.id DESC LIMIT %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, at_most])
        rows = cursor.fetchall()
    return {row[0] for row in rows}, len(rows) < at_most


def session_has_text(text: TextQuery) -> RawSQL:
    """PostgreSQL: whether the outer query's session has a message that `text` finds, asked of that
    session's messages alone (through their session index): the sessions list asks it in its own order
    and stops once its page is full, where a common word would make the whole index be read."""
    query, params = _tsquery(text)
    return RawSQL(
        'EXISTS (SELECT 1 FROM ctx_sessions_message m WHERE m.session_id = "ctx_sessions_session"."id" '
        f"AND m.search_vector @@ {query})", params, output_field=BooleanField())


def sessions_with_text(text: TextQuery, project_ids: list[int]) -> RawSQL:
    """A subquery of the ids of the sessions of the projects `project_ids` (none being imported) with at
    least one message that `text` (not empty) finds, through the full-text index."""
    source, condition, _, match_params = _match(text)
    where, params = _filters_sql(project_ids)
    return RawSQL(f"SELECT DISTINCT m.session_id FROM {source} WHERE {condition} AND {where}", [*match_params, *params])


def count_matching(text: TextQuery, at_most: int, *, project_ids: list[int], role: str | None = None,
                   since: datetime | None = None, until: datetime | None = None, has_checkpoint: bool = False) -> int:
    """How many messages ranked_message_ids would find with the same arguments, counted to `at_most` + 1
    at the most: past that a page says "more than at_most" rather than have the database count every
    match of a common word (a bounded read of the index, not of the messages)."""
    where, params = _filters_sql(project_ids, role, since, until, has_checkpoint)
    source, condition, _, match_params = _match(text)
    sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {source} WHERE {condition} AND {where} LIMIT %s) AS found"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*match_params, *params, at_most + 1])
        return cursor.fetchone()[0]


def sessions_with_words(text: TextQuery, project_ids: list[int], by_id_at_most: int) -> tuple[Q, bool]:
    """A condition on the sessions (of the projects `project_ids`) with a message that `text` finds, and
    whether it asks each session on its own. On PostgreSQL, the sessions of the newest `by_id_at_most`
    matches by their ids when those are all the matches, else session_has_text; elsewhere the ids of
    every match's session (sessions_with_text)."""
    if connection.vendor != "postgresql":
        return Q(pk__in=sessions_with_text(text, project_ids)), False
    found, complete = newest_matching_sessions(text, by_id_at_most)
    if complete:
        return Q(pk__in=sorted(found)), False
    return Q(session_has_text(text)), True
