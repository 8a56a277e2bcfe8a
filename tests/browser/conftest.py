"""Browser tests: headless Chromium (Debian's /usr/bin/chromium) driven by Playwright's sync API
against pytest-django's `live_server` (the app in a thread on 127.0.0.1).

Fixtures: `browser` (one Chromium per package run), `page` (a fresh context per test; a module
that overrides `offline` with True gets pages that reach nothing but the live server), `users`
(a superuser "admin" and a project member "viewer" with role viewer), `login` (logs a page in: through
the /login/ form once per process, then with its saved cookies), `demo` (sessions.ingest.demo.load_demo) and
`shot` (saves a screenshot into
test-artifacts/screenshots/ at the repository root; a failed test also leaves FAILED-<test>.png there).

Data is created with the domain functions (append, compact, load_demo). The live server runs in
another thread, so every test uses a transactional database (`transactional_db`, pulled in by the
`users` fixture) to make the rows visible to it. Data that takes long to build is built once per process
and copied back before each test (stored_data.py).
"""

import contextlib
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session as LoginSession
from django.shortcuts import resolve_url

from sessions.access.members import set_member
from sessions.ingest.demo import load_demo
from sessions.models import Project

from .stored_data import stored

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "browser-test-password-1"
REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO_ROOT / "test-artifacts" / "screenshots"


def find_chromium() -> str | None:
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


@pytest.fixture(scope="package")
def playwright_runtime():
    chromium = find_chromium()
    if chromium is None:
        message = "Chromium not found: apt-get install chromium"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an asyncio event loop in this thread from start() to stop(). Django
    # refuses ORM calls on a thread with a running event loop (SynchronousOnlyOperation), although
    # here nothing is actually async: the test creates its data and the database is flushed between
    # tests on this thread while the loop merely exists. So allow it, but only while Playwright runs,
    # and restore the previous value afterwards so the rest of the suite keeps Django's check.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    runtime = sync_playwright().start()
    try:
        yield runtime, chromium
    finally:
        runtime.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def browser(playwright_runtime):
    runtime, chromium = playwright_runtime
    instance = runtime.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
    yield instance
    instance.close()


@pytest.fixture(scope="package")
def nowhere():
    """The address of a proxy where nothing listens: a port bound and never listened on, which refuses
    every connection."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{bound.getsockname()[1]}"


@pytest.fixture
def offline() -> bool:
    """A module that overrides this with True gets pages that reach the live server and nothing else:
    Chromium sends every other request to the `nowhere` proxy, where it fails. Unlike intercepting each
    request (page.route), which turns Chromium's cache off, this costs nothing."""
    return False


@pytest.fixture
def page(browser, request, offline):
    options = {"proxy": {"server": request.getfixturevalue("nowhere"), "bypass": "localhost"}} if offline else {}
    context = browser.new_context(viewport={"width": 1400, "height": 900}, **options)
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.offline = offline  # the live server runs on localhost
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors  # tests may assert on uncaught script errors
    yield page
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        with contextlib.suppress(Exception):
            save_screenshot(page, f"FAILED-{request.node.name}", full_page=True)
    context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report


def save_screenshot(page, name: str, *, full_page: bool = False) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


@pytest.fixture
def shot():
    """shot(page, "name", full_page=False) -> path of test-artifacts/screenshots/name.png"""
    return save_screenshot


@pytest.fixture
def project(transactional_db):
    return Project.objects.get_or_create(name="default", defaults={"title": "Default project"})[0]


@pytest.fixture
def users(transactional_db, project):
    """A superuser and a viewer of the default project; both log in with PASSWORD. Made once per
    process, then copied back, so `sign_in` can use the same log-in session again."""
    return stored(project, make_users)


def make_users(project) -> dict:
    User = get_user_model()
    admin = User.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    viewer = User.objects.create_user("viewer", "viewer@example.com", PASSWORD)
    set_member(project, "viewer", "viewer")
    return {"admin": admin, "viewer": viewer}


@pytest.fixture
def demo(project):
    """The demo data set (sessions.ingest.demo.load_demo, seconds to build: built once per process, then its rows
    copied back, stored_data.py); returns the default project."""
    stored(project, build_demo)
    return project


def build_demo(project):
    load_demo()


def log_in(page, base_url: str, username: str, password: str = PASSWORD) -> None:
    page.goto(base_url + "/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("form button[type=submit]")
    assert "/login/" not in page.url, f"login as {username} failed: still on {page.url}"


@dataclass
class SignedIn:
    user: tuple  # the user's (pk, password hash) when it logged in
    cookies: list[dict]
    session: dict  # its row of django_session


SIGNED_IN: dict[str, SignedIn] = {}


def sign_in(page, base_url: str, username: str) -> None:
    """Logs the page's context in as `username`, and ends where the log-in form leads: the first time in
    this process through the /login/ form (log_in); later with that log-in's cookies and its session row
    put back, which saves Chromium two page loads. The session stays valid while the user is the same row
    (users are copied back identical, stored_data.py); when it is not, the form again."""
    user = get_user_model().objects.values_list("pk", "password").get(username=username)
    saved = SIGNED_IN.get(username)
    if saved is None or saved.user != user:
        log_in(page, base_url, username)
        cookies = page.context.cookies()
        key = next(c["value"] for c in cookies if c["name"] == settings.SESSION_COOKIE_NAME)
        row = LoginSession.objects.values("session_key", "session_data", "expire_date").get(session_key=key)
        SIGNED_IN[username] = SignedIn(user, cookies, row)
        return
    LoginSession.objects.update_or_create(session_key=saved.session["session_key"], defaults=saved.session)
    page.context.add_cookies(saved.cookies)
    page.goto(base_url + resolve_url(settings.LOGIN_REDIRECT_URL))
    assert "/login/" not in page.url, f"login as {username} failed: sent to {page.url}"


@pytest.fixture
def login(live_server, users):
    """login(page, "admin" | "viewer") logs the page's context in (sign_in: the /login/ form, once)."""

    def _login(page, username: str = "admin"):
        sign_in(page, live_server.url, username)
        return page

    return _login
