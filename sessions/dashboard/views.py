"""The dashboard: server-rendered pages and the htmx fragments that refresh parts of them. Every view
checks access through sessions.access.permissions; the work is done by the domain modules."""

from urllib.parse import urlencode, urlsplit

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from sessions.access import permissions as access
from sessions.access import rate_limits
from sessions.access.api_keys import create_api_key, keys_of, revoke
from sessions.access.dashboard_limits import heavy
from sessions.access.masking_policy import request_masking, seeks_masked
from sessions.access.members import members_of, remove_member, set_member
from sessions.context.compare import compare_sides, shown_text, side_of
from sessions.context.explain import checkpoints_of, page_layout
from sessions.context.exports import export_response
from sessions.context.facts import not_in_summary
from sessions.context.pinned_status import (
    MAX_SIGHTINGS,
    PAGE_BUDGET,
    checkpoint_pins,
    pinned_rows,
    refresh_pinned,
)
from sessions.context.recorded_input import RAW_LOG
from sessions.context.trace import trace
from sessions.context.waiting import compact_and_wait, user_holder
from sessions.context.what_if import preview_compaction
from sessions.dashboard.forms import PAGE_SIZES, CompactionSettingsForm, MessageSearchForm, SessionListForm
from sessions.dashboard.inspection import (
    backlog_left,
    chart_svg_data,
    checkpoint_as_of,
    checkpoint_numbers,
    compaction_diff,
    input_window,
    latest_compaction_run,
    raw_window,
    session_view,
    whole_message,
)
from sessions.dashboard.preferences import open_panels
from sessions.dashboard.request_timeline import request_diff, request_timeline
from sessions.dashboard.review_views import pinned_text, review_panel
from sessions.errors import DomainError
from sessions.ingest.message_edits import update_message
from sessions.ingest.next_request import sent_request
from sessions.ingest.session_store import update_session
from sessions.models import CompactionRun, Membership, Role, Session
from sessions.store.events import actor, event_record_json, newest_events
from sessions.store.listing import list_page
from sessions.store.notes import (
    add_note,
    change_tag,
    delete_note,
    edit_note,
    parse_tags,
    session_notes,
    set_tags,
    tag_names,
)
from sessions.store.search import Snippet, outside_masked_values
from sessions.store.search import search as search_hits


def _int(value, default=None, *, minimum=0, maximum=2_000_000_000):
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if minimum <= number <= maximum else default


def session_url(session: Session, **params) -> str:
    url = session.get_absolute_url()
    if params:
        url += "?" + urlencode({k: v for k, v in params.items() if v is not None})
    return url


# --- sessions list -------------------------------------------------------------------------------


@login_required
@require_GET
@heavy(when="q")
def session_list(request: HttpRequest) -> HttpResponse:
    form = SessionListForm(request.GET)
    filters = form.filters()
    size = form.page_size()
    # Personal data in the words sought: one who sees it masked finds nothing by it.
    projects = [] if seeks_masked(request, filters.q) else access.project_ids_for(request.user)
    page = list_page(projects, filters, request.GET.get("page"), size, with_tags=True, with_reviews=True)
    rows = []
    for s in page.object_list:
        compaction = s.compaction_settings()
        rows.append({"session": s, "compaction": compaction, "url": session_url(s),
                     "percent": round(100 * s.input_tokens / max(compaction.max_tokens, 1))})
    query = request.GET.copy()
    query.pop("page", None)
    unsorted = query.copy()
    unsorted.pop("sort", None)
    kept = query.copy()
    for name in ("project", "sort", "column", "size"):
        kept.pop(name, None)
    context = {
        "taggable": access.project_ids_where(request.user, "annotate"),
        "review_fields": [form[name] for name in ("source", "reviewed", "verdict")],
        "can_make_queues": bool(access.project_ids_where(request.user, "manage_queues")),
        "queue_filter": kept.urlencode(),
        "form": form,
        "page": page,
        "rows": rows,
        "sort": filters.sort,
        "column": ".".join(filters.column),
        "meta_filters": [v for v in request.GET.getlist("meta") if v.strip()],
        "size": size,
        "sizes": PAGE_SIZES,
        "projects": access.projects_for(request.user),
        "params": request.GET,
        "query": query.urlencode(),
        "unsorted_query": unsorted.urlencode(),
    }
    template = "sessions/_session_rows.html" if request.htmx and request.htmx.target == "session-rows" else "sessions/list.html"
    return render(request, template, context)


