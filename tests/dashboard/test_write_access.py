"""No crafted request reaches a write it is not allowed (staff actions need the right role).

Every URL pattern of the site is read from the urlconf and must be classified in ROUTES (or belong to
a namespace of NAMESPACES): a new view that is not classified fails
test_every_url_pattern_is_classified. Each write is then POSTed, with a payload that does change the
database when the right role sends it (test_the_role_a_write_needs_does_change_something proves it),
by every role below the one it needs, by a member of another project, logged out, without a CSRF
token, and, for POST-only writes, as a GET; every one of those must be refused and leave every table
as it was. Path parameters are filled from real seeded objects. Reads must change nothing and refuse
POST. The Django admin refuses non-staff users, and staff without permissions, whatever they POST;
the HTTP API never takes a dashboard login for an API key."""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import URLResolver, get_resolver, reverse
from django.utils import timezone

from sessions.access.api_keys import create_api_key
from sessions.context.compaction_runs import request_compaction
from sessions.ingest.next_request import build_request
from sessions.models import AuthFailure, ImportJob, Membership, Project, RecordedRequest
from sessions.store.notes import add_note
from sessions.store.review_queues import create_queue
from tests.conftest import IMMEDIATE_TASKS, seeded_for_module

from .conftest import build_other_session, build_story, create_user, make_client

VIEWER, EDITOR, ADMIN = Membership.Role.VIEWER, Membership.Role.EDITOR, Membership.Role.ADMIN
ROLES = [VIEWER, EDITOR, ADMIN]
# What the test's own log-ins change: the login sessions, and last_login (force_login stamps it).
NOT_COMPARED = {"sessions.Session"}
NOT_COMPARED_FIELDS = {"auth.User": {"last_login"}}


# --- the seeded world ----------------------------------------------------------------------------


class World:
    def __init__(self, story, project, other_project, other_session, make_user):
        self.story = story
        self.users = {role: make_user(role, project=project, role=role) for role in ROLES}
        # An admin of `other`: the most a member of another project can be.
        self.other_admin = make_user("other-admin", project=other_project, role=ADMIN)
        self.superuser = make_user("root", superuser=True)
        self.staff = make_user("staff")  # is_staff without any model permission
        get_user_model().objects.filter(pk=self.staff.pk).update(is_staff=True)
        self.note = add_note(story.session, self.users[VIEWER], "the viewer's note", story.result)
        self.api_key, _ = create_api_key(project, "app")
        self.request_event = build_request(project, story.session.key, messages=[
            {"role": "user", "content": "not stored", "persist": False}]).event
        self.compaction_run = request_compaction(story.session, "test")  # done by the instant test worker
        # A recorded request (issue 19) for its diff page; the session's request_count stays 0, so its
        # page shows no timeline.
        self.recorded_request = RecordedRequest.objects.create(
            session=story.session, number=1, external_id="span-1", source="otlp", started_at=timezone.now(),
            messages=[{"role": "user", "content": "recorded"}], message_seqs=[story.result])
        AuthFailure.objects.create(subject="192.0.2.1", scope=AuthFailure.Scope.LOGIN)
        self.other_session = other_session
        self.import_job = ImportJob.objects.create(project=project, file_name="stopped.jsonl", state="failed",
                                                   stored_name="default/stopped.upload", error="killed")
        # A review queue of every session of the project (sessions/store/review_queues.py).
        self.queue = create_queue(project, self.users[EDITOR], "everything", "", ["bad"])
        self.params = {
            "queue_id": self.queue.pk,
            "project": project.name,
            "key": story.session.key,
            "checkpoint_id": story.first.pk,
            "event_id": self.request_event.pk,
            "seq": story.result,
            "fmt": "json",
            "note_id": self.note.pk,
            "key_id": self.api_key.pk,
            "run_id": self.compaction_run.pk,
            "job_id": self.import_job.pk,
            "number": self.recorded_request.number,
        }

    def client(self, user=None, **defaults):
        return make_client(user, **defaults)


@pytest.fixture(scope="module")
def seeded_world(django_db_setup, django_db_blocker) -> World:
    """Built once for the module: every test reads it, or changes it inside its own transaction."""
    # Its compaction run is done at once, as the instant test worker does (tests/conftest.py).
    with seeded_for_module(django_db_blocker), override_settings(TASKS=IMMEDIATE_TASKS):
        project = Project.objects.get_or_create(name="default")[0]
        other_project = Project.objects.get_or_create(name="other")[0]
        yield World(build_story(project), project, other_project, build_other_session(other_project), create_user)


