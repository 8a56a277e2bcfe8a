"""Project membership: who may see a project's sessions and with which role."""

from django.contrib.auth import get_user_model

from sessions.errors import DomainError, NotFound
from sessions.models import Membership, Project

ROLES = tuple(Membership.Role.values)


def set_member(project: Project, username: str, role: str) -> tuple[Membership, bool]:
    if role not in ROLES:
        raise DomainError(f"role must be one of {', '.join(ROLES)}", code="invalid_role")
    # An unknown name and an account that cannot log in get the same answer, so a project's admin cannot
    # learn which usernames the installation has.
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise NotFound(f"{username} cannot be added: no active account has that username.", code="user_not_found")
    membership, created = Membership.objects.update_or_create(user=user, project=project, defaults={"role": role})
    return membership, created


def remove_member(project: Project, username: str) -> bool:
    deleted, _ = Membership.objects.filter(project=project, user__username=username).delete()
    return bool(deleted)


def members_of(project: Project):
    """The project's memberships with their users, by user name."""
    return project.memberships.select_related("user").order_by("user__username")