# --- session page --------------------------------------------------------------------------------


def _basis(request, session) -> str | None:
    """The model input's basis the page is asked for: ctxweb's own rules (`?basis=raw_log`) on a session
    rebuilt from recorded requests; otherwise the session's own (None)."""
    return RAW_LOG if request.GET.get("basis") == RAW_LOG and session.request_count else None


def _as_of(request, session):
    as_of = _int(request.GET.get("as_of"), maximum=session.message_count)
    checkpoint_id = _int(request.GET.get("as_of_checkpoint"))
    if checkpoint_id:
        checkpoint_seq = checkpoint_as_of(session, checkpoint_id)
        if checkpoint_seq is not None:
            as_of = checkpoint_seq
    return as_of


@login_required
@require_GET
@heavy(when="trace")
def session_detail(request: HttpRequest, project: str, key: str) -> HttpResponse:
    session = access.get_session_for(request.user, project, key)
    as_of = _as_of(request, session)
    target = _int(request.GET.get("seq"), minimum=1, maximum=session.message_count)
    asked = (request.GET.get("seq") or "").strip()
    missing_seq = asked if asked and target is None else ""
    # "As of" opens the raw log where that input ended, unless a message was asked for.
    basis = _basis(request, session)
    view = session_view(session, as_of=as_of, around=target if target is not None else as_of, basis=basis)
    events, more_events = newest_events(session)
    return render(request, "sessions/detail.html", {
        **review_panel(request, session),
        "pinned_text": pinned_text(session.pinned_facts),
        "pinned_count": len(session.project.pinned_facts or ()) + len(session.pinned_facts or ()),
        **_pinned(session, view["checkpoints"]),
        "masked": request_masking(request) is not None,
        "session_notes": session_notes(session),
        "tags": tag_names(session),
        "session": session,
        "perms": access.permissions(request.user, session.project),
        "as_of": as_of,
        "basis": basis,
        "as_of_checkpoint": _int(request.GET.get("as_of_checkpoint")),
        "target": target,
        "missing_seq": missing_seq,
        "events": events,
        "more_events": more_events,
        "checkpoint_numbers": {c.pk: c.number for c in view["checkpoints"]},
        "lost_facts": not_in_summary(view["checkpoints"], view["layout"].checkpoint),
        "timeline": request_timeline(session),
        "open_panels": open_panels(request.user),
        **(_traced(session, traced, request) if (traced := request.GET.get("trace")) is not None else {}),
        "q": traced or "",
        **view,
    })


def _pinned(session: Session, checkpoints) -> dict:
    """The session page's pinned values, read up to its latest message first."""
    if not (session.project.pinned_facts or session.pinned_facts):
        return {}
    read = refresh_pinned(session, budget=PAGE_BUDGET)
    return {"pinned_rows": pinned_rows(session, sorted(checkpoints, key=lambda c: c.last_seq)),
            "pinned_lost": read.lost, "pinned_max": MAX_SIGHTINGS,
            "pinned_read": read.read_through if read.read_through < read.messages else None}


def _checkpoint_pins(session: Session, checkpoint) -> list:
    if not (session.project.pinned_facts or session.pinned_facts):
        return []
    refresh_pinned(session, budget=PAGE_BUDGET)
    return checkpoint_pins(checkpoint)


def _laid_out(request: HttpRequest, project: str, key: str):
    """What the session page's fragments start from: the session, the as-of point asked for, its
    checkpoints and the model input's layout."""
    session = access.get_session_for(request.user, project, key)
    as_of = _as_of(request, session)
    checkpoints = checkpoints_of(session)
    return session, as_of, checkpoints, page_layout(session, checkpoints, as_of, _basis(request, session))


