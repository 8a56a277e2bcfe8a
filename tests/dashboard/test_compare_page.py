"""The comparison page (/compare/) shows long comparisons ROWS_PER_PAGE rows at a time, opening on the page
that holds the first difference, with links to the rows before and after."""

import pytest
from django.urls import reverse

from sessions.dashboard.views import ROWS_PER_PAGE
from sessions.ingest.append import append_messages
from tests.recorded_sessions import rebuilt_session

from .dom import parse

pytestmark = pytest.mark.django_db


def run(project, key, differ_at: int, count: int):
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"turn {i}" + (" (other)" if key == "b" and i >= differ_at else "")}
                for i in range(count)]
    append_messages(project, key, messages, "test")


def row_ids(response) -> list[int]:
    assert response.status_code == 200
    return [int(tr.attrs["id"].removeprefix("row-")) for tr in parse(response).one("table", cls="compare-rows").find_all("tr") if "id" in tr.attrs]


def test_a_long_comparison_opens_on_the_page_of_its_first_difference(viewer_client, project):
    count, differ_at = 2 * ROWS_PER_PAGE + 50, ROWS_PER_PAGE + 30
    run(project, "a", differ_at, count)
    run(project, "b", differ_at, count)
    url = reverse("compare") + "?project=default&a=a&b=b"

    response = viewer_client.get(url)
    shown = row_ids(response)
    assert shown == list(range(ROWS_PER_PAGE, 2 * ROWS_PER_PAGE))
    page = parse(response)
    verdict = page.one(cls="compare-verdict")
    assert verdict.one("a").attrs["href"] == f"#row-{differ_at}"
    assert f"of {count} rows" in verdict.text()  # the rows of every page are counted (a changed pair is one row)
    above, below = page.find_all("nav", cls="compare-pages")
    nav = above
    assert below.text() == above.text()
    assert f"Rows {ROWS_PER_PAGE + 1}–{2 * ROWS_PER_PAGE} of" in nav.text()
    links = {a.text(): a.attrs["href"] for a in nav.find_all("a")}
    assert set(links) == {"Earlier rows", "Later rows"}

    assert links["Earlier rows"].endswith("row=0") and links["Later rows"].endswith(f"row={2 * ROWS_PER_PAGE}")
    first = viewer_client.get(url + "&row=0")
    assert row_ids(first) == list(range(ROWS_PER_PAGE))
    # From the first page the divergence is a link to the page that holds it.
    href = parse(first).one(cls="compare-verdict").one("a").attrs["href"]
    assert href.endswith(f"row={ROWS_PER_PAGE}#row-{differ_at}")
    last = viewer_client.get(reverse("compare") + links["Later rows"])
    assert row_ids(last) == list(range(2 * ROWS_PER_PAGE, count))
    assert [a.text() for a in parse(last).find_all("nav", cls="compare-pages")[0].find_all("a")] == ["Earlier rows"]


@pytest.mark.parametrize("row", ["-1", "abc", "99999999999999999999", "100000", "²", "%20"])
def test_a_row_out_of_range_or_not_a_number_is_still_a_page(viewer_client, project, row):
    run(project, "a", 3, 10)
    run(project, "b", 3, 10)
    response = viewer_client.get(reverse("compare") + f"?project=default&a=a&b=b&row={row}")
    assert row_ids(response) == list(range(10))  # 3 the same, then 7 changed pairs, each on one row
    assert not parse(response).find_all("nav", cls="compare-pages")


def test_two_recorded_requests_side_by_side(viewer_client, project):
    session = rebuilt_session(project)
    response = viewer_client.get(reverse("compare") + "?project=default&a=rebuilt&b=rebuilt&a_request=4&b_request=5")
    page = parse(response)
    heads = [side.one(cls="compare-what").text() for side in page.find_all("section", cls="compare-side")]
    assert heads[0].startswith("Request 4 · gpt-4o-mini · sent") and heads[1].startswith("Request 5")
    rows = page.one("table", cls="compare-rows").find("tbody").find_all("tr")
    assert len(rows) == 7
    # The instructions and the application's own summary are no raw message: no link to one.
    first = rows[0].one("td", cls="side-a")
    assert first.one(cls="role").text() == "instructions" and not first.find_all("a", cls="permalink")
    assert not rows[1].one("td", cls="side-a").find_all("a", cls="permalink")
    dropped = rows[2].one("td", cls="side-a").one("a", cls="permalink")
    assert dropped.attrs["href"] == f"{session.get_absolute_url()}?seq=5#m-5"
    assert "first differ at row 3" in page.one(cls="compare-verdict").text()
    # The form keeps what was asked, to change one number and compare again.
    assert {i.attrs["name"]: i.attrs.get("value") for i in page.find_all("input")}["a_request"] == "4"


def test_the_request_page_and_the_as_of_banner_lead_to_the_comparison(viewer_client, project):
    session = rebuilt_session(project)
    diff = parse(viewer_client.get(reverse("recorded_request_diff", args=["default", "rebuilt", 5])))
    href = diff.one("a", cls="compare-link").attrs["href"]
    assert "a_request=4" in href and "b_request=5" in href
    as_of = parse(viewer_client.get(session.get_absolute_url() + "?as_of=4"))
    href = as_of.one(cls="as-of-banner").one("a", cls="compare-link").attrs["href"].replace("&amp;", "&")
    assert "a_as_of=4" in href and f"b_as_of={session.message_count}" in href
    assert viewer_client.get(href).status_code == 200


@pytest.mark.parametrize(("query", "problem"), [
    ("a_request=9&b_request=1", "no recorded request 9"),
    ("a_request=1&a_as_of=2&b_request=1", "not both"),
    ("a_as_of=99&b_as_of=1", "as_of must be a seq between 0 and 10"),
])
def test_a_side_that_is_not_there_says_so_on_the_page(viewer_client, project, query, problem):
    rebuilt_session(project)
    response = viewer_client.get(reverse("compare") + f"?project=default&a=rebuilt&b=rebuilt&{query}")
    assert response.status_code == 200
    page = parse(response)
    assert problem in page.one(data_testid="compare-problem").text()
    assert not page.find_all("table", cls="compare-rows")


@pytest.mark.parametrize("ticked", [1, 3])
def test_comparing_ticked_sessions_needs_exactly_two(viewer_client, project, ticked):
    for n in range(3):
        append_messages(project, f"run-{n}", [{"role": "user", "content": f"run {n}"}], "test")
    pks = [str(pk) for pk in project.sessions.order_by("pk").values_list("pk", flat=True)[:ticked]]
    response = viewer_client.post(reverse("compare_ticked"), {"session": pks}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("sessions")
    assert "Tick exactly two sessions to compare them." in response.content.decode()


def test_the_list_compares_the_two_ticked_sessions(viewer_client, project):
    run(project, "a", 3, 10)
    run(project, "b", 3, 10)
    listing = parse(viewer_client.get(reverse("sessions")))
    button = listing.one("button", cls="compare-ticked")
    assert button.attrs["formaction"] == reverse("compare_ticked")
    pks = [box.attrs["value"] for box in listing.find_all("input", cls="pick")]
    response = viewer_client.post(reverse("compare_ticked"), {"session": pks}, follow=True)
    assert "They agree on 3 of 10 rows" in parse(response).one(cls="compare-verdict").text()
