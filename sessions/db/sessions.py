"""Hand-written SQL on the session table: the sessions whose metadata holds a text among its values.
The ORM can only search the metadata as one serialized JSON text (Cast to text, icontains), which matches
its keys and its punctuation too: `"` found every session with metadata. Each database walks the JSON
itself here (SQLite's json_tree, PostgreSQL's jsonpath `$.**`) and compares the scalar values alone;
tests/dashboard/test_search_totals.py holds it against a walk of the same metadata in Python."""

from django.db import connection
from django.db.models.expressions import RawSQL

from sessions.db.message_search import like_pattern
from sessions.models import Session

TABLE = Session._meta.db_table


def sessions_with_metadata_value(text: str, project_ids: list[int]) -> RawSQL:
    """A subquery of the ids of the sessions of `project_ids` with a metadata value (a string, number or
    boolean, at any depth) that holds `text`, any case."""
    placeholders = ", ".join(["%s"] * len(project_ids))
    pattern = like_pattern(text.lower())
    if connection.vendor == "postgresql":
        sql = (f'SELECT s."id" FROM "{TABLE}" s, jsonb_path_query(s."metadata", \'strict $.**\') v '
               f'WHERE s."project_id" IN ({placeholders}) AND jsonb_typeof(v) IN (\'string\', \'number\', \'boolean\') '
               "AND LOWER(v #>> '{}') LIKE %s ESCAPE '\\'")
    else:
        sql = (f'SELECT s."id" FROM "{TABLE}" s, json_tree(s."metadata") t '
               f'WHERE s."project_id" IN ({placeholders}) AND t."atom" IS NOT NULL AND t."type" <> \'null\' '
               # json_tree's atom of true and false is 1 and 0: named as JSON writes them.
               "AND LOWER(CASE t.\"type\" WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
               "ELSE CAST(t.\"atom\" AS TEXT) END) LIKE %s ESCAPE '\\'")
    return RawSQL(sql, [*project_ids, pattern])