@pytest.fixture
def world(db, seeded_world) -> World:
    return seeded_world


def snapshot() -> dict:
    """Every row of every table, by model."""
    rows = {}
    for model in apps.get_models(include_auto_created=True):
        label = model._meta.label
        if label not in NOT_COMPARED:
            skip = NOT_COMPARED_FIELDS.get(label, set())
            rows[label] = [{k: v for k, v in row.items() if k not in skip}
                           for row in model._default_manager.order_by("pk").values()]
    return rows


def assert_unchanged(before: dict, what: str) -> None:
    after = snapshot()
    changed = sorted(label for label in before if before[label] != after[label])
    assert not changed, f"{what} changed {', '.join(changed)}"


# --- the classification --------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """A page, fragment or download: GET only, changes nothing."""

    query: dict = field(default_factory=dict)
    status: int = 200


@dataclass(frozen=True)
class Write:
    """A state-changing view and the least role that may use it. `payloads` are POST bodies that do
    change something when that role sends them."""

    role: str
    payloads: Callable[[World], list[dict]]
    post_only: bool = True  # False: a page that also answers GET with its form
    author_only: bool = False  # the note's author only (others of the project get 403)


@dataclass(frozen=True)
class Special:
    """Tested by the named test of this file."""

    test: str


def transcript() -> SimpleUploadedFile:
    chat = [{"role": "user", "content": "crafted import"}, {"role": "assistant", "content": "stored"}]
    return SimpleUploadedFile("crafted.json", json.dumps(chat).encode(), content_type="application/json")


ROUTES = {
    "sessions": Read(),
    "session": Read(),
    "session_log": Read(query={"after": 1}),
    "session_input": Read(),
    "session_live": Read(query={"after": 1}),
    "session_chart": Read(),
    "session_compaction_run": Read(query={"run": 1}),
    "session_events": Read(),
    "event_record": Read(),
    "message_full": Read(),
    "checkpoint_diff": Read(),
    # Without htmx the trace is the session page with it: a redirect there.
    "session_trace": Read(query={"q": "taxi"}, status=302),
    "request_view": Read(),
    "recorded_request_diff": Read(),
    "session_export": Read(),
    "search": Read(query={"q": "taxi"}),
    "compare": Read(query={"project": "default", "a": "story", "b": "story"}),
    "queues": Write(EDITOR, lambda w: [{"project": "default", "name": "crafted queue", "filter": "tag=x"}],
                    post_only=False),
    "queue": Read(),
    "queue_csv": Read(),
    "queue_next": Write(VIEWER, lambda w: [{}]),  # claims the queue's next session for the reviewer
    "project_settings": Write(ADMIN, lambda w: [{"enabled": "1", "patterns": "member: M-[0-9]{8}"}], post_only=False),
    "reveal": Write(EDITOR, lambda w: [{"viewer": w.users[VIEWER].username}]),
    "pinned_facts": Write(EDITOR, lambda w: [{"pinned": "order id: /W[0-9]{7}/"}]),
    "review_add": Write(VIEWER, lambda w: [{"verdict": "problem", "comment": "crafted", "seqs": "1"}]),
    "compare_ticked": Special("test_comparing_the_ticked_sessions_changes_nothing_and_needs_the_csrf_token"),
    "session_compact": Write(EDITOR, lambda w: [{"force": "1"}]),
    "session_what_if": Read(query={"keep_recent_tokens": "0", "force": "1"}),
    "session_save_compaction": Write(EDITOR, lambda w: [{"max_tokens": "3000", "keep_recent_tokens": "100"}]),
    "message_include": Write(EDITOR, lambda w: [{"include": "0"}]),
    "note_add": Write(VIEWER, lambda w: [{"text": "a crafted note", "seq": str(w.story.result)}]),
    "note_edit": Write(VIEWER, lambda w: [{"text": "crafted edit"}, {"delete": "1"}], author_only=True),
    "tags_set": Write(VIEWER, lambda w: [{"tags": "crafted"}]),
    "bulk_tags": Write(VIEWER, lambda w: [{"session": [str(w.story.session.pk)], "tag": "crafted", "action": "add"}]),
    "api_keys": Write(ADMIN, lambda w: [{"project": "default", "name": "crafted key"}], post_only=False),
    "api_key_revoke": Write(ADMIN, lambda w: [{}]),
    "members": Write(ADMIN, lambda w: [{"username": "viewer", "role": "admin"},
                                       {"username": "editor", "remove": "1"}], post_only=False),
    "import": Write(EDITOR, lambda w: [{"project": "default", "format": "auto", "files": [transcript()]}],
                    post_only=False),
    # An import's page shows what was imported: for those who may import, not viewers (403).
    "import_job": Read(status=403),
    "import_job_retry": Write(EDITOR, lambda w: [{}]),
    "login": Special("test_the_log_in_pages_need_the_csrf_token"),
    "admin/login/": Special("test_the_log_in_pages_need_the_csrf_token"),
    "logout": Special("test_logging_out_is_post_only_and_needs_the_csrf_token"),
    "panel_state": Special("test_the_panels_a_user_left_open_are_their_own_and_need_the_csrf_token"),
    "^api/(?P<rest>.*)$": Special("test_unknown_api_paths_are_a_json_404_and_change_nothing"),
    "otlp_traces": Special("test_the_otlp_receiver_never_takes_a_dashboard_login_for_a_key"),
}
NAMESPACES = {
    "admin": "test_the_admin_refuses_every_post_from_non_staff_and_staff_without_permissions",
    "api": "test_the_api_never_takes_a_dashboard_login_for_a_key",
}


