"""Who may see and do what, in one place: one helper per object type, used by every view, fragment,
download and action. Another project's session is a 404 (its existence is not confirmed); a visible
object the role may not change is a 403."""

from django.core.exceptions import PermissionDenied
from django.http import Http404

from sessions.models import (
    ApiKey,
    Checkpoint,
    Event,
    ImportJob,
    Membership,
    Message,
    Project,
    ReviewQueue,
    Session,
)

Role = Membership.Role
RANK = {Role.VIEWER: 1, Role.EDITOR: 2, Role.ADMIN: 3}

# The least role each action needs.
ACTIONS = {
    "view": Role.VIEWER,
    "annotate": Role.VIEWER,
    "review": Role.VIEWER,  # record reviews, take sessions from review queues
    "export": Role.VIEWER,
    "compact": Role.EDITOR,
    "edit_messages": Role.EDITOR,
    "import": Role.EDITOR,
    "manage_queues": Role.EDITOR,  # create review queues
    "manage_keys": Role.ADMIN,
    "manage_members": Role.ADMIN,
}


def roles_of(user) -> dict[int, str]:
    """project id -> role, cached on the user object for the request."""
    if not user.is_authenticated:
        return {}
    cached = getattr(user, "_ctxweb_roles", None)
    if cached is None:
        if user.is_superuser:
            cached = {pk: Role.ADMIN for pk in Project.objects.values_list("pk", flat=True)}
            user._ctxweb_masking = {}
        else:
            rows = Membership.objects.filter(user=user).values_list("project_id", "role", "project__name",
                                                                     "project__masking")
            cached = {pk: role for pk, role, _, _ in rows}
            # The projects where the user is a viewer and personal data is masked, by name, with their
            # settings (sessions/access/masking_policy.py): read in the same query.
            user._ctxweb_masking = {name: (pk, masking) for pk, role, name, masking in rows
                                    if role == Role.VIEWER and (masking or {}).get("enabled")}
        user._ctxweb_roles = cached
    return cached


def masking_projects(user) -> dict[str, tuple[int, dict]]:
    """Name -> (id, masking settings) of the projects where `user` sees personal data masked."""
    if not user.is_authenticated:
        return {}
    roles_of(user)
    return user._ctxweb_masking


def role_in(user, project: Project) -> str | None:
    return roles_of(user).get(project.pk)


def can(user, project: Project, action: str = "view") -> bool:
    role = role_in(user, project)
    return role is not None and RANK[role] >= RANK[ACTIONS[action]]


def permissions(user, project: Project) -> dict[str, bool]:
    """Every action's answer for templates: {{ perms.compact }} and so on."""
    return {action: can(user, project, action) for action in ACTIONS}


def projects_for(user):
    return Project.objects.filter(pk__in=list(roles_of(user))).order_by("name")


def project_ids_for(user) -> list[int]:
    """The projects whose sessions the user may see."""
    return list(roles_of(user))


def _require(user, project: Project, action: str) -> None:
    if role_in(user, project) is None:
        raise Http404("No such project.")
    if not can(user, project, action):
        raise PermissionDenied(f"Your role in {project.name} does not allow this.")


def get_project_for(user, name: str, action: str = "view") -> Project:
    try:
        project = Project.objects.get(name=name)
    except Project.DoesNotExist:
        raise Http404("No such project.") from None
    _require(user, project, action)
    return project


def get_session_for(user, project_name: str, key: str, action: str = "view") -> Session:
    try:
        session = Session.objects.select_related("project").get(project__name=project_name, key=key)
    except Session.DoesNotExist:
        raise Http404("No such session.") from None
    if session.being_imported:
        raise Http404("This session is being imported: it appears once its import has stored every message.")
    _require(user, session.project, action)
    return session


def get_sessions_for(user, pks: list[int], action: str = "view") -> list[Session]:
    """Several sessions by id, for an action on all of them: a 404 if any is not there to see, a 403
    if the role in any one's project may not act, so the action happens on all or none."""
    pks = sorted(set(pks))
    sessions = list(Session.objects.select_related("project").filter(pk__in=pks, being_imported=False)
                    .order_by("pk"))
    if len(sessions) != len(pks) or any(role_in(user, s.project) is None for s in sessions):
        raise Http404("No such session.")
    for session in sessions:
        _require(user, session.project, action)
    return sessions


def project_ids_where(user, action: str) -> set[int]:
    """The projects in which the user's role allows `action`."""
    return {pk for pk, role in roles_of(user).items() if RANK[role] >= RANK[ACTIONS[action]]}


def get_checkpoint_for(user, session: Session, checkpoint_id: int) -> Checkpoint:
    try:
        return session.checkpoints.get(pk=checkpoint_id)
    except Checkpoint.DoesNotExist:
        raise Http404("No such checkpoint.") from None


def get_message_for(user, session: Session, seq: int) -> Message:
    try:
        return session.messages.get(seq=seq)
    except Message.DoesNotExist:
        raise Http404("No such message.") from None


def get_event_for(user, session: Session, event_id: int) -> Event:
    try:
        return session.events.get(pk=event_id)
    except Event.DoesNotExist:
        raise Http404("No such event.") from None


def _in_project_for(user, model, pk: int, action: str, what: str):
    """An object that belongs to a project (it has `project`), for the user's role in that project."""
    try:
        found = model.objects.select_related("project").get(pk=pk)
    except model.DoesNotExist:
        raise Http404(f"No such {what}.") from None
    _require(user, found.project, action)
    return found


def get_api_key_for(user, key_id: int, action: str = "manage_keys") -> ApiKey:
    return _in_project_for(user, ApiKey, key_id, action, "API key")


def get_import_job_for(user, job_id: int, action: str = "import") -> ImportJob:
    """An import job, for the members of its project who may import (its file and result included)."""
    return _in_project_for(user, ImportJob, job_id, action, "import")


def get_queue_for(user, queue_id: int, action: str = "review") -> ReviewQueue:
    """A review queue, for the members of its project whose role allows `action`."""
    return _in_project_for(user, ReviewQueue, queue_id, action, "review queue")


def manages_keys(user) -> bool:
    return any(RANK[role] >= RANK[ACTIONS["manage_keys"]] for role in roles_of(user).values())


def members_page_project(user, current: str | None = None):
    """The project whose members page the header links to: the one being looked at when the user may
    manage its members, else the first (by name) whose members the user manages; None when there is none."""
    managed = [pk for pk, role in roles_of(user).items() if RANK[role] >= RANK[ACTIONS["manage_members"]]]
    if not managed:
        return None
    projects = Project.objects.filter(pk__in=managed).order_by("name")
    return (projects.filter(name=current).first() if current else None) or projects.first()


def imports_anywhere(user) -> bool:
    return any(RANK[role] >= RANK[ACTIONS["import"]] for role in roles_of(user).values())


def get_note_for(user, session: Session, note_id: int):
    from sessions.models import Note

    try:
        return session.notes.select_related("session__project", "author").get(pk=note_id)
    except Note.DoesNotExist:
        raise Http404("No such note.") from None
