"""Data that takes seconds to build, built once per test process and copied back before each test that
asks for it.

The browser tests use a transactional database (the live server thread must see their rows), which
pytest-django empties after every test, so a fixture that builds its data through the domain code (the
demo, an import of 200 runs) pays for it in every test. Instead `stored` builds it the first
time and keeps a copy of the rows `build` added, table by table; later it inserts that copy again, with
the same primary keys, in one transaction. The domain code is not called again, so what the test sees is
exactly what the first build stored (only the timestamps are those of the first build). A fixture
asks for it with `stored(project, build, *args)` instead of `build(project, *args)`.

The rows of a copy may refer to rows that existed before the build only through the default project
(`project`, made again by each test): those references are pointed at this test's default project. Or
through a model instance passed among `args` (a user copied back identical, say): it is part of the
build's name, so the copy is only put back while that row has the same primary key.
The copy is taken through plain SQL on the tables of Django's models: on SQLite with a second connection
that returns values as stored (no converters), on PostgreSQL with COPY (generated columns such as the
search vector are not copied; the database computes them again). SQLite's search index follows the
messages through its triggers.

Primary keys come from sequences that never go back while the data is put back and used (pytest-django
empties tables without resetting them), so the keys of a copy are free again when it is put back; when
they are not (another module's flush reset the sequences), the data is built again and copied anew.
"""

import dataclasses
import sqlite3
from dataclasses import dataclass, field

from django.apps import apps
from django.db import connection, models, transaction

from sessions.models import Project


@dataclass
class Table:
    name: str
    pk: str
    columns: list[str]
    project_columns: list[str]  # foreign keys to the project table
    keys: list = field(default_factory=list)  # primary keys of the copied rows
    rows: list | bytes = field(default_factory=list)  # SQLite: tuples; PostgreSQL: COPY text


@dataclass
class Copy:
    project_pk: int  # of the default project the rows were built on
    tables: list[Table]
    result: object  # what build returned, model instances as Refs


COPIES: dict[tuple, Copy] = {}


def stored(project: Project, build, *args):
    """build(project, *args) the first time in this process; later, the rows it stored put back. Returns
    what build returned (model instances fetched again, so each test gets its own). A build is known by
    its name and arguments, so it must store the same whatever the test."""
    name = (build.__module__, build.__qualname__, args)
    copy = COPIES.get(name)
    if copy is None or not put_back(copy, project):
        kept = {(type(a)._meta.db_table, a.pk) for a in args if isinstance(a, models.Model)}
        copy = COPIES[name] = take(project, lambda project: build(project, *args), kept)
    return fetch(copy.result, project, copy.project_pk)


def model_tables() -> list[Table]:
    tables = []
    for model in apps.get_models(include_auto_created=True):
        meta = model._meta
        if not meta.managed or meta.proxy or meta.db_table in {t.name for t in tables}:
            continue
        columns = [f.column for f in meta.local_concrete_fields]
        project_columns = [f.column for f in meta.local_concrete_fields
                           if f.is_relation and f.related_model is Project]
        tables.append(Table(meta.db_table, meta.pk.column, columns, project_columns))
    return tables


def foreign_keys(table_name: str) -> list[tuple[str, str]]:
    """(column, target table) of each foreign key of a model's table."""
    model = next(m for m in apps.get_models(include_auto_created=True) if m._meta.db_table == table_name)
    return [(f.column, f.related_model._meta.db_table) for f in model._meta.local_concrete_fields
            if f.is_relation and f.related_model is not None]


def q(name: str) -> str:
    return connection.ops.quote_name(name)


