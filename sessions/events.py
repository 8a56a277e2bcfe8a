"""The append-only event history of a session (SPEC §4.4)."""

from django.utils import timezone

from .models import Event, Session


def record(session: Session, type: str, actor: str = "system", **data) -> Event:
    return Event.objects.create(session=session, type=type, actor=actor or "system", data=data, created_at=timezone.now())
