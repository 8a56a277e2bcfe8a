"""Hand-written SQL on the session table: the sessions whose metadata holds a text among its values.
The ORM can only search the metadata as one serialized JSON text (Cast to text, icontains), which matches
its keys and its punctuation too: `"` found every session with metadata. Each database walks the JSON
itself here (SQLite's json_tree, PostgreSQL's jsonpath `$.**`) and compares the scalar values alone;
tests/dashboard/test_search_totals.py holds it against a walk of the same metadata in Python.

And a metadata value compared with a number (the list's `meta=reward<1`), true only where the value is a
JSON number: the ORM's `metadata__reward__lt=1` compares jsonb values on PostgreSQL, where every string,
and null, sorts below every number, and SQL values on SQLite, where every string sorts above them, so
`"0.5"` and null would match on one database and not on the other."""

from django.db import connection
from django.db.models import BooleanField, F, Func, Q
from django.db.models.expressions import RawSQL

from sessions.db.message_search import like_pattern
from sessions.models import Session

TABLE = Session._meta.db_table


def sessions_with_metadata_value(text: str, project_ids: list[int]) -> Q:
    """The sessions of `project_ids` with a metadata value (a string, number or boolean, at any depth)
    that holds `text`, any case: a condition on the sessions query."""
    pattern = like_pattern(text.lower())
    if connection.vendor == "postgresql":
        # Asked of each session's own row in the scan the list makes anyway: a subquery of its own
        # walked every session's values in a second pass (0.12 s of a list search of 100,000 sessions).
        values = RawSQL(
            f'EXISTS (SELECT 1 FROM jsonb_path_query("{TABLE}"."metadata", \'strict $.**\') v '
            "WHERE jsonb_typeof(v) IN ('string', 'number', 'boolean') AND LOWER(v #>> '{}') LIKE %s ESCAPE '\\')",
            [pattern], output_field=BooleanField())
        # Where the text is written the same inside the metadata's JSON text (no quote, backslash or
        # control character: jsonb writes a value's text as it is otherwise, numbers and booleans
        # included), only the sessions whose JSON text holds it have their values walked.
        if any(char in '"\\' or ord(char) < 0x20 for char in text):
            return Q(values)
        holds = RawSQL(f'LOWER("{TABLE}"."metadata"::text) LIKE %s ESCAPE \'\\\'', [pattern],
                       output_field=BooleanField())
        return Q(holds) & Q(values)
    placeholders = ", ".join(["%s"] * len(project_ids))
    sql = (f'SELECT s."id" FROM "{TABLE}" s, json_tree(s."metadata") t '
           f'WHERE s."project_id" IN ({placeholders}) AND t."atom" IS NOT NULL AND t."type" <> \'null\' '
           # json_tree's atom of true and false is 1 and 0: named as JSON writes them.
           "AND LOWER(CASE t.\"type\" WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
           "ELSE CAST(t.\"atom\" AS TEXT) END) LIKE %s ESCAPE '\\'")
    return Q(pk__in=RawSQL(sql, [*project_ids, pattern]))


COMPARISONS = ("<", "<=", ">", ">=")


class MetadataComparison(Func):
    """Whether the value at `path` in a session's metadata is a JSON number and stands in `op` (one of
    COMPARISONS) to `number`. A boolean expression: `sessions.filter(MetadataComparison(...))`. On
    PostgreSQL both sides are compared as numeric, which holds any JSON number (a double precision cast
    fails on 1e400)."""

    output_field = BooleanField()

    def __init__(self, path: tuple[str, ...], op: str, number: int | float):
        if op not in COMPARISONS:
            raise ValueError(f"not a comparison: {op!r}")
        super().__init__(F("metadata"))
        self.path, self.op, self.number = tuple(path), op, number

    def as_sqlite(self, compiler, connection, **extra):
        column, params = compiler.compile(self.source_expressions[0])
        path = "$" + "".join(f'."{part}"' for part in self.path)
        sql = (f"(json_type({column}, %s) IN ('integer', 'real') "
               f"AND json_extract({column}, %s) {self.op} %s)")
        return sql, [*params, path, *params, path, self.number]

    def as_postgresql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.source_expressions[0])
        path = list(self.path)
        sql = (f"(CASE WHEN jsonb_typeof({column} #> %s) = 'number' "
               f"THEN ({column} #>> %s)::numeric {self.op} %s::numeric ELSE false END)")
        return sql, [*params, path, *params, path, repr(self.number)]

    def as_sql(self, compiler, connection, **extra):
        raise NotImplementedError(f"metadata comparisons are written for SQLite and PostgreSQL, not {connection.vendor}")
