"""The dashboard's import page: editors and admins upload transcript files into a project. Each file
becomes an import job (sessions.ingest.import_jobs) run by the task worker; its page shows the progress live
and the result. The work is done by sessions.ingest.importers, the same code as `manage.py import_transcripts`."""

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from sessions.access import permissions as access
from sessions.ingest.import_jobs import create_job, retry_job
from sessions.ingest.importers import FORMATS
from sessions.models import ImportJob

RECENT_JOBS = 20


@login_required
def import_upload(request: HttpRequest) -> HttpResponse:
    projects = [p for p in access.projects_for(request.user) if access.can(request.user, p, "import")]
    project = None
    if request.method == "POST":
        project = access.get_project_for(request.user, request.POST.get("project", ""), "import")
        fmt = request.POST.get("format", "auto")
        files = request.FILES.getlist("files")
        if fmt not in FORMATS:
            flash.error(request, f"Unknown format {fmt!r}.")
        elif not files:
            flash.error(request, "Choose at least one transcript file.")
        else:
            prefix = request.POST.get("session_key_prefix", "").strip()[:100]
            with transaction.atomic():
                jobs = [create_job(project, request.user, upload, fmt, prefix) for upload in files]
            if len(jobs) == 1:
                return redirect("import_job", job_id=jobs[0].pk)
            flash.success(request, f"{len(jobs)} files are queued for import.")
            return redirect(f"{reverse('import')}?project={project.name}")
    elif request.GET.get("project"):
        project = access.get_project_for(request.user, request.GET["project"], "import")
    elif not projects:
        if not access.roles_of(request.user):
            raise Http404("You belong to no project.")
        raise PermissionDenied("Your roles do not allow importing into any project.")
    jobs = ImportJob.objects.filter(project__in=projects).select_related("project").order_by("-created_at")
    return render(request, "sessions/import.html", {
        "projects": projects,
        "selected": project.name if project else "",
        "formats": FORMATS,
        "jobs": jobs[:RECENT_JOBS],
        "max_bytes": settings.CTXWEB_MAX_IMPORT_BYTES,
    })


def _links(job: ImportJob) -> list[tuple[str, str]]:
    return [(key, reverse("session", args=[job.project.name, key])) for key in job.keys]


@require_GET
@login_required
def import_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """An import's progress and result; htmx polls the fragment until the job is done."""
    job = access.get_import_job_for(request.user, job_id)
    context = {"job": job, "links": _links(job), "more": max(0, job.sessions - len(job.keys))}
    if request.htmx:
        return render(request, "sessions/_import_job.html", context)
    return render(request, "sessions/import_job.html", context)


@require_POST
@login_required
def import_job_retry(request: HttpRequest, job_id: int) -> HttpResponse:
    """Run a failed import again: what it stored stays, and the re-run completes it."""
    job = access.get_import_job_for(request.user, job_id)
    if job.state != ImportJob.State.FAILED or not job.stored_name:
        flash.error(request, "Only a failed import whose file is still stored can run again.")
    elif not job.retry_helps:
        flash.error(request, "Running this import again would fail the same way: the file itself is at fault. "
                             "Correct it (or choose its format) and upload it again.")
    else:
        retry_job(job)
    return redirect("import_job", job_id=job.pk)
