"""The sessions list: which sessions of some projects match a search and the list's
filters, in which order. The API's list and the dashboard's go through find_sessions, so `q` means one
thing in both (sessions.store.search.sessions_matching)."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.fields.json import KeyTransform

from sessions.models import Checkpoint, Session
from sessions.store.search import sessions_matching

SORTS = {
    "activity": ("-last_activity_at", "-pk"),
    "tokens": ("-raw_tokens", "-pk"),
    "input": ("-input_tokens", "-pk"),
    "messages": ("-message_count", "-pk"),
}
# `sort=meta:<key>`: by a metadata value, highest first, sessions without it last.
META_SORT = "meta:"


@dataclass(frozen=True)
class MetadataFilter:
    """`meta=key` (the session's metadata has the key) or `meta=key:value` (its value is `value`: the JSON
    value it spells, `1`, `0.5`, `true`, or else the text). A key is a path: `info.task.user_id`."""

    path: tuple[str, ...]
    value: object = None
    text: str | None = None  # None: any value, the key only has to be present


def metadata_value(path: tuple[str, ...]) -> KeyTransform:
    """The value at `path` in a session's metadata, as the database reads it: numbers stay numbers, so
    that ordering by it is numeric on SQLite and PostgreSQL alike."""
    value = F("metadata")
    for part in path:
        value = KeyTransform(part, value)
    return value


@dataclass
class SessionFilters:
    q: str = ""
    project: str = ""  # a project's name
    tag: str = ""
    has_checkpoints: bool = False
    failed: bool = False  # had a failed compaction
    lost_facts: bool = False  # its latest checkpoint's summary lost salient literals
    since: datetime | None = None  # last activity at or after
    until: datetime | None = None  # last activity at or before
    sort: str = "activity"
    meta: tuple[MetadataFilter, ...] = ()
    column: tuple[str, ...] = ()  # a metadata key shown as a column of its own (`meta_column`)


def find_sessions(project_ids: list[int], filters: SessionFilters, *, with_tags: bool = False) -> QuerySet:
    """The sessions of `project_ids` that `filters` keeps, in the order it asks (newest activity first by
    default), with their project; `with_tags` fetches their tags too (one more query per page)."""
    # A session still being stored by a streamed import is not shown until it is whole.
    sessions = Session.objects.filter(project_id__in=project_ids, being_imported=False).select_related("project")
    if with_tags:
        sessions = sessions.prefetch_related("tags")
    if filters.project:
        sessions = sessions.filter(project__name=filters.project)
    sessions = sessions_matching(sessions, filters.q, project_ids)
    if filters.tag:
        sessions = sessions.filter(tags__name=filters.tag)
    if filters.has_checkpoints:
        sessions = sessions.filter(checkpoint_count__gt=0)
    if filters.failed:
        sessions = sessions.filter(failed_compactions__gt=0)
    if filters.lost_facts:
        # The latest checkpoint ends at the session's checkpoint_last_seq: one lookup per session through
        # the (session, -last_seq) index.
        sessions = sessions.filter(Exists(Checkpoint.objects.filter(
            session=OuterRef("pk"), last_seq=OuterRef("checkpoint_last_seq"), facts_lost__gt=0)))
    if filters.since:
        sessions = sessions.filter(last_activity_at__gte=filters.since)
    if filters.until:
        sessions = sessions.filter(last_activity_at__lte=filters.until)
    for number, wanted in enumerate(filters.meta):
        name = f"meta_filter_{number}"
        sessions = sessions.alias(**{name: metadata_value(wanted.path)})
        if wanted.text is None:
            sessions = sessions.filter(**{f"{name}__isnull": False})  # the key is present
        else:
            # The JSON value the text spells (reward:1 finds 1 and 1.0), or the text itself ("1").
            sessions = sessions.filter(Q(**{name: wanted.value}) | Q(**{name: wanted.text}))
    if filters.column:
        sessions = sessions.annotate(meta_column=metadata_value(filters.column))
    if filters.sort.startswith(META_SORT):
        path = tuple(filters.sort.removeprefix(META_SORT).split("."))
        value = metadata_value(path)
        return sessions.order_by(value.desc(nulls_last=True), "-last_activity_at", "-pk")
    return sessions.order_by(*SORTS.get(filters.sort, SORTS["activity"]))