@dataclass(frozen=True)
class Route:
    key: str  # the url name, or the pattern itself when it has none
    namespace: str | None
    route: str  # the full pattern, prefixes included
    params: tuple[str, ...]

    def url(self, world: World, **override) -> str:
        values = {**world.params, **override}

        def fill(match):
            name = match.group(1)
            assert name in values, f"{self.key}: no seeded value for path parameter {name!r}"
            return str(values[name])

        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", fill, self.route)


def all_routes() -> list[Route]:
    routes = []

    def names(pattern) -> tuple[str, ...]:
        converters = getattr(pattern.pattern, "converters", None)
        return tuple(converters) if converters is not None else tuple(pattern.pattern.regex.groupindex)

    def walk(patterns, namespace, prefix, prefix_params):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):  # an include(): its own parameters come first
                walk(pattern.url_patterns, pattern.namespace or namespace, prefix + str(pattern.pattern),
                     prefix_params + names(pattern))
                continue
            route = prefix + str(pattern.pattern)
            key = f"{namespace}:{pattern.name}" if namespace and pattern.name else pattern.name or route
            routes.append(Route(key, namespace, route, prefix_params + names(pattern)))

    walk(get_resolver().url_patterns, None, "", ())
    return routes


ALL = all_routes()
DASHBOARD = [r for r in ALL if r.namespace is None]
WRITES = [pytest.param(r, id=r.key) for r in DASHBOARD if isinstance(ROUTES.get(r.key), Write)]
POST_ONLY = [p for p in WRITES if ROUTES[p.values[0].key].post_only]
READS = [pytest.param(r, id=r.key) for r in DASHBOARD if isinstance(ROUTES.get(r.key), Read)]


def refused(response) -> bool:
    return response.status_code in (403, 404)


def sent_to_login(response, login="/login/") -> bool:
    return response.status_code == 302 and urlsplit(response["Location"]).path == login


# --- the classification is complete --------------------------------------------------------------


def test_every_url_pattern_is_classified():
    unknown = [r.key for r in ALL if r.key not in ROUTES and r.namespace not in NAMESPACES]
    assert not unknown, (
        f"classify {unknown} in ROUTES of {__name__}: a Read, or a Write with the least role it needs"
    )


def test_every_classified_route_still_exists():
    assert set(ROUTES) - {r.key for r in ALL} == set()


def test_the_classification_covers_writes_and_reads():
    assert len(WRITES) >= 9 and len(READS) >= 11


# --- writes --------------------------------------------------------------------------------------


def roles_refused(write: Write) -> list[str]:
    if write.author_only:
        return [role for role in ROLES if role != VIEWER]  # the note's author is the viewer
    return ROLES[: ROLES.index(write.role)]