@login_required
@require_GET
def raw_log_fragment(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """More of the raw log: before or after a seq (the 'load earlier/later' buttons)."""
    session, as_of, checkpoints, layout = _laid_out(request, project, key)
    after = _int(request.GET.get("after"))
    before = _int(request.GET.get("before"))
    if after is None and before is None:
        raise Http404("Say after= or before=.")
    window = raw_window(session, layout, checkpoints, after=after, before=before)
    return render(request, "sessions/_raw_window.html", {
        "session": session, "raw": window, "direction": "later" if after is not None else "earlier",
        "as_of": as_of, "perms": access.permissions(request.user, session.project), "layout": layout,
        "basis": _basis(request, session),
    })


@login_required
@require_GET
def model_input_fragment(request: HttpRequest, project: str, key: str) -> HttpResponse:
    session, as_of, checkpoints, layout = _laid_out(request, project, key)
    before = _int(request.GET.get("before"))
    window = input_window(session, layout, checkpoints, before=before)
    return render(request, "sessions/_input_window.html", {"session": session, "input": window, "as_of": as_of,
                                                           "layout": layout, "basis": _basis(request, session)})


@login_required
@require_GET
def live_fragment(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """Polled every few seconds: messages stored since `after`, with the figures they changed."""
    session = access.get_session_for(request.user, project, key)
    after = _int(request.GET.get("after"), 0)
    if session.message_count <= after:
        return HttpResponse(status=204)
    basis = _basis(request, session)
    view = session_view(session, basis=basis)
    window = raw_window(session, view["layout"], view["checkpoints"], after=after, limit=200)
    return render(request, "sessions/_live.html", {
        "session": session, "raw": window, "perms": access.permissions(request.user, session.project),
        "basis": basis, **{
            k: view[k] for k in ("layout", "input", "meter", "compaction", "checkpoints")},
    })


@login_required
@require_GET
def compaction_run_fragment(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """The run box, polled while the page's run (`run`) is queued or running. Once that run has finished
    (or another is the latest: the next run of a backlog), the page is loaded again, so its meter, chart,
    checkpoints and run box all show what is stored."""
    session = access.get_session_for(request.user, project, key)
    latest = latest_compaction_run(session)
    if latest is None or latest.pk != _int(request.GET.get("run"), 0) or latest.state not in CompactionRun.ACTIVE:
        return HttpResponseClientRefresh()
    return render(request, "sessions/_compaction_run.html", {
        "session": session, "run": latest, "backlog_left": backlog_left(session, session.compaction_settings())})


@login_required
@require_GET
def chart_fragment(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """The size chart; on a page shown "as of" a message, that model input is marked on it."""
    session = access.get_session_for(request.user, project, key)
    as_of = _as_of(request, session)
    basis = _basis(request, session)
    shown = page_layout(session, checkpoints_of(session), as_of, basis) if as_of is not None else None
    return render(request, "sessions/_chart.html", {"session": session,
                                                    "chart": chart_svg_data(session, as_of=shown, basis=basis)})


@login_required
@require_GET
def events_fragment(request: HttpRequest, project: str, key: str) -> HttpResponse:
    session = access.get_session_for(request.user, project, key)
    events, more_events = newest_events(session, before=_int(request.GET.get("before"), maximum=2**62))
    return render(request, "sessions/_events.html", {
        "session": session, "events": events, "more_events": more_events,
        "checkpoint_numbers": checkpoint_numbers(session),
    })


@login_required
@require_GET
def message_full(request: HttpRequest, project: str, key: str, seq: int) -> HttpResponse:
    """The whole body of one message, which the pages cut when it is long (message_sizes.for_page): the
    one request that reads a message whatever its size, and only that one message."""
    session = access.get_session_for(request.user, project, key)
    message = access.get_message_for(request.user, session, seq)
    return render(request, "sessions/_message_full.html", {"session": session, **whole_message(message)})


@login_required
@require_GET
def event_record(request: HttpRequest, project: str, key: str, event_id: int) -> JsonResponse:
    """One event whole, in the shape the API's event list gives it: where the pages link for what they cut."""
    session = access.get_session_for(request.user, project, key)
    event = access.get_event_for(request.user, session, event_id)
    return JsonResponse(event_record_json(event), json_dumps_params={"ensure_ascii": False})


@login_required
@require_GET
@heavy
def trace_fragment(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """The trace box's answer: where a string is in the session and which summary lost it."""
    session = access.get_session_for(request.user, project, key)
    query = request.GET.get("q", "")
    page = session_url(session, trace=query)
    if not request.htmx or request.htmx.history_restore_request:
        return redirect(page)
    response = render(request, "sessions/_trace.html", {"session": session, "q": query, **_traced(session, query, request)})
    # The address bar shows the session page with this trace, so going back to it shows it again.
    response["HX-Push-Url"] = page
    return response


def _traced(session: Session, query: str, request: HttpRequest) -> dict:
    if seeks_masked(request, query):
        return {"error": "This is personal data, which is masked for you: it is not traced."}
    try:
        return {"trace": trace(session, query)}
    except DomainError as exc:
        return {"error": exc.detail}


@login_required
@require_GET
def checkpoint_diff(request: HttpRequest, project: str, key: str, checkpoint_id: int) -> HttpResponse:
    """What a compaction changed: what left the input, what replaced it, what stayed."""
    session = access.get_session_for(request.user, project, key)
    checkpoint = access.get_checkpoint_for(request.user, session, checkpoint_id)
    return render(request, "sessions/checkpoint_diff.html", {
        "session": session,
        "checkpoints": checkpoints_of(session),
        "pinned_here": _checkpoint_pins(session, checkpoint),
        **vars(compaction_diff(session, checkpoint)),
    })


@login_required
@require_GET
def request_view(request: HttpRequest, project: str, key: str, event_id: int) -> HttpResponse:
    """What one REQUEST_BUILT sent: rebuilt from the event's figures and the stored messages."""
    session = access.get_session_for(request.user, project, key)
    sent = sent_request(session, event_id)
    if sent is None:
        raise Http404("No such request.")
    return render(request, "sessions/request.html", {"session": session, **vars(sent)})


@login_required
@require_GET
def recorded_request_diff(request: HttpRequest, project: str, key: str, number: int) -> HttpResponse:
    """What changed from recorded request `number - 1` to `number`, for sessions rebuilt from requests:
    the raw messages the application dropped, those it added, and the messages of its own it sent."""
    session = access.get_session_for(request.user, project, key)
    diff = request_diff(session, number)
    if diff is None:
        raise Http404("No such recorded request.")
    return render(request, "sessions/recorded_diff.html", {"session": session, "diff": diff})


# --- actions -------------------------------------------------------------------------------------


def _back(request, url):
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _settings_form(request, refused: str) -> CompactionSettingsForm | None:
    """The compaction settings posted (Compact now, the What if… panel), or None after saying why not."""
    form = CompactionSettingsForm(request.POST)
    if form.is_valid():
        return form
    flash.error(request, f"{refused}: {form.problem()}")
    return None


@login_required
@require_POST
def compact_now(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """Compact now, with the session's settings or those of the What if… panel."""
    session = access.get_session_for(request.user, project, key, "compact")
    if (form := _settings_form(request, "Not compacted")) is None:
        return _back(request, session_url(session))
    force, overrides = form.cleaned_data["force"], form.overrides()
    try:
        # One waiting request per user (sessions/context/waiting.py).
        # A backlog larger than one run's budget is worked off on the worker, run after run.
        run, outcome = compact_and_wait(session, actor(request), user_holder(request.user), backlog=True,
                                        force=force, **overrides)
    except DomainError as exc:
        flash.error(request, f"Not compacted: {exc.detail}")
        return _back(request, session_url(session))
    if outcome is None:
        flash.info(request, f"Compaction run {run.pk} is {run.state} on the background worker; this page shows "
                            "its state, and its checkpoint when it is done.")
        return _back(request, session_url(session))
    figures = outcome.figures()
    if outcome.status == "completed":
        more = ""
        if figures["still_over_threshold"] and outcome.plan.budget_reached:
            more = (" It is still over max_tokens: the background worker goes on, run after run, until it is "
                    "under; this page shows how far it is.")
        flash.success(request, f"Compaction completed: checkpoint {outcome.checkpoint.number} covers messages "
                               f"#{outcome.checkpoint.first_seq}–#{outcome.checkpoint.last_seq}; the model input went "
                               f"from {figures['tokens_before']} to {figures['tokens_after']} tokens.{more}")
    elif outcome.status == "skipped":
        why = outcome.explanation
        flash.warning(request, f"Compaction skipped ({outcome.reason}); nothing changed.{' ' + why if why else ''}")
    else:
        flash.error(request, f"Compaction failed: {outcome.error}. Nothing changed.")
    return _back(request, session_url(session))


@login_required
@require_GET
@heavy
def what_if(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """The What if… panel's preview: what a compaction with the settings given would do. Stores nothing,
    so anyone who may see the session may ask."""
    session = access.get_session_for(request.user, project, key)
    form = CompactionSettingsForm(request.GET)
    context = {"session": session, "perms": access.permissions(request.user, session.project),
               "compaction": session.compaction_settings(), "form": form}
    status = 200
    if not form.is_valid():
        context["error"], status = form.problem(), 422
    else:
        try:
            context["preview"] = preview_compaction(session, force=form.cleaned_data["force"], **form.overrides())
        except DomainError as exc:
            context["error"], status = exc.detail, exc.status
    # Without htmx (no script), the panel and its answer on a page of their own.
    template = "sessions/_what_if_result.html" if request.htmx else "sessions/what_if.html"
    return render(request, template, context, status=status)


@login_required
@require_POST
def save_compaction_settings(request: HttpRequest, project: str, key: str) -> HttpResponse:
    """The What if… panel's settings become the session's own, through the same update as PUT /sessions/{key}."""
    session = access.get_session_for(request.user, project, key, "compact")
    if (form := _settings_form(request, "Settings not saved")) is None:
        return _back(request, session_url(session))
    try:
        session, _ = update_session(session.project, session.key, {"compaction": form.overrides()}, actor(request))
    except DomainError as exc:
        flash.error(request, f"Settings not saved: {exc.detail}")
        return _back(request, session_url(session))
    compaction = session.compaction_settings()
    flash.success(request, f"Saved: this session now compacts above max_tokens {compaction.max_tokens:,}, keeps "
                           f"keep_recent_tokens {compaction.keep_recent_tokens:,} and summarizes with "
                           f"{compaction.summarizer}.")
    return _back(request, session_url(session))


@login_required
@require_POST
def toggle_include(request: HttpRequest, project: str, key: str, seq: int) -> HttpResponse:
    session = access.get_session_for(request.user, project, key, "edit_messages")
    if request.POST.get("include") not in ("0", "1"):
        raise BadRequest("Say include=0 (hide the message from the model input) or include=1 (include it).")
    include = request.POST.get("include") == "1"
    try:
        update_message(session.project, session.key, seq, {"include_in_messages": include}, actor(request))
    except DomainError as exc:
        raise Http404(exc.detail) from exc
    flash.success(request, f"Message #{seq} is now {'included in' if include else 'hidden from'} the model input.")
    return _back(request, session_url(session, seq=seq) + f"#m-{seq}")


@login_required
@require_GET
@heavy
def export_download(request: HttpRequest, project: str, key: str, fmt: str) -> HttpResponse:
    session = access.get_session_for(request.user, project, key, "export")
    if fmt not in ("json", "jsonl", "markdown"):
        raise Http404("Exports are json, jsonl or markdown.")
    return export_response(session, fmt)


# --- API keys ------------------------------------------------------------------------------------


NEW_SECRET = "ctxweb_new_api_key_secret"  # in the user's session between a key's creation and its display


@login_required
@never_cache
def api_keys(request: HttpRequest) -> HttpResponse:
    """Post/redirect/get: a created key's secret waits in the user's session for the page shown after the
    redirect, which shows it once (never cached), so a refresh neither creates a second key nor shows it
    again."""
    projects = [p for p in access.projects_for(request.user) if access.can(request.user, p, "manage_keys")]
    if not projects:
        raise Http404("You manage no project's API keys.")
    if request.method == "POST":
        project = access.get_project_for(request.user, request.POST.get("project", ""), "manage_keys")
        try:
            key, secret = create_api_key(project, request.POST.get("name", ""), request.user,
                                         masked=request.POST.get("masked") == "1")
        except DomainError as exc:
            flash.error(request, exc.detail)
        else:
            request.session[NEW_SECRET] = secret
            flash.success(request, f"API key {key.name!r} created for {project.name}. Copy the secret now: it is not shown again.")
            return redirect("api_keys")
    new_secret = request.session.pop(NEW_SECRET, None) if request.method == "GET" else None
    return render(request, "sessions/api_keys.html", {
        "keys": keys_of(projects), "projects": projects, "new_secret": new_secret, "rate_limits": rate_limits.buckets(),
    })


@login_required
@require_POST
def api_key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    key = access.get_api_key_for(request.user, key_id)
    revoke(key)
    flash.success(request, f"API key {key.name!r} ({key.prefix}…) is revoked.")
    return redirect("api_keys")



# --- search --------------------------------------------------------------------------------------


@login_required
@require_GET
@heavy(when="q")
def search(request: HttpRequest) -> HttpResponse:
    form = MessageSearchForm(request.GET)
    projects = list(access.projects_for(request.user))
    chosen = form.valid().get("project")
    filters = form.filters([p.pk for p in projects if not chosen or p.name == chosen])
    query = form.query()
    results = search_hits(query, filters, page=_int(request.GET.get("page"), 1, minimum=1, maximum=1000)) if query else None
    if results is not None and (masking := request_masking(request)) is not None:
        results = outside_masked_values(results, query, masking)
    paging = request.GET.copy()
    paging.pop("page", None)
    context = {"form": form, "results": results, "q": query, "params": request.GET, "projects": projects,
               "roles": Role.values, "query": paging.urlencode()}
    template = "sessions/_search_results.html" if request.htmx and request.htmx.target == "search-results" else "sessions/search.html"
    return render(request, template, context)


# --- compare two conversations ------------------------------------------------------------------

SHOWN_CHARS = 2000  # of each message's text on the comparison page; the API gives it whole
ROWS_PER_PAGE = 200  # of a comparison on its page: two long runs would otherwise make a page of 4,000 messages


def _compared(message, marks) -> dict | None:
    """A message of a comparison row as the page shows it: its text (cut at SHOWN_CHARS) with the words
    that differ marked, escaped."""
    if message is None:
        return None
    text = shown_text(message)
    cut = text[:SHOWN_CHARS]
    shown = Snippet(cut + ("…" if len(text) > SHOWN_CHARS else ""), [(a, min(b, len(cut))) for a, b in marks if a < len(cut)])
    return {"seq": message.seq, "role": message.role, "kind": message.kind, "html": shown.as_html()}


@login_required
@require_GET
@heavy(when="b")
def compare_page(request: HttpRequest) -> HttpResponse:
    """Two sides of one project side by side, aligned turn by turn (sessions.context.compare): each a
    session's raw log, one of its recorded requests (`a_request`) or its model input as of a message
    (`a_as_of`). Without `b`, a form to pick what to compare `a` with; `b` may be `a` itself."""
    project, a, b = (request.GET.get(name, "").strip() for name in ("project", "a", "b"))
    chosen = {name: _int(request.GET.get(name), minimum=0 if name.endswith("as_of") else 1)
              for name in ("a_request", "a_as_of", "b_request", "b_as_of")}
    first = access.get_session_for(request.user, project, a) if a else None
    context = {"project": project, "a": a, "b": b, "first": first, **chosen}
    if first is not None and b:
        second = first if b == a else access.get_session_for(request.user, project, b)
        try:
            comparison = compare_sides(side_of(first, chosen["a_request"], chosen["a_as_of"]),
                                       side_of(second, chosen["b_request"], chosen["b_as_of"]))
        except DomainError as exc:
            context["problem"] = exc.detail
        else:
            context.update(comparison=comparison, **_row_page(request, comparison))
    return render(request, "sessions/compare.html", context)


@login_required
@require_POST
def compare_ticked(request: HttpRequest) -> HttpResponse:
    """The two sessions ticked in the sessions list (the tag form's checkboxes), on the comparison page."""
    pks = [_int(pk, minimum=1) for pk in request.POST.getlist("session")]
    if len(pks) != 2 or None in pks or pks[0] == pks[1]:
        flash.error(request, "Tick exactly two sessions to compare them.")
        return redirect("sessions")
    first, second = access.get_sessions_for(request.user, pks)
    if first.project_id != second.project_id:
        flash.error(request, "Only two sessions of one project can be compared.")
        return redirect("sessions")
    return redirect(reverse("compare") + "?" + urlencode({"project": first.project.name, "a": first.key, "b": second.key}))


def _row_page(request: HttpRequest, comparison) -> dict:
    """The comparison's rows from `?row=N` (by default the page that holds the first difference), at most
    ROWS_PER_PAGE of them, with the query strings of the pages before and after."""
    total, diverged = len(comparison.rows), comparison.diverged_at

    def page_of(row: int) -> int:
        return min(row, max(0, total - 1)) // ROWS_PER_PAGE * ROWS_PER_PAGE

    def at(row: int) -> str:
        query = request.GET.copy()
        query["row"] = str(row)
        return "?" + query.urlencode()

    start = page_of(_int(request.GET.get("row"), page_of(diverged or 0)))
    end = min(total, start + ROWS_PER_PAGE)
    rows = [{"index": index, "a": _compared(row.a, row.a_marks), "b": _compared(row.b, row.b_marks), "same": row.same}
            for index, row in enumerate(comparison.rows[start:end], start)]
    return {"rows": rows, "row_count": total, "first_row": start + 1, "last_row": end,
            "earlier": at(max(0, start - ROWS_PER_PAGE)) if start else None,
            "later": at(end) if end < total else None,
            "diverged_link": None if diverged is None else (
                "" if start <= diverged < end else at(page_of(diverged))) + f"#row-{diverged}"}


# --- notes and tags ------------------------------------------------------------------------------


def _notes_back(request, session, seq):
    url = session_url(session, seq=seq) + f"#m-{seq}" if seq else session_url(session) + "#notes"
    return _back(request, url)


@login_required
@require_POST
def note_add(request: HttpRequest, project: str, key: str) -> HttpResponse:
    session = access.get_session_for(request.user, project, key, "annotate")
    seq = _int(request.POST.get("seq"), minimum=1)
    try:
        add_note(session, request.user, request.POST.get("text", ""), seq)
    except DomainError as exc:
        flash.error(request, exc.detail)
    return _notes_back(request, session, seq)


@login_required
@require_POST
def note_edit(request: HttpRequest, project: str, key: str, note_id: int) -> HttpResponse:
    session = access.get_session_for(request.user, project, key, "annotate")
    note = access.get_note_for(request.user, session, note_id)
    try:
        if request.POST.get("delete"):
            delete_note(note, request.user)
        else:
            edit_note(note, request.user, request.POST.get("text", ""))
    except DomainError as exc:
        if exc.status == 403:
            raise PermissionDenied(exc.detail) from exc
        flash.error(request, exc.detail)
    return _notes_back(request, session, note.seq)


@login_required
@require_POST
def tags_set(request: HttpRequest, project: str, key: str) -> HttpResponse:
    session = access.get_session_for(request.user, project, key, "annotate")
    try:
        set_tags(session, request.user, parse_tags(request.POST.get("tags", "")))
    except DomainError as exc:
        flash.error(request, exc.detail)
    return _back(request, session_url(session))


@login_required
@require_POST
def bulk_tags(request: HttpRequest) -> HttpResponse:
    """Add a tag to, or remove it from, the sessions ticked in the sessions list: all of them or none."""
    action = request.POST.get("action")
    if action not in ("add", "remove"):
        raise BadRequest("Say action=add or action=remove.")
    pks = [_int(pk, minimum=1) for pk in request.POST.getlist("session")]
    if None in pks or len(pks) > 500:
        raise BadRequest("Sessions are named by their ids, at most 500 at a time.")
    # Back to the list as it was filtered: the query string of the list page the form was sent from,
    # rebuilt, so never another address.
    referer = urlsplit(request.headers.get("Referer", ""))
    same_list = referer.path == reverse("sessions") and url_has_allowed_host_and_scheme(
        request.headers.get("Referer", ""), allowed_hosts={request.get_host()}, require_https=request.is_secure())
    back = reverse("sessions") + ("?" + QueryDict(referer.query).urlencode() if same_list and referer.query else "")
    if not pks:
        flash.error(request, "Tick the sessions to tag first.")
        return _back(request, back)
    sessions = access.get_sessions_for(request.user, pks, "annotate")
    name = request.POST.get("tag", "").strip()
    try:
        changed = change_tag(sessions, request.user, name, add=action == "add")
    except DomainError as exc:
        flash.error(request, exc.detail)
        return _back(request, back)
    name = name.lower()
    done = "added to" if action == "add" else "removed from"
    flash.success(request, f"Tag “{name}” {done} {len(changed)} session{'' if len(changed) == 1 else 's'}"
                           + (f" ({len(sessions) - len(changed)} already {'had' if action == 'add' else 'lacked'} it)."
                              if len(changed) < len(sessions) else "."))
    return _back(request, back)


# --- members -------------------------------------------------------------------------------------


@login_required
def members(request: HttpRequest, project: str) -> HttpResponse:
    project_obj = access.get_project_for(request.user, project, "manage_members")
    if request.method == "POST":
        username = request.POST.get("username", "").strip()
        try:
            if request.POST.get("remove"):
                remove_member(project_obj, username)
                flash.success(request, f"{username} was removed from {project_obj.name}.")
            else:
                membership, _ = set_member(project_obj, username, request.POST.get("role", ""))
                flash.success(request, f"{username} is now {membership.role} of {project_obj.name}.")
        except DomainError as exc:
            flash.error(request, exc.detail)
        return redirect("members", project=project_obj.name)
    return render(request, "sessions/members.html", {"project": project_obj, "memberships": members_of(project_obj),
                                                     "roles": Membership.Role.values})
