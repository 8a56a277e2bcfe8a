"""The dashboard's import page: upload transcript files into a project (editors and admins). The work is
done by sessions.importers, the same code as `manage.py import_transcripts`."""

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from . import access
from .events import actor
from .importers import FORMATS, ImportSummary, import_data

SHOWN_SESSIONS = 20


@login_required
def import_upload(request: HttpRequest) -> HttpResponse:
    projects = [p for p in access.projects_for(request.user) if access.can(request.user, p, "import")]
    summary, project = None, None
    if request.method == "POST":
        project = access.get_project_for(request.user, request.POST.get("project", ""), "import")
        fmt = request.POST.get("format", "auto")
        files = request.FILES.getlist("files")
        if fmt not in FORMATS:
            flash.error(request, f"Unknown format {fmt!r}.")
        elif not files:
            flash.error(request, "Choose at least one transcript file.")
        else:
            summary = ImportSummary()
            prefix = request.POST.get("session_key_prefix", "").strip()
            for upload in files:
                summary.files.append(
                    import_data(project, upload.name, upload.read(), fmt=fmt, key_prefix=prefix, actor=actor(request))
                )
    elif request.GET.get("project"):
        project = access.get_project_for(request.user, request.GET["project"], "import")
    elif not projects:
        if not access.roles_of(request.user):
            raise Http404("You belong to no project.")
        raise PermissionDenied("Your roles do not allow importing into any project.")
    keys = [key for report in summary.files for key in report.keys] if summary else []
    links = [(key, reverse("session", args=[project.name, key])) for key in keys[:SHOWN_SESSIONS]]
    return render(request, "sessions/import.html", {
        "projects": projects,
        "selected": project.name if project else "",
        "formats": FORMATS,
        "summary": summary,
        "links": links,
        "more": len(keys) - len(links),
    })