def select(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def not_in(table: Table, keys) -> str:
    """A condition on the table's primary key: not one of `keys` (integers)."""
    if not keys:
        return "1 = 1"
    assert all(isinstance(k, int) for k in keys), f"{table.name}: only integer primary keys are supported"
    return f"{q(table.pk)} NOT IN ({', '.join(map(str, keys))})"


def take(project: Project, build, kept: set[tuple[str, object]] = frozenset()) -> Copy:
    tables = model_tables()
    existing = {t.name: [r[0] for r in select(f"SELECT {q(t.pk)} FROM {q(t.name)}")] for t in tables}
    before = {t.name: rows_of(t, existing[t.name]) for t in tables if existing[t.name]}

    result = build(project)

    for table in tables:
        if existing[table.name]:
            assert rows_of(table, existing[table.name]) == before[table.name], (
                f"build changed rows of {table.name} that were there before it: they cannot be put back")
    copied = []
    for table in tables:
        added = not_in(table, existing[table.name])
        table.keys = [r[0] for r in select(f"SELECT {q(table.pk)} FROM {q(table.name)} WHERE {added}")]
        if not table.keys:
            continue
        for column, target in foreign_keys(table.name):
            allowed = {pk for table_name, pk in kept if table_name == target}
            if target == Project._meta.db_table:
                allowed.add(project.pk)
            if existing[target]:
                found = {r[0] for r in select(
                    f"SELECT DISTINCT {q(column)} FROM {q(table.name)} WHERE {added} AND {q(column)} IN "
                    f"({', '.join(map(str, existing[target]))})")}
                assert found <= allowed, (
                    f"rows built into {table.name} refer to rows of {target} made before the build ({found - allowed})"
                    ": only the default project can be pointed at the test's own, and rows passed to the build kept")
        table.rows = read_rows(table, added)
        copied.append(table)
    return Copy(project.pk, copied, refs(result))


def rows_of(table: Table, keys) -> list[tuple]:
    return select(f"SELECT * FROM {q(table.name)} WHERE {q(table.pk)} IN ({', '.join(map(str, keys))}) "
                  f"ORDER BY {q(table.pk)}")


def read_rows(table: Table, condition: str) -> list[tuple] | bytes:
    columns = ", ".join(map(q, table.columns))
    sql = f"SELECT {columns} FROM {q(table.name)} WHERE {condition} ORDER BY {q(table.pk)}"
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor, cursor.copy(f"COPY ({sql}) TO STDOUT") as copy:
            return b"".join(bytes(chunk) for chunk in copy)
    # Django's own connection converts dates and booleans on the way out; a plain one returns what is stored.
    plain = sqlite3.connect(connection.settings_dict["NAME"])
    try:
        return plain.execute(sql).fetchall()
    finally:
        plain.close()


def put_back(copy: Copy, project: Project) -> bool:
    """Insert the copied rows again, pointed at `project`. False (nothing inserted) when some of their
    primary keys are taken."""
    for table in copy.tables:
        if select(f"SELECT 1 FROM {q(table.name)} LIMIT 1") and keys_in_use(table):
            return False
    with transaction.atomic(), connection.cursor() as cursor:
        for table in copy.tables:
            columns = ", ".join(map(q, table.columns))
            if connection.vendor == "postgresql":
                with cursor.copy(f"COPY {q(table.name)} ({columns}) FROM STDIN") as pg_copy:
                    pg_copy.write(table.rows)
            else:
                marks = ", ".join(["%s"] * len(table.columns))
                cursor.executemany(f"INSERT INTO {q(table.name)} ({columns}) VALUES ({marks})", table.rows)
        # Foreign keys are checked at the commit (Django makes them deferrable), so the copied rows may
        # point at the first build's project until here.
        if project.pk != copy.project_pk:
            for table in copy.tables:
                for column in table.project_columns:
                    cursor.execute(f"UPDATE {q(table.name)} SET {q(column)} = %s WHERE {q(column)} = %s "
                                   f"AND {q(table.pk)} IN ({', '.join(map(str, table.keys))})",
                                   [project.pk, copy.project_pk])
        if connection.vendor == "postgresql":
            raise_sequences(cursor, copy.tables)
    return True


def keys_in_use(table: Table) -> list:
    return select(f"SELECT {q(table.pk)} FROM {q(table.name)} WHERE {q(table.pk)} IN "
                  f"({', '.join(map(str, table.keys))}) LIMIT 1")


def raise_sequences(cursor, tables: list[Table]) -> None:
    """After a flush that reset them, a table's sequence may be below the keys put back: raise it, never
    lower it."""
    for table in tables:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [q(table.name), table.pk])
        (sequence,) = cursor.fetchone()
        if sequence:
            cursor.execute(f"SELECT setval(%s, GREATEST((SELECT MAX({q(table.pk)}) FROM {q(table.name)}), "
                           f"(SELECT last_value FROM {sequence})))", [sequence])


@dataclass(frozen=True)
class Ref:
    model: type[models.Model]
    pk: object


def refs(value):
    """What build returned, with each model instance (alone, in a tuple, a list, a dict or a dataclass)
    replaced by a Ref."""
    if isinstance(value, tuple | list):
        return type(value)(refs(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: refs(getattr(value, f.name)) for f in dataclasses.fields(value)})
    if isinstance(value, dict):
        return {k: refs(v) for k, v in value.items()}
    return Ref(type(value), value.pk) if isinstance(value, models.Model) else value


def fetch(value, project: Project, built_on: int):
    """refs() undone: each Ref fetched again; the project the rows were built on is `project`, the test's
    default project their references were pointed at."""
    if isinstance(value, Ref):
        return project if value.model is Project and value.pk == built_on else value.model._default_manager.get(pk=value.pk)
    if isinstance(value, tuple | list):
        return type(value)(fetch(v, project, built_on) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: fetch(getattr(value, f.name), project, built_on)
                                             for f in dataclasses.fields(value)})
    if isinstance(value, dict):
        return {k: fetch(v, project, built_on) for k, v in value.items()}
    return value
