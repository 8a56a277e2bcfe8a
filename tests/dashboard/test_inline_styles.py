"""No page or fragment of the dashboard carries an inline style, so its Content-Security-Policy allows
styles only from our stylesheet (`style-src 'self'`, no 'unsafe-inline'). Every HTML route of the
urlconf is rendered (the routes and seeded world of test_write_access, so a new page is covered as
soon as it is classified there), and so are the pages a form answers with, and other states of the
session page."""

import pytest
from django.urls import reverse

from .conftest import make_client, session_url
from .dom import parse
from .test_write_access import DASHBOARD, ROUTES, Read, World, Write

NOT_HTML = {"session_export", "queue_csv"}
PAGES = [
    pytest.param(r, id=r.key) for r in DASHBOARD
    if r.key not in NOT_HTML and (isinstance(ROUTES.get(r.key), Read)
                                  or (isinstance(ROUTES.get(r.key), Write) and not ROUTES[r.key].post_only))
]
FORMS = [p for p in PAGES if isinstance(ROUTES[p.values[0].key], Write)]


def inline_styles(response) -> list[str]:
    """Every style attribute and <style> element of the response."""
    return [f"<{e.tag} style={e.get('style')!r}>" if e.tag != "style" else "<style>"
            for e in parse(response).iter() if "style" in e.attrs or e.tag == "style"]


def style_src(response) -> list[str]:
    directives = dict(part.split(maxsplit=1) for part in response["Content-Security-Policy"].split(";") if part.strip())
    return directives["style-src"].split()


@pytest.fixture
def world(story, project, other_project, other_session, make_user) -> World:
    return World(story, project, other_project, other_session, make_user)


def assert_no_inline_style(response, what: str, status: int = 200) -> None:
    assert response.status_code == status, (what, response.status_code)
    assert inline_styles(response) == [], what
    assert style_src(response) == ["'self'"], what


def test_every_html_route_is_checked():
    assert {"sessions", "session", "session_log", "session_input", "session_live", "session_chart", "session_events",
            "checkpoint_diff", "request_view", "search", "api_keys", "members", "import"} <= {p.id for p in PAGES}


@pytest.mark.parametrize("route", PAGES)
def test_no_page_or_fragment_has_an_inline_style(world, route):
    read = ROUTES[route.key]
    query = read.query if isinstance(read, Read) else {}
    # A read that redirects (the trace without htmx) is checked where it leads.
    follow = isinstance(read, Read) and read.status == 302
    assert_no_inline_style(world.client(world.superuser).get(route.url(world), query, follow=follow), route.key)


@pytest.mark.parametrize("route", FORMS)
def test_no_page_a_form_answers_with_has_an_inline_style(world, route):
    write = ROUTES[route.key]
    client = world.client(world.superuser)
    for payload in write.payloads(world):
        assert_no_inline_style(client.post(route.url(world), payload, follow=True), f"{route.key} {payload}")


def test_no_state_of_the_session_page_has_an_inline_style(world):
    story = world.story
    client = world.client(world.users["viewer"])
    for url in (story.url(), story.url(as_of=story.first.last_seq), story.url(as_of_checkpoint=story.first.pk),
                story.url(seq=story.history_call), story.url("log/", before=story.last),
                story.url("input/", before=story.last),
                reverse("checkpoint_diff", args=["default", story.session.key, story.second.pk]),
                story.url(trace="taxi"), story.url(trace="*"),
                reverse("sessions") + "?q=taxi&has_checkpoints=1&lost_facts=1", reverse("search") + "?q=booking"):
        assert_no_inline_style(client.get(url), url)
    trace = story.url("trace/", q="taxi")
    assert_no_inline_style(client.get(trace, headers={"HX-Request": "true"}), "the trace fragment")
    assert_no_inline_style(client.get(session_url(story.session).replace("story", "nope")), "a 404 page", 404)
    assert_no_inline_style(make_client().get(reverse("login")), "the log-in page")
