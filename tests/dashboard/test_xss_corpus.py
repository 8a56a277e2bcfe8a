"""Every vector of the XSS corpus (tests/xss_corpus.py), stored in every field a page shows, comes back
escaped on every dashboard page and fragment — the fast counterpart of
tests/browser/test_xss_corpus.py, with Django's test client and the standard library's HTML parser.

The corpus is stored once for the module (in a transaction that is rolled back afterwards) and every
page is rendered once; the tests then read the rendered pages.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.urls import reverse

from sessions.access.api_keys import create_api_key
from sessions.access.members import set_member
from sessions.ingest.import_jobs import run_job
from sessions.models import ImportJob, Message, Project
from tests.xss_corpus import IDS, PAYLOADS, VECTORS, has_markup, pack
from tests.xss_seed import (
    FIELDS,
    PNG_IMAGE,
    REJECTED_IMAGE_URLS,
    SVG_IMAGE,
    TAG,
    Seeded,
    import_files,
    seed_corpus,
)

from .conftest import make_client, session_url
from .dom import Element, parse

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# Every element a page may have: the tags our templates write, and <mark> from search snippets.
ALLOWED_TAGS = {
    *(tag.lower() for tag in re.findall(r"<([a-zA-Z][a-zA-Z0-9-]*)", "".join(
        path.read_text() for path in TEMPLATES.rglob("*.html")))),
    "mark",
}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "poster", "background", "ping",
                  "srcset", "codebase", "cite", "longdesc", "dynsrc", "lowsrc"}
SCRIPT_URL = re.compile(r"^(javascript:|vbscript:|data:text/html|data:application/xhtml|data:text/xml)")
CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")
METERS = {"meter", "mini-meter"}  # drawn as SVG, like the size chart


@dataclass
class Page:
    url: str
    status: int
    html: str
    csp: str | None
    text: str  # as a browser shows it, whitespace collapsed
    problems: list[str]  # markup_problems() of the page


@dataclass
class Rendered:
    seeded: Seeded
    pages: dict[str, Page]


def collapsed(text: str) -> str:
    return " ".join(text.split())


# pytest-django makes the test database only for the databases its selected tests are marked with: with
# the mark, a test of `rendered` run alone (-k) finds the tables the fixture writes to.
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def rendered(django_db_setup, django_db_blocker) -> Rendered:
    with django_db_blocker.unblock(), transaction.atomic():
        project = Project.objects.get_or_create(name="default")[0]
        author = get_user_model().objects.create_superuser("xss-admin", "xss-admin@example.com", None)
        set_member(project, "xss-admin", "admin")
        client = make_client(author)
        pages = post_forms(client)  # first, while the keys and members pages are still short
        seeded = seed_corpus(project, author)
        pages.update(render_pages(seeded, client))
        transaction.set_rollback(True)
    return Rendered(seeded, pages)


def keeper(pages: dict[str, Page]):
    def keep(name, url, response):
        assert name not in pages, name
        html = response.content.decode()
        doc = parse(html)
        pages[name] = Page(url, response.status_code, html, response.get("Content-Security-Policy"),
                           doc.text(), markup_problems(doc))

    return keep


def post_forms(client) -> dict[str, Page]:
    """Forms that echo what was typed into them: in a flash message, or in the import report."""
    pages: dict[str, Page] = {}
    keep = keeper(pages)
    for number, names in enumerate(pack(PAYLOADS, 100, " ")):
        url = reverse("api_keys")
        keep(f"api key created ({number})", url, client.post(url, {"project": "default", "name": " ".join(names)}, follow=True))
    for number, names in enumerate(pack(PAYLOADS, 1000, " ")):
        url = reverse("members", args=["default"])
        keep(f"unknown member ({number})", url,
             client.post(url, {"username": " ".join(names), "role": "viewer"}, follow=True))
    indexes = list(range(len(PAYLOADS)))
    for number, start in enumerate(range(0, len(indexes), 50)):
        files = [SimpleUploadedFile(name, data, "application/json")
                 for name, data in import_files(indexes[start:start + 50])]
        keep(f"import ({number})", reverse("import"),
             client.post(reverse("import"), {"project": "default", "format": "auto", "files": files}, follow=True))
    for job in ImportJob.objects.filter(state=ImportJob.State.QUEUED):  # the worker's work, here
        run_job(job)
        url = reverse("import_job", args=[job.pk])
        keep(f"import job {job.pk}", url, client.get(url))
    return pages


def render_pages(seeded: Seeded, client) -> dict[str, Page]:
    pages: dict[str, Page] = {}
    keep = keeper(pages)

    def get(name, url, **query):
        url += ("?" + urlencode(query)) if query else ""
        keep(name, url, client.get(url))

    def get_htmx(name, url, target, **query):
        url += "?" + urlencode(query)
        keep(name, url, client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET=target))

    sessions, search = reverse("sessions"), reverse("search")
    get("sessions", sessions, size=100)
    get("sessions by tag", sessions, tag=TAG, size=100)
    for group in seeded.groups:
        s, key = group.session, group.session.key
        get(key, session_url(s))
        get(f"{key} raw log", session_url(s, "log/"), before=s.message_count + 1)
        get(f"{key} model input", session_url(s, "input/"))
        get(f"{key} events", session_url(s, "events/"), before=2**62)
        get(f"{key} chart", session_url(s, "chart/"))
        if group.number < 2:  # the same messages again, in other templates
            get(f"{key} as of its checkpoint, at a permalink", session_url(
                s, as_of_checkpoint=group.checkpoint.pk, seq=group.checkpoint.last_seq + 1))
            get(f"{key} live", session_url(s, "live/"), after=0)
        get(f"{key} checkpoint diff", reverse("checkpoint_diff", args=[s.project.name, key, group.checkpoint.pk]))
        get(f"{key} request view", reverse("request_view", args=[s.project.name, key, group.request.pk]))
        get(f"search {group.marker}", search, q=group.marker)
        get_htmx(f"search {group.marker} (htmx)", search, "search-results", q=group.marker)
        get(f"sessions matching {group.marker}", sessions, q=group.marker)
        get_htmx(f"sessions matching {group.marker} (htmx)", sessions, "session-rows", q=group.marker)
    window = seeded.window
    first_shown = window.message_count - 59
    get(window.key, session_url(window))
    get(f"{window.key} earlier raw log", session_url(window, "log/"), before=first_shown)
    get(f"{window.key} first raw log window", session_url(window, "log/"), after=0)
    get(f"{window.key} earlier model input", session_url(window, "input/"), before=first_shown)
    get(f"{window.key} older events", session_url(window, "events/"), before=2**62)
    get(f"{window.key} chart", session_url(window, "chart/"))
    get(f"{window.key} checkpoint diff",
        reverse("checkpoint_diff", args=[window.project.name, window.key, seeded.window_checkpoint.pk]))
    # What was typed into the filters comes back in the form (and in "N messages for ...").
    for number, payloads in enumerate(pack(PAYLOADS, 200, " ")):
        typed = " ".join(payloads)
        get(f"sessions filtered by typed vectors ({number})", sessions, q=typed, tag=typed, **{"from": typed})
        get(f"search for typed vectors ({number})", search, q=typed, role=typed)
    get("api keys", reverse("api_keys"))
    get("members", reverse("members", args=["default"]))
    get("import", reverse("import"))
    return pages


# --- the corpus and where it went ------------------------------------------------------------------


def test_the_corpus_has_at_least_60_distinct_vectors():
    assert len(VECTORS) >= 60
    assert len(set(IDS)) == len(IDS) and len(set(PAYLOADS)) == len(PAYLOADS)
    assert all(0 < len(p) <= 100 and p == p.strip() for p in PAYLOADS)
    assert all("\x00" not in p for p in PAYLOADS)


def test_every_vector_went_into_every_field_that_accepts_it(rendered):
    seeded, everything = rendered.seeded, set(range(len(PAYLOADS)))
    for name in FIELDS:
        placed, skipped = seeded.placed[name], seeded.skipped[name]
        assert placed | set(skipped) == everything, name
        assert not placed & set(skipped), name
    assert seeded.placed["tag"] == set(), "a tag is a slug: no vector should pass"
    normalised = {i for i, reason in seeded.skipped["member_username"].items() if "normalises" in reason}
    assert set(seeded.skipped["member_username"]) == normalised
    assert len(normalised) <= 2, "only usernames that Django's NFKC normalisation changes are skipped"
    for name in set(FIELDS) - {"tag", "member_username", "note_author"}:
        assert seeded.skipped[name] == {}, (name, seeded.skipped[name])


def test_script_and_html_image_urls_are_refused_by_the_validator(rendered):
    assert set(rendered.seeded.rejected_image_urls) == set(REJECTED_IMAGE_URLS)


def test_image_urls_holding_vectors_link_to_exactly_the_stored_url(rendered):
    """An image URL is both a link and an <img src>: the attribute keeps the whole URL, nothing breaks out."""
    for group in rendered.seeded.groups:
        doc = parse(rendered.pages[group.session.key].html)
        raw_log = doc.one("section", cls="raw-log")
        links = {a.get("href") for figure in raw_log.find_all("figure", cls="image") for a in figure.find_all("a")}
        sources = {img.get("src") for img in raw_log.find_all("img", cls="thumb")}
        expected = {"https://example.com/thumb.png?v=" + p for p in group.payloads}
        if group.number == 0:
            expected |= {SVG_IMAGE, PNG_IMAGE}
        assert links == expected == sources, group.session.key


@pytest.mark.django_db
def test_the_api_refuses_script_and_html_image_urls_with_a_4xx(project):
    secret = create_api_key(project, "xss-app")[1]
    client = make_client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    for url in REJECTED_IMAGE_URLS:
        for part in ({"type": "image", "url": url}, {"type": "image_url", "image_url": {"url": url}}):
            response = client.post("/api/v1/sessions/xss-api/messages", {"messages": [
                {"role": "user", "content": [{"type": "text", "text": "look"}, part]}]}, content_type="application/json")
            assert 400 <= response.status_code < 500, (url, response.status_code)
            assert response.json()["code"] in ("invalid_content", "invalid_request"), (url, response.json())
    assert Message.objects.filter(session__key="xss-api").count() == 0


# --- escaping, vector by vector -------------------------------------------------------------------------


@pytest.mark.parametrize("payload", PAYLOADS, ids=IDS)
def test_no_vector_reaches_any_page_unescaped(rendered, payload):
    if has_markup(payload):
        unescaped = [name for name, page in rendered.pages.items() if payload in page.html]
        assert not unescaped, f"shown unescaped on {unescaped[:5]}"
    index = PAYLOADS.index(payload)
    group = next(g for g in rendered.seeded.groups if index in g.indexes)
    shown = collapsed(payload)
    pages = [group.session.key, f"{group.session.key} checkpoint diff", f"{group.session.key} request view",
             "api keys", f"search {group.marker}"]
    if index in rendered.seeded.placed["member_username"]:
        pages.append("members")
    for name in pages:
        assert shown in rendered.pages[name].text, f"the vector should be shown as text on {name}"


def test_every_page_was_rendered(rendered):
    failed = {name: page.status for name, page in rendered.pages.items() if page.status != 200}
    assert not failed


# --- nothing on any page came from content ---------------------------------------------------------------


def url_problem(element: Element, name: str, value: str) -> str | None:
    normal = CONTROL_OR_SPACE.sub("", value).lower()
    if SCRIPT_URL.match(normal):
        return f"{name}={value[:60]!r} is a script or document URL"
    if element.tag == "img" and name == "src" and not normal.startswith(("https:", "http:", "data:image/", "/static/")):
        return f"image src {value[:60]!r}"
    return None


def where(element: Element) -> str:
    """An element as a problem names it (only written for a problem: most elements have none)."""
    return f"<{element.tag} {str(element.attrs)[:80]}>"


def markup_problems(doc: Element) -> list[str]:
    """What on a page could only have come from content parsed as markup."""
    problems = []
    for element in doc.iter():
        if element.tag not in ALLOWED_TAGS:
            problems.append(f"unexpected element {where(element)}")
        for name, value in element.attrs.items():
            if name.startswith("on") or "hx-on" in name:
                problems.append(f"event handler attribute {name} on {where(element)}")
            if name in URL_ATTRIBUTES and (problem := url_problem(element, name, value)):
                problems.append(f"{problem} on {where(element)}")
            if name == "style":  # the dashboard has no inline style (the CSP has no 'unsafe-inline' for styles)
                problems.append(f"style {value[:60]!r} on {where(element)}")
            # The page's own: the search box's autofocus, and the What if… panel's buttons and the list's
            # "Compare the two ticked" posting their form's fields to a same-origin path of ours (a script
            # URL is caught above with the other URLs).
            if name in ("srcdoc", "formaction", "autofocus") and not (
                    name == "autofocus" and element.tag == "input" and element.get("name") == "q") and not (
                    name == "formaction" and element.tag == "button"
                    and (element.get("id") or "").startswith(("what-if-", "compare-ticked"))
                    and value.startswith("/") and not value.startswith("//")):
                problems.append(f"{name} on {where(element)}")
        if element.tag == "script" and not (element.get("src") or "").startswith("/static/"):
            problems.append(f"inline or foreign script {where(element)}")
        if element.tag == "meta" and "http-equiv" in element.attrs:
            problems.append(f"meta http-equiv {where(element)}")
        if element.tag == "link" and not (element.get("href") or "").startswith("/static/"):
            problems.append(f"link to {where(element)}")
        if element.tag == "svg" and not any((a.tag == "figure" and "chart" in a.classes) or a.classes & METERS
                                            for a in element.ancestors()):
            problems.append(f"an <svg> outside the size chart and the meters {where(element)}")
        if element.tag == "img" and "thumb" not in element.classes:
            problems.append(f"an image that is not a thumbnail {where(element)}")
        if element.tag == "style":
            problems.append(f"a <style> element {where(element)}")
    return problems


def test_no_page_has_markup_that_came_from_content(rendered):
    problems = {}
    for name, page in rendered.pages.items():
        if page.problems:
            problems[name] = page.problems[:3]
    assert not problems, problems


def test_the_checks_catch_markup_that_came_from_content():
    """The checks above can fail: the corpus parsed as markup trips them for nearly every vector."""
    caught = [p for p in PAYLOADS if markup_problems(parse(f"<main>{p}</main>"))]
    assert len(caught) >= len([p for p in PAYLOADS if "<" in p]) * 0.8, len(caught)


def test_every_page_and_fragment_carries_a_csp_that_allows_scripts_only_from_self(rendered):
    for name, page in rendered.pages.items():
        assert page.csp, f"no Content-Security-Policy on {name}"
        directives = {part.split()[0]: part.split()[1:] for part in page.csp.split(";") if part.strip()}
        assert directives.get("script-src") == ["'self'"], (name, page.csp)
        assert directives.get("object-src") == ["'none'"], (name, page.csp)
        assert directives.get("base-uri") == ["'self'"], (name, page.csp)
        assert "'unsafe-inline'" not in directives["script-src"] and "'unsafe-eval'" not in directives["script-src"]
        assert directives.get("style-src") == ["'self'"], (name, page.csp)
