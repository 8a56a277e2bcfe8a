"""The project of the API key: GET /project, and PATCH /project to change its masking of personal data
(sessions/access/masking_policy.py)."""

from ninja import Router

from sessions.context.pinned import clean_pinned
from sessions.context.pinned_status import set_pinned_facts
from sessions.errors import DomainError
from sessions.http import schemas as s
from sessions.http.common import ERRORS, WRITE_ERRORS, link, links, project
from sessions.store.project_settings import set_masking

router = Router(tags=["project"])
FORBIDDEN = {**WRITE_ERRORS, 403: s.ErrorOut}


def _out(request, here) -> dict:
    masking = here.masking or {}
    return {"name": here.name, "title": here.title, "key_masked": request.auth.masked,
            "pinned_facts": here.pinned_facts or [],
            "masking": {"enabled": bool(masking.get("enabled")), "patterns": masking.get("patterns", []),
                        "at_capture": bool(masking.get("at_capture"))}}


@router.get("/project", response={200: s.ProjectOut, **ERRORS}, summary="The API key's project and its masking",
            openapi_extra=links(200, ChangeProject=link("change_project")))
def get_project(request):
    return _out(request, project(request))


@router.patch("/project", response={200: s.ProjectOut, **FORBIDDEN},
              summary="Change the project's masking of personal data (on or off, its own patterns, at capture) and its "
                      "pinned facts",
              openapi_extra=links(200, GetProject=link("get_project")))
def change_project(request, body: s.ProjectPatchIn):
    """Only the keys given change; everything is checked before anything is stored. A masked key may not
    change masking (403): it would unmask its own answers."""
    here = project(request)
    if body.masking is not None:
        if request.auth.masked:
            raise DomainError("a masked API key cannot change the project's masking", code="forbidden", status=403)
        pinned = clean_pinned(body.pinned_facts) if body.pinned_facts is not None else None  # all checked first
        set_masking(here, body.masking.model_dump(exclude_none=True))
    if body.pinned_facts is not None:
        set_pinned_facts(here, body.pinned_facts if body.masking is None else pinned)
    return _out(request, here)
