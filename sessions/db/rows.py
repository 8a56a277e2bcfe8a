"""Rows of the hot path written as SQL rather than built through the ORM, whose querysets cost several
times what running them does (sessions/access/api_keys.py, session_store.py, events.py, model_input.py): a
model's columns, the first of its rows a SELECT reads, an UPDATE and an INSERT of some of its fields
(each value adapted by its field as the ORM adapts it), and instances made from the rows read (each
column converted as the ORM's compiler converts it: dates, booleans and JSON on SQLite).
tests/test_hot_path_sql.py and tests/test_auth_sql.py compare them with the ORM's."""

import functools

from django.db import connections, models, router


@functools.cache
def _fields(model, omit: tuple[str, ...] = ()) -> tuple:
    return tuple(field for field in model._meta.concrete_fields if field.name not in omit)


def columns(model, alias: str = "", omit: tuple[str, ...] = ()) -> str:
    """The model's concrete columns, in order, quoted (and qualified by `alias`), for a SELECT; without
    the fields named in `omit`."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f'{prefix}"{field.column}"' for field in _fields(model, omit))


def select(model, omit: tuple[str, ...] = ()) -> str:
    """`SELECT` of the model's concrete columns (but `omit`'s) `FROM` its table, for `first` (a WHERE
    clause follows)."""
    return f'SELECT {columns(model, omit=omit)} FROM "{model._meta.db_table}"'


def first(model, sql: str, params: list, db, omit: tuple[str, ...] = ()) -> models.Model | None:
    """The instance of `model` made from the first row `sql` (a `select(model, omit)` with its conditions)
    reads on the database `db`, or None when it reads none. The fields in `omit` are deferred, as the
    ORM's defer() leaves them: read from the database when first used."""
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else instance_from_row(model, row, db, omit)


@functools.lru_cache(maxsize=16)  # per connection: a thread has its own; a few are alive at a time
def _converters(model, db, omit: tuple[str, ...] = ()) -> list[tuple]:
    """Each column of `model` (but `omit`'s), with the functions that turn what the database returns into
    what the ORM gives, as the ORM's compiler finds them."""
    found = []
    for field in _fields(model, omit):
        column = field.get_col(model._meta.db_table)
        found.append((column, db.ops.get_db_converters(column) + field.get_db_converters(db)))
    return found


def instance_from_row(model, values, db, omit: tuple[str, ...] = ()) -> models.Model:
    """An instance of `model` from its concrete columns (but `omit`'s, which it defers), in order, as the
    database `db` returned them."""
    converted = []
    for (column, converters), value in zip(_converters(model, db, omit), values, strict=True):
        for convert in converters:
            value = convert(value, column, db)
        converted.append(value)
    return model.from_db(db.alias, [f.attname for f in _fields(model, omit)], converted)


def update_fields(instance: models.Model, **values) -> None:
    """Set these fields of `instance` and write them with one UPDATE of its row."""
    model = type(instance)
    fields = [model._meta.get_field(name) for name in values]
    db = connections[router.db_for_write(model)]
    assignments = ", ".join(f'"{field.column}" = %s' for field in fields)
    params = [field.get_db_prep_save(value, db) for field, value in zip(fields, values.values(), strict=True)]
    with db.cursor() as cursor:
        cursor.execute(f'UPDATE "{model._meta.db_table}" SET {assignments} WHERE "id" = %s', [*params, instance.pk])
    for name, value in values.items():
        setattr(instance, name, value)


def insert(instance: models.Model, names: tuple[str, ...]) -> None:
    """Store a new `instance` with one INSERT of the fields `names` (the others take the table's
    defaults), and give it the id the database chose."""
    model = type(instance)
    fields = [model._meta.get_field(name) for name in names]
    db = connections[router.db_for_write(model)]
    params = [field.get_db_prep_save(getattr(instance, field.attname), db) for field in fields]
    names_sql = ", ".join(f'"{field.column}"' for field in fields)
    with db.cursor() as cursor:
        cursor.execute(f'INSERT INTO "{model._meta.db_table}" ({names_sql}) VALUES ({", ".join(["%s"] * len(fields))}) '
                       'RETURNING "id"', params)
        instance.pk = cursor.fetchone()[0]
    instance._state.adding, instance._state.db = False, db.alias


def insert_all(instances: list[models.Model]) -> None:
    """Store new `instances` of one model, every concrete field but the id, with an INSERT of a row each
    (as bulk_create does: as many rows a statement as the database takes parameters), and give each the
    id the database chose."""
    if not instances:
        return
    model = type(instances[0])
    fields = [field for field in model._meta.concrete_fields if field is not model._meta.pk]
    db = connections[router.db_for_write(model)]
    names_sql = ", ".join(f'"{field.column}"' for field in fields)
    row = f'({", ".join(["%s"] * len(fields))})'
    size = max(1, db.ops.bulk_batch_size(fields, instances))
    for start in range(0, len(instances), size):
        batch = instances[start:start + size]
        params = [field.get_db_prep_save(field.pre_save(instance, True), db) for instance in batch for field in fields]
        with db.cursor() as cursor:
            cursor.execute(f'INSERT INTO "{model._meta.db_table}" ({names_sql}) VALUES {", ".join([row] * len(batch))} '
                           'RETURNING "id"', params)
            ids = [found for (found,) in cursor.fetchall()]
        for instance, pk in zip(batch, ids, strict=True):
            instance.pk = pk
            instance._state.adding, instance._state.db = False, db.alias