def allowed_user(world: World, write: Write):
    return world.users[VIEWER] if write.author_only else world.users[write.role]


@pytest.mark.parametrize("route", WRITES)
def test_the_role_a_write_needs_does_change_something(world, route):
    """The control for every test below: the payloads would change the database if let through."""
    write = ROUTES[route.key]
    client = world.client(allowed_user(world, write))
    for payload in write.payloads(world):
        before = snapshot()
        response = client.post(route.url(world), payload)
        assert response.status_code in (200, 302), (route.key, payload, response.status_code)
        assert snapshot() != before, f"{route.key} {payload} changed nothing for its role"


@pytest.mark.parametrize("route", WRITES)
def test_a_role_below_the_one_a_write_needs_is_refused_and_nothing_changes(world, route):
    write = ROUTES[route.key]
    before = snapshot()
    for role in roles_refused(write):
        client = world.client(world.users[role])
        for payload in write.payloads(world):
            response = client.post(route.url(world), payload)
            assert refused(response), (route.key, role, payload, response.status_code)
            assert_unchanged(before, f"a {role}'s POST to {route.key}")


@pytest.mark.parametrize("route", WRITES)
def test_a_member_of_another_project_gets_404_and_nothing_changes(world, route):
    write = ROUTES[route.key]
    client = world.client(world.other_admin)
    before = snapshot()
    for payload in write.payloads(world):
        response = client.post(route.url(world), payload)
        assert response.status_code == 404, (route.key, payload, response.status_code)
        assert_unchanged(before, f"another project's admin's POST to {route.key}")


@pytest.mark.parametrize("route", WRITES)
def test_a_logged_out_post_is_sent_to_login_and_nothing_changes(world, route):
    write = ROUTES[route.key]
    client = world.client()
    before = snapshot()
    for payload in write.payloads(world):
        response = client.post(route.url(world), payload)
        assert sent_to_login(response) or response.status_code == 403, (route.key, response.status_code)
        assert_unchanged(before, f"a logged-out POST to {route.key}")


@pytest.mark.parametrize("route", POST_ONLY)
def test_get_on_a_post_only_write_is_405_and_nothing_changes(world, route):
    write = ROUTES[route.key]
    before = snapshot()
    for user in (allowed_user(world, write), world.superuser):
        client = world.client(user)
        for payload in write.payloads(world):
            query = {k: v for k, v in payload.items() if isinstance(v, str)}
            assert client.get(route.url(world), query).status_code == 405, route.key
            assert_unchanged(before, f"a GET of {route.key}")


@pytest.mark.parametrize("route", WRITES)
def test_a_post_without_the_csrf_token_is_403_for_every_role_and_nothing_changes(world, route):
    write = ROUTES[route.key]
    before = snapshot()
    for user in (allowed_user(world, write), world.users[ADMIN], world.superuser):
        client = world.client(user, enforce_csrf_checks=True)
        for payload in write.payloads(world):
            response = client.post(route.url(world), payload)
            assert response.status_code == 403, (route.key, user.username, response.status_code)
            assert b"CSRF" in response.content
            assert_unchanged(before, f"{user.username}'s POST to {route.key} without a CSRF token")


def test_a_viewer_cannot_promote_themselves_or_mint_an_api_key(world):
    """The two escalations a viewer would try first, spelled out."""
    client = world.client(world.users[VIEWER])
    before = snapshot()
    assert refused(client.post("/p/default/members/", {"username": "viewer", "role": "admin"}))
    assert refused(client.post("/api-keys/", {"project": "default", "name": "mine"}))
    assert refused(client.post(f"/api-keys/{world.api_key.pk}/revoke/"))
    assert_unchanged(before, "a viewer's escalation attempts")


# --- reads ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", READS)
def test_a_read_changes_nothing_and_refuses_post(world, route):
    read = ROUTES[route.key]
    before = snapshot()
    viewer = world.client(world.users[VIEWER])
    assert viewer.get(route.url(world), read.query).status_code == read.status, route.key
    assert_unchanged(before, f"a GET of {route.key}")
    for user in (world.users[ADMIN], world.superuser):
        response = world.client(user).post(route.url(world), {"force": "1", "include": "0", "text": "x"})
        assert response.status_code == 405, (route.key, response.status_code)
        assert_unchanged(before, f"a POST to the read-only {route.key}")


