"""The append-only event history of a session (SPEC §4.4)."""

from django.utils import timezone

from .models import Event, Session

EVENTS_PAGE = 40


def record(session: Session, type: str, actor: str = "system", **data) -> Event:
    return Event.objects.create(session=session, type=type, actor=actor or "system", data=data, created_at=timezone.now())


def newest_events(session: Session, before: int | None = None, limit: int = EVENTS_PAGE) -> tuple[list[Event], bool]:
    """A page of the session's events, newest first (those before event id `before`), and whether an older
    page may follow."""
    events = session.events.all()
    if before is not None:
        events = events.filter(pk__lt=before)
    page = list(events.order_by("-pk")[:limit])
    return page, len(page) == limit
