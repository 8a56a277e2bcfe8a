"""A project's own settings that people change: masking of personal data (sessions/access/masking_policy.py)."""

from django.contrib.auth import get_user_model
from django.db import transaction

from sessions.access.masking_policy import clean_masking, enabled
from sessions.access.permissions import Role, role_in
from sessions.errors import DomainError
from sessions.models import MaskingReveal, Project, Session
from sessions.store.event_types import MaskingRevealed
from sessions.store.events import actor, record


def set_masking(project: Project, data: dict) -> Project:
    """Replace the given keys of the project's masking settings (`enabled`, `patterns`), checked whole."""
    project.masking = clean_masking({**(project.masking or {}), **data})
    project.save(update_fields=["masking"])
    return project


def masked_viewers(session: Session) -> list:
    """The viewers of the session's project who see it masked now (those a reveal may be made to)."""
    if not enabled(session.project):
        return []
    revealed = MaskingReveal.objects.filter(session=session).values("user_id")
    return list(get_user_model().objects.filter(memberships__project=session.project,
                                                memberships__role=Role.VIEWER)
                .exclude(pk__in=revealed).order_by("username"))


def reveal_to(session: Session, by, username: str):
    """Show `session`'s personal data unmasked to the viewer `username`, recorded as MASKING_REVEALED with
    `by` (an editor or admin) as actor."""
    viewer = get_user_model().objects.filter(username=(username or "").strip()).first()
    if viewer is None or role_in(viewer, session.project) != Role.VIEWER:
        raise DomainError(f"{username!r} is not a viewer of {session.project.name}.", code="not_a_viewer")
    with transaction.atomic():
        _, made = MaskingReveal.objects.get_or_create(session=session, user=viewer, defaults={"revealed_by": by})
        if made:
            record(session, actor(by), MaskingRevealed(viewer=viewer.get_username()))
    return viewer