@pytest.mark.parametrize("route", [p for p in READS if "project" in p.values[0].params])
def test_a_member_of_another_project_cannot_read_it_either(world, route):
    read = ROUTES[route.key]
    assert world.client(world.other_admin).get(route.url(world), read.query).status_code == 404


# --- log-in, log-out, API fallback ---------------------------------------------------------------


def test_the_log_in_pages_need_the_csrf_token(world):
    before = snapshot()
    for route in [r for r in DASHBOARD if isinstance(ROUTES.get(r.key), Special)
                  and ROUTES[r.key].test == "test_the_log_in_pages_need_the_csrf_token"]:
        client = world.client(enforce_csrf_checks=True)
        response = client.post(route.url(world), {"username": "viewer", "password": "correct horse battery staple"})
        assert response.status_code == 403, route.key
        assert "_auth_user_id" not in client.session
    assert_unchanged(before, "a log-in without a CSRF token")


def test_logging_out_is_post_only_and_needs_the_csrf_token(world):
    client = world.client(world.users[VIEWER], enforce_csrf_checks=True)
    assert client.get("/logout/").status_code == 405
    assert client.post("/logout/").status_code == 403
    assert "_auth_user_id" in client.session


def test_the_panels_a_user_left_open_are_their_own_and_need_the_csrf_token(world):
    """Not a project's data: any logged-in user may store their own fold-bar state, with the CSRF token,
    and nothing of anyone else's changes."""
    from sessions.models import DashboardPreferences

    url, payload = reverse("panel_state"), {"panel": "chart", "open": "1"}
    before = snapshot()
    assert sent_to_login(world.client().post(url, payload))
    assert world.client().get(url).status_code in (302, 405)
    viewer = world.client(world.users[VIEWER], enforce_csrf_checks=True)
    assert viewer.post(url, payload).status_code == 403
    assert viewer.get(url).status_code == 405
    assert_unchanged(before, "a panel toggle without a log-in or a CSRF token")
    assert world.client(world.users[VIEWER]).post(url, payload).status_code == 204
    assert list(DashboardPreferences.objects.values_list("user__username", "open_panels")) == [
        (world.users[VIEWER].username, ["chart"])]


def test_comparing_the_ticked_sessions_changes_nothing_and_needs_the_csrf_token(world):
    """A POST only because the list's one form of ticked sessions sends it: it redirects to the comparison
    page, for the sessions the user may see, and changes nothing."""
    from sessions.ingest.append import append_messages

    project = world.story.session.project
    append_messages(project, "second", [{"role": "user", "content": "another run"}], "test")
    second = project.sessions.get(key="second")
    url, payload = reverse("compare_ticked"), {"session": [str(world.story.session.pk), str(second.pk)]}
    before = snapshot()
    assert sent_to_login(world.client().post(url, payload))
    viewer = world.client(world.users[VIEWER], enforce_csrf_checks=True)
    assert viewer.post(url, payload).status_code == 403
    assert viewer.get(url).status_code == 405
    assert world.client(world.other_admin).post(url, payload).status_code == 404
    # Another project's session beside one of this project: 404, as if it were not there.
    mixed = {"session": [str(world.story.session.pk), str(world.other_session.pk)]}
    assert world.client(world.users[VIEWER]).post(url, mixed).status_code == 404
    response = world.client(world.users[VIEWER]).post(url, payload)
    assert response.status_code == 302
    assert response["Location"] == reverse("compare") + f"?project={project.name}&a={world.story.session.key}&b=second"
    assert_unchanged(before, "comparing ticked sessions")


def test_unknown_api_paths_are_a_json_404_and_change_nothing(world):
    before = snapshot()
    for client in (world.client(), world.client(world.superuser)):
        for method in ("get", "post", "put", "patch", "delete"):
            response = getattr(client, method)("/api/v2/sessions/story")
            assert response.status_code == 404
            assert response.json()["code"] == "not_found"
    assert_unchanged(before, "requests to unknown API paths")


