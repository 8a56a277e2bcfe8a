"""The dashboard's review pages: a session's reviews (its page shows them; a form records one), the review
queues of the user's projects (a saved filter of the sessions list each), one queue's progress with the
download of its reviews, and "Next", which hands the reviewer the queue's next session, claimed for them
(sessions.store.review_queues)."""

import re
from urllib.parse import urlencode

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sessions.access import permissions as access
from sessions.context.pinned import clean_pinned
from sessions.context.pinned_status import set_pinned_facts
from sessions.errors import DomainError
from sessions.ingest.session_store import update_session
from sessions.models import Review
from sessions.store.events import actor
from sessions.store.project_settings import masked_viewers, reveal_to, set_masking
from sessions.store.review_queues import (
    claim_of,
    create_queue,
    latest_reviews,
    next_in_queue,
    project_queues,
    queue_progress,
    release_claim,
    reviews_csv_response,
)
from sessions.store.reviews import add_review, session_reviews

SEQS = re.compile(r"[\s,;#]+")
RECENT = 50  # of a queue's reviews on its page; the CSV has them all


def _int(value) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) < 12 else None


def seqs_from(text: str) -> list | None:
    """The messages a review is about, as a person types them (`4, 7`, `#4 #7`): numbers, or the text that
    is not one, for the domain's check to refuse."""
    parts = [part for part in SEQS.split(text or "") if part]
    return [int(part) if part.isascii() and part.isdigit() and len(part) < 12 else part for part in parts]


def queue_of(request: HttpRequest, session, queue_id) -> object | None:
    """The queue a review page or form names (`queue=ID`), when it is one of the session's project."""
    number = _int(queue_id)
    if number is None:
        return None
    queue = access.get_queue_for(request.user, number)
    return queue if queue.project_id == session.project_id else None


def review_panel(request: HttpRequest, session) -> dict:
    """What the session page's review panel shows: the session's reviews, and the queue it is reviewed in
    (`?queue=ID`) with the reviewer's claim on it."""
    reviews = session_reviews(session, newest_first=True)
    queue = queue_of(request, session, request.GET.get("queue"))
    may_reveal = access.can(request.user, session.project, "edit_messages")
    return {"reviews": reviews, "review_queue": queue,
            "review_claim": claim_of(queue, session, request.user) if queue is not None else None,
            "verdicts": Review._meta.get_field("verdict").choices,
            "masked_viewers": masked_viewers(session) if may_reveal else []}


