"""The comparison of two conversations: GET /compare?a=KEY&b=KEY, two sessions of the key's project
aligned turn by turn (sessions.context.compare). Each side is the session's raw log, one of its recorded
requests (`a_request`, `b_request`) or its model input as of a message (`a_as_of`, `b_as_of`); `b`
defaults to `a`, so two requests or two points of one session need only one key."""

from ninja import Query, Router

from sessions.context.compare import compare_sides, side_of
from sessions.errors import DomainError
from sessions.http import schemas as s
from sessions.http.common import ERRORS, link, links, project
from sessions.ingest.session_store import get_session

router = Router(tags=["sessions"])
NUMBER = {"ge": 1, "le": 2_000_000_000}


@router.get("/compare", response={200: s.CompareOut, **ERRORS},
            summary="Compare two conversations turn by turn: where did they diverge?",
            openapi_extra=links(200, GetSessionA=link("get_one_session", key="$response.body#/a/key"),
                                GetSessionB=link("get_one_session", key="$response.body#/b/key")))
def compare(request, a: str = Query(..., min_length=1, max_length=200, description="one session's key"),
            b: str | None = Query(None, min_length=1, max_length=200,
                                  description="the other session's key (default: a, to compare two requests or two points of it)"),
            a_request: int | None = Query(None, **NUMBER, description="side a is this recorded request of session a"),
            b_request: int | None = Query(None, **NUMBER, description="side b is this recorded request of session b"),
            a_as_of: int | None = Query(None, ge=0, le=2_000_000_000, description="side a is session a's model input as of this message"),
            b_as_of: int | None = Query(None, ge=0, le=2_000_000_000, description="side b is session b's model input as of this message")):
    if b is None and a_request is None and a_as_of is None and b_request is None and b_as_of is None:
        raise DomainError("give b, the other session's key, or a side of session a to compare with "
                          "(a_request, b_request, a_as_of, b_as_of)", code="missing_b")
    here = project(request)
    first = get_session(here, a)
    second = first if b is None or b == a else get_session(here, b)
    return compare_sides(side_of(first, a_request, a_as_of), side_of(second, b_request, b_as_of))