def test_the_otlp_receiver_never_takes_a_dashboard_login_for_a_key(world):
    from tests.otlp.spans import export, openinference, span

    before = snapshot()
    body = export(span(openinference([{"role": "user", "content": "crafted"}]))).SerializeToString()
    for client in (world.client(), world.client(world.superuser), world.client(world.users[ADMIN])):
        assert client.get("/v1/traces").status_code == 405
        response = client.post("/v1/traces", body, content_type="application/x-protobuf")
        assert response.status_code == 401
    assert_unchanged(before, "OTLP exports without an API key")


# --- the Django admin ----------------------------------------------------------------------------


def admin_payload() -> dict:
    """What a POST to any admin page would need to change something: a bulk delete, a confirmed
    delete, and fields of the add and change forms."""
    pks = {label: [str(pk) for pk in model._default_manager.values_list("pk", flat=True)]
           for model in admin.site._registry for label in [model._meta.label]}
    return {
        "action": "delete_selected", "_selected_action": sorted({pk for values in pks.values() for pk in values}),
        "post": "yes", "name": "crafted", "title": "crafted", "username": "crafted", "password1": "x9!crafted-pw",
        "password2": "x9!crafted-pw", "is_staff": "on", "is_superuser": "on", "summary": "crafted",
    }


def admin_url(route: Route, world: World) -> str:
    if route.route.endswith("(?P<url>.*)$"):
        return "/admin/anything/"
    if "(?P<app_label>" in route.route:
        return "/admin/ctx_sessions/"
    from django.contrib.contenttypes.models import ContentType

    values = {"content_type_id": str(ContentType.objects.get_for_model(Project).pk), "id": str(world.superuser.pk),
              "object_id": str(world.story.session.project.pk)}
    match = re.search(r"admin/(\w+?)/(\w+)/", route.route)
    if match and "object_id" in route.params:
        model = apps.get_model(match.group(1), match.group(2))
        values["object_id"] = str(model._default_manager.order_by("pk").values_list("pk", flat=True).first())
    return route.url(world, **values)


ADMIN_ROUTES = [pytest.param(r, id=r.key) for r in ALL if r.namespace == "admin"]


@pytest.mark.parametrize("route", ADMIN_ROUTES)
def test_the_admin_refuses_every_post_from_non_staff_and_staff_without_permissions(world, route):
    before = snapshot()
    url = admin_url(route, world)
    for user in (world.users[VIEWER], world.users[EDITOR], world.users[ADMIN], world.staff):
        response = world.client(user).post(url, admin_payload())
        assert response.status_code in (200, 302, 403, 404, 405), (route.key, user.username, response.status_code)
        if user is not world.staff and response.status_code == 302 and route.key != "admin:logout":
            assert urlsplit(response["Location"]).path in ("/admin/login/", "/login/"), response["Location"]
        assert_unchanged(before, f"{user.username}'s POST to {route.key}")


def test_the_admin_payload_does_change_something_for_a_superuser(world):
    """The control for the test above."""
    before = snapshot()
    world.client(world.superuser).post("/admin/ctx_sessions/authfailure/", admin_payload())
    assert not AuthFailure.objects.exists()
    assert snapshot() != before


# --- the HTTP API --------------------------------------------------------------------------------


API_ROUTES = [pytest.param(r, id=r.key) for r in ALL if r.namespace == "api"]
# Open without a key: the schema and the docs page (read-only, whatever the method), and the bare
# prefix, which is a 404.
API_OPEN = {"api:openapi-json": 200, "api:openapi-view": 200, "api:api-root": 404}


@pytest.mark.parametrize("route", API_ROUTES)
def test_the_api_never_takes_a_dashboard_login_for_a_key(world, route):
    before = snapshot()
    url = route.url(world, key=world.story.session.key, seq=world.story.result)
    body = json.dumps({"messages": [{"role": "user", "content": "crafted"}], "title": "crafted",
                       "include_in_messages": False, "force": True, "summary": "crafted"})
    expected = {API_OPEN[route.key]} if route.key in API_OPEN else {401, 405}
    for client in (world.client(), world.client(world.superuser), world.client(world.users[ADMIN])):
        assert client.get(url).status_code in expected, (route.key, "get")
        for method in ("post", "put", "patch", "delete"):
            response = getattr(client, method)(url, body, content_type="application/json")
            assert response.status_code in expected, (route.key, method, response.status_code)
    assert_unchanged(before, f"requests to {route.key} without an API key")
