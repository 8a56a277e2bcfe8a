"""Model instances from rows as the database returned them, for the statements of the hot path that are
written as SQL (sessions/api_keys.py, sessions/session_store.py): each column converted as the ORM's
compiler converts it (dates, booleans and JSON on SQLite), without a queryset."""

import functools

from django.db import models


@functools.lru_cache(maxsize=16)  # per connection: a thread has its own; a few are alive at a time
def _converters(model, db) -> list[tuple]:
    """Each column of `model`, with the functions that turn what the database returns into what the ORM
    gives (dates, booleans and JSON on SQLite), as the ORM's compiler finds them."""
    found = []
    for field in model._meta.concrete_fields:
        column = field.get_col(model._meta.db_table)
        found.append((column, db.ops.get_db_converters(column) + field.get_db_converters(db)))
    return found


def instance_from_row(model, values, db) -> models.Model:
    """An instance of `model` from its concrete columns, in order, as the database `db` returned them."""
    converted = []
    for (column, converters), value in zip(_converters(model, db), values, strict=True):
        for convert in converters:
            value = convert(value, column, db)
        converted.append(value)
    return model.from_db(db.alias, [f.attname for f in model._meta.concrete_fields], converted)
