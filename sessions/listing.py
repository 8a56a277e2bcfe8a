"""The sessions list: which sessions of some projects match a search and the list's
filters, in which order. The API's list and the dashboard's go through find_sessions, so `q` means one
thing in both (sessions.search.sessions_matching)."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, QuerySet

from .models import Checkpoint, Session
from .search import sessions_matching

SORTS = {
    "activity": ("-last_activity_at", "-pk"),
    "tokens": ("-raw_tokens", "-pk"),
    "input": ("-input_tokens", "-pk"),
    "messages": ("-message_count", "-pk"),
}


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
    return sessions.order_by(*SORTS.get(filters.sort, SORTS["activity"]))
