"""Who sees personal data masked, and with which patterns (SPEC §10, "Review"; the detectors are
sessions/access/masking.py).

A project turns masking on (`Project.masking`: {"enabled": true, "patterns": [{"name", "pattern"}]}).
With `"at_capture": true` it also masks what it captures before storing it (capture_masking): appends,
imports, OTLP spans and request logs, session fields; irreversible, and the token figures are the masked
text's.
Then a viewer of the project sees personal data masked in every page, fragment, search excerpt and export,
and an API key marked `masked` (a key for people's tools, not the application's) in every answer; editors,
admins and superusers see the real text, and may reveal one session to one viewer (MaskingReveal, recorded
as MASKING_REVEALED). The masking is applied to the response as a whole by PersonalDataMasking
(sessions/access/middleware.py), so no page or answer can forget it; this module decides for a request."""

import json
from functools import lru_cache

from django.http import HttpRequest

from sessions.access.masking import CustomPattern, compile_patterns, mask
from sessions.access.permissions import Role, masking_projects, role_in
from sessions.errors import DomainError
from sessions.models import ApiKey, MaskingReveal, Project, ReviewQueue, Session

SETTINGS = {"enabled", "patterns", "at_capture"}


def clean_masking(data) -> dict:
    """A project's masking settings as sent (`{"enabled": bool, "patterns": [...]}`, either key may be left
    out), checked: a DomainError (`invalid_masking`) for anything else."""
    if not isinstance(data, dict) or set(data) - SETTINGS:
        raise DomainError(f"masking is an object with {' and '.join(sorted(SETTINGS))}", code="invalid_masking")
    enabled = data.get("enabled", False)
    if not isinstance(enabled, bool):
        raise DomainError("masking.enabled is true or false", code="invalid_masking")
    patterns = data.get("patterns", [])
    if not isinstance(patterns, list):
        raise DomainError("masking.patterns is a list of {\"name\", \"pattern\"}", code="invalid_masking")
    compile_patterns(patterns)  # refuses a bad one
    at_capture = data.get("at_capture", False)
    if not isinstance(at_capture, bool):
        raise DomainError("masking.at_capture is true or false", code="invalid_masking")
    return {"enabled": enabled, "patterns": patterns, "at_capture": at_capture}


def enabled(project: Project) -> bool:
    return bool((project.masking or {}).get("enabled"))


@lru_cache(maxsize=256)
def _compiled(patterns: str) -> tuple[CustomPattern, ...]:
    return tuple(compile_patterns(json.loads(patterns)))


def patterns_of(project: Project) -> tuple[CustomPattern, ...]:
    """The project's own patterns, compiled once per distinct list."""
    return _patterns(project.masking)


def capture_masking(project: Project) -> tuple[CustomPattern, ...] | None:
    """The patterns to mask what is captured with before it is stored (`at_capture`: the project keeps no
    personal data at all, irreversibly), or None to store it as sent."""
    masking = project.masking or {}
    return _patterns(masking) if masking.get("at_capture") else None


def masked_for(user, project: Project, session: Session | None = None) -> bool:
    """Whether `user` sees `project`'s personal data masked (in `session`, which may be revealed to them)."""
    if not enabled(project) or role_in(user, project) != Role.VIEWER:
        return False
    return session is None or not MaskingReveal.objects.filter(session=session, user=user).exists()


def request_masking(request: HttpRequest) -> tuple[CustomPattern, ...] | None:
    """The patterns to mask this request's response with (the detectors' own always apply), or None to
    show it as it is. An API request: its key's project, if the key is marked `masked`. A dashboard page
    of one project (its URL names the project, a session, a queue, or `?project=` on the comparison):
    that project for its viewers, unless the session was revealed to them. A page of several projects
    (the list, search, the queues): masked when the user is a viewer of any project that masks, with the
    patterns of all of them. No query for anyone who sees nothing masked: the user's projects and their
    settings come with the user's roles (sessions.access.permissions.roles_of)."""
    key = getattr(request, "auth", None)
    if isinstance(key, ApiKey):
        return patterns_of(key.project) if key.masked and enabled(key.project) else None
    user = getattr(request, "user", None)
    if user is None:
        return None
    projects = masking_projects(user)
    if not projects:
        return None
    match = getattr(request, "resolver_match", None)
    kwargs = match.kwargs if match is not None else {}
    name = _project_of(request, kwargs)
    if name is None:  # a page of several projects
        return tuple(pattern for _, masking in projects.values() for pattern in _patterns(masking))
    if name not in projects:
        return None
    pk, masking = projects[name]
    if "key" in kwargs and MaskingReveal.objects.filter(session__project_id=pk, session__key=kwargs["key"],
                                                        user=user).exists():
        return None
    return _patterns(masking)


def _patterns(masking: dict) -> tuple[CustomPattern, ...]:
    return _compiled(json.dumps((masking or {}).get("patterns", []), sort_keys=True))


def _project_of(request: HttpRequest, kwargs: dict) -> str | None:
    """The name of the one project the page shows, when it shows one."""
    if kwargs.get("project"):
        return kwargs["project"]
    if request.path.startswith("/compare/") and request.GET.get("project"):
        return request.GET["project"]
    if "queue_id" in kwargs:
        return ReviewQueue.objects.filter(pk=kwargs["queue_id"]).values_list("project__name", flat=True).first()
    return None


def seeks_masked(request: HttpRequest, query: str) -> bool:
    """Whether `query` is itself personal data (or holds some) that this request sees masked: a search or a
    trace for it would tell where the masked value is, so it finds nothing."""
    patterns = request_masking(request)
    return patterns is not None and bool(query) and mask(query, patterns) != query