@login_required
@require_POST
def review_add(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """Record a review of the session; in a queue, "Save and next" goes on to the queue's next session."""
    session = access.get_session_for(request.user, project, key, "review")
    queue = queue_of(request, session, request.POST.get("queue"))
    back = session.get_absolute_url() + (f"?queue={queue.pk}" if queue is not None else "") + "#reviews"
    try:
        labels = [label.strip() for value in request.POST.getlist("labels") for label in value.split(",") if label.strip()]
        add_review(session, request.user, request.POST.get("verdict", ""), labels,
                   request.POST.get("score", ""), request.POST.get("comment", ""),
                   seqs_from(request.POST.get("seqs", "")), queue=queue)
    except DomainError as exc:
        flash.error(request, f"Not saved: {exc.detail}")
        return redirect(back)
    flash.success(request, f"Review of {session.key} saved.")
    if queue is not None and request.POST.get("next"):
        return _next(request, queue)
    return redirect(back)


def _next(request: HttpRequest, queue) -> HttpResponse:
    session = next_in_queue(queue, request.user)
    if session is None:
        flash.info(request, f"Queue “{queue.name}” is done: every session that matches it has a review.")
        return redirect("queue", queue_id=queue.pk)
    return redirect(session.get_absolute_url() + f"?queue={queue.pk}")


@login_required
@require_POST
def queue_next(request: HttpRequest, queue_id: int) -> HttpResponse:
    """The queue's next session for this reviewer, claimed for them (their own claim first, if they hold
    one); with `leave=KEY`, their claim on that session is given back first."""
    queue = access.get_queue_for(request.user, queue_id, "review")
    left = request.POST.get("leave", "")
    if left:
        session = access.get_session_for(request.user, queue.project.name, left, "review")
        release_claim(queue, session, request.user)
        flash.info(request, f"{session.key} is back in the queue for someone else.")
        return redirect("queue", queue_id=queue.pk)
    return _next(request, queue)


@login_required
@require_http_methods(["GET", "POST"])
def queue_list(request: HttpRequest) -> HttpResponse:
    """The review queues of the user's projects, each with its progress; editors make new ones (a name, the
    sessions list's query string as the filter, the labels its reviews may carry)."""
    projects = list(access.projects_for(request.user))
    managed = [p for p in projects if access.can(request.user, p, "manage_queues")]
    if request.method == "POST":
        project = access.get_project_for(request.user, request.POST.get("project", ""), "manage_queues")
        labels = [label for label in re.split(r"[,\n]", request.POST.get("labels", "")) if label.strip()]
        try:
            queue = create_queue(project, request.user, request.POST.get("name", ""), request.POST.get("filter", ""),
                                 labels)
        except DomainError as exc:
            flash.error(request, f"Not made: {exc.detail}")
            kept = {"project": project.name, "filter": request.POST.get("filter", "")[:2000]}
            return redirect(reverse("queues") + "?" + urlencode(kept))
        flash.success(request, f"Queue “{queue.name}” made.")
        return redirect("queue", queue_id=queue.pk)
    queues = [(queue, queue_progress(queue)) for p in projects for queue in project_queues(p)]
    return render(request, "sessions/queues.html", {
        "queues": queues, "managed": managed, "filter": request.GET.get("filter", "").lstrip("?"),
        "chosen_project": request.GET.get("project", ""),
    })


@login_required
@require_GET
def queue_detail(request: HttpRequest, queue_id: int) -> HttpResponse:
    """One queue: how far its review has come (reviewed of matching, by verdict, by reviewer), its latest
    reviews, "Next" and the CSV of its reviews."""
    queue = access.get_queue_for(request.user, queue_id, "view")
    progress = queue_progress(queue)
    recent = latest_reviews(queue, RECENT)
    return render(request, "sessions/queue.html", {
        "queue": queue, "progress": progress, "recent": recent,
        "can_review": access.can(request.user, queue.project, "review"),
    })


@login_required
@require_GET
def queue_csv(request: HttpRequest, queue_id: int) -> HttpResponse:
    """Every review of the queue as CSV, streamed."""
    return reviews_csv_response(access.get_queue_for(request.user, queue_id, "export"))


# --- masking of personal data -----------------------------------------------------------------------


def patterns_text(masking: dict) -> str:
    return "\n".join(f"{p.get('name', '')}: {p.get('pattern', '')}" for p in (masking or {}).get("patterns", []))


def patterns_from(text: str) -> list[dict]:
    """`name: pattern` a line, as the settings page's box holds them."""
    found = []
    for line in (text or "").splitlines():
        if line.strip():
            name, _, pattern = line.partition(":")
            found.append({"name": name.strip(), "pattern": pattern.strip()})
    return found


@login_required
@require_http_methods(["GET", "POST"])
def project_settings(request: HttpRequest, project: str) -> HttpResponse:
    """A project's settings for its admins: masking of personal data for viewers, and its pinned facts."""
    here = access.get_project_for(request.user, project, "manage_members")
    typed = None
    if request.method == "POST":
        typed = request.POST.get("patterns", "")
        try:
            pins = clean_pinned(pinned_from(request.POST.get("pinned", "")))  # checked before anything is saved
            set_masking(here, {"enabled": request.POST.get("enabled") == "1", "patterns": patterns_from(typed),
                               "at_capture": request.POST.get("at_capture") == "1"})
            set_pinned_facts(here, pins)
        except DomainError as exc:
            flash.error(request, f"Not saved: {exc.detail}")
        else:
            state = "on" if here.masking.get("enabled") else "off"
            flash.success(request, f"Masking of personal data is {state} for {here.name}.")
            return redirect("project_settings", project=here.name)
    return render(request, "sessions/project_settings.html", {
        "project": here, "masking": here.masking or {},
        "patterns": typed if typed is not None else patterns_text(here.masking),
        "pinned": request.POST.get("pinned", "") if typed is not None else pinned_text(here.pinned_facts),
    })


@login_required
@require_POST
def reveal(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """Show the session's personal data unmasked to one viewer (editors and admins), recorded as an event."""
    session = access.get_session_for(request.user, project, key, "edit_messages")
    try:
        viewer = reveal_to(session, request.user, request.POST.get("viewer", ""))
    except DomainError as exc:
        flash.error(request, exc.detail)
    else:
        flash.success(request, f"{viewer.get_username()} now sees this session's personal data unmasked.")
    return redirect(session.get_absolute_url() + "#reviews")


# --- pinned facts -------------------------------------------------------------------------------------


def pinned_text(items: list[dict]) -> str:
    """Pinned facts as the dashboard's boxes hold them: `name: /pattern/` or `name: value`, one a line."""
    return "\n".join(f"{item['name']}: /{item['pattern']}/" if "pattern" in item else f"{item['name']}: {item['value']}"
                     for item in items or ())


def pinned_from(text: str) -> list[dict]:
    found = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        name, _, rest = line.partition(":")
        rest = rest.strip()
        if len(rest) >= 2 and rest.startswith("/") and rest.endswith("/"):
            found.append({"name": name.strip(), "pattern": rest[1:-1]})
        else:
            found.append({"name": name.strip(), "value": rest})
    return found


@login_required
@require_POST
def session_pinned_facts(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """Set the session's own pinned facts (editors), as PUT /sessions/{key} does."""
    session = access.get_session_for(request.user, project, key, "compact")
    try:
        update_session(session.project, session.key, {"pinned_facts": pinned_from(request.POST.get("pinned", ""))},
                       actor(request))
    except DomainError as exc:
        flash.error(request, f"Not saved: {exc.detail}")
    else:
        flash.success(request, "Pinned facts saved: the next checkpoints carry them.")
    return redirect(session.get_absolute_url() + "#pinned-facts")
