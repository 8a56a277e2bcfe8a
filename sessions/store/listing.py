"""The sessions list: which sessions of some projects match a search and the list's
filters, in which order. The API's list and the dashboard's go through find_sessions, so `q` means one
thing in both (sessions.store.search.sessions_matching)."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce

from sessions.db.sessions import MetadataComparison
from sessions.models import Checkpoint, Review, Session
from sessions.store.search import asks_text_per_session, sessions_matching

SORTS = {
    "activity": ("-last_activity_at", "-pk"),
    "tokens": ("-raw_tokens", "-pk"),
    "input": ("-input_tokens", "-pk"),
    "messages": ("-message_count", "-pk"),
}
# `sort=meta:<key>`: by a metadata value, highest first, sessions without it last.
META_SORT = "meta:"
# `source=`: where a session's raw log comes from, as the API's SessionOut.source names it.
SOURCES = {"requests": "rebuilt from recorded requests", "import": "imported transcripts",
           "api": "written through the API"}


@dataclass(frozen=True)
class MetadataFilter:
    """`meta=key` (the session's metadata has the key), `meta=key:value` (its value is `value`: the JSON
    value it spells, `1`, `0.5`, `true`, or else the text) or `meta=key<value` (`op` <, <=, > or >=: its
    value is a JSON number that compares so with the number `value`). A key is a path: `info.task.user_id`."""

    path: tuple[str, ...]
    value: object = None
    text: str | None = None  # None: any value, the key only has to be present
    op: str = "="


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
    pinned_lost: bool = False  # its latest checkpoint's summary lost a pinned fact (Session.pinned_lost)
    since: datetime | None = None  # last activity at or after
    until: datetime | None = None  # last activity at or before
    sort: str = "activity"
    meta: tuple[MetadataFilter, ...] = ()
    column: tuple[str, ...] = ()  # a metadata key shown as a column of its own (`meta_column`)
    source: str = ""  # one of SOURCES
    reviewed: bool | None = None  # has a review (True), has none (False), either (None)
    verdict: str = ""  # its latest review's verdict


def latest_verdict() -> Subquery:
    """The verdict of a session's latest review (None when it has none), through the (session, -created_at)
    index."""
    return Subquery(Review.objects.filter(session=OuterRef("pk")).order_by("-created_at", "-pk").values("verdict")[:1])


def review_count() -> Coalesce:
    return Coalesce(Subquery(Review.objects.filter(session=OuterRef("pk")).order_by().values("session")
                             .annotate(count=Count("pk")).values("count")), 0)


def find_sessions(project_ids: list[int], filters: SessionFilters, *, with_tags: bool = False,
                  with_reviews: bool = False) -> QuerySet:
    """The sessions of `project_ids` that `filters` keeps, in the order it asks (newest activity first by
    default), with their project; `with_tags` fetches their tags too (one more query per page);
    `with_reviews` gives each its latest review's verdict (`review_verdict`, None when it has no review)
    and how many reviews it has (`review_count`), in the same query."""
    # A session still being stored by a streamed import is not shown until it is whole.
    sessions = Session.objects.filter(project_id__in=project_ids, being_imported=False).select_related("project")
    if with_tags:
        sessions = sessions.prefetch_related("tags")
    if with_reviews:
        sessions = sessions.annotate(review_verdict=latest_verdict(), review_count=review_count())
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
    if filters.pinned_lost:
        sessions = sessions.filter(pinned_lost__gt=0)
    if filters.since:
        sessions = sessions.filter(last_activity_at__gte=filters.since)
    if filters.until:
        sessions = sessions.filter(last_activity_at__lte=filters.until)
    if filters.source == "requests":
        sessions = sessions.filter(request_count__gt=0)
    elif filters.source == "import":
        sessions = sessions.filter(request_count=0).exclude(import_source="")
    elif filters.source == "api":
        sessions = sessions.filter(request_count=0, import_source="")
    if filters.reviewed is not None:
        reviewed = Exists(Review.objects.filter(session=OuterRef("pk")))
        sessions = sessions.filter(reviewed if filters.reviewed else ~reviewed)
    if filters.verdict:
        # The reviews of that verdict that no later review of their session follows: read from the reviews,
        # where asking each session for its latest review's verdict took 0.33 s of a 100,000-session list.
        later = Review.objects.filter(session=OuterRef("session")).filter(
            Q(created_at__gt=OuterRef("created_at")) | Q(created_at=OuterRef("created_at"), pk__gt=OuterRef("pk")))
        latest = Review.objects.filter(verdict=filters.verdict).exclude(Exists(later))
        sessions = sessions.filter(pk__in=latest.values("session_id"))
    for number, wanted in enumerate(filters.meta):
        if wanted.op != "=":
            sessions = sessions.filter(MetadataComparison(wanted.path, wanted.op, wanted.value))
            continue
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


# The sessions list counts its sessions to this many at the most; past it, it says "more than".
COUNTED_AT_MOST = 10_000
MAX_PAGE = 1000  # the deepest page it shows (past the counted ones, its rows are read by OFFSET)


@dataclass
class ListPage:
    """One page of the sessions list, and how many sessions match: counted to COUNTED_AT_MOST + 1 at the
    most, or not at all where a common word is asked of each session's messages (a count would ask every
    session of the projects); the page then says only whether there are more."""

    object_list: list
    number: int
    size: int
    has_next: bool
    count: int | None

    @property
    def more(self) -> bool:
        return self.count is not None and self.count > COUNTED_AT_MOST

    @property
    def counted_at_most(self) -> str:
        return f"{COUNTED_AT_MOST:,}"

    @property
    def num_pages(self) -> int | None:
        if self.count is None:
            return None
        return max(1, -(-min(self.count, COUNTED_AT_MOST) // self.size))

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1


def list_page(project_ids: list[int], filters: SessionFilters, number, size: int, *, with_tags: bool = False,
              with_reviews: bool = False) -> ListPage:
    """Page `number` (from 1 to MAX_PAGE; anything else is the first, past the last the last) of the sessions
    find_sessions gives. The filters are asked once: the ids of the matching sessions, in the list's
    order, to COUNTED_AT_MOST + 1 (the count), then the page's sessions by their ids (a page and a COUNT
    asked the filters twice; a rare word or verdict, which every session must be asked about, cost
    twice the time)."""
    try:
        number = min(max(1, int(number)), MAX_PAGE)
    except (TypeError, ValueError):
        number = 1
    sessions = find_sessions(project_ids, filters, with_tags=with_tags, with_reviews=with_reviews)
    start = (number - 1) * size
    if asks_text_per_session(sessions):
        rows = list(sessions[start:start + size + 1])
        return ListPage(rows[:size], number, size, len(rows) > size, None)
    ids = list(sessions.values_list("pk", flat=True)[:COUNTED_AT_MOST + 1])
    count = len(ids)
    if count <= COUNTED_AT_MOST:
        number = min(number, max(1, -(-count // size)))
        start = (number - 1) * size
    if start + size > COUNTED_AT_MOST:  # past the ids read: the filters asked again, for this page
        rows = list(sessions[start:start + size + 1])
        return ListPage(rows[:size], number, size, len(rows) > size, count)
    wanted = ids[start:start + size]
    shown = find_sessions(project_ids, SessionFilters(column=filters.column), with_tags=with_tags,
                          with_reviews=with_reviews).filter(pk__in=wanted)
    by_id = {session.pk: session for session in shown}
    rows = [by_id[pk] for pk in wanted if pk in by_id]
    return ListPage(rows, number, size, start + size < count, count)
