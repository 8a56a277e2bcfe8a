"""The comparison of two conversations: GET /compare?a=KEY&b=KEY, two sessions of the key's project
aligned turn by turn (sessions.context.compare)."""

from ninja import Query, Router

from sessions.context.compare import compare_sessions
from sessions.http import schemas as s
from sessions.http.common import ERRORS, link, links, project
from sessions.ingest.session_store import get_session

router = Router(tags=["sessions"])


@router.get("/compare", response={200: s.CompareOut, **ERRORS},
            summary="Compare two conversations turn by turn: where did they diverge?",
            openapi_extra=links(200, GetSessionA=link("get_one_session", key="$response.body#/a/key"),
                                GetSessionB=link("get_one_session", key="$response.body#/b/key")))
def compare(request, a: str = Query(..., min_length=1, max_length=200, description="one session's key"),
            b: str = Query(..., min_length=1, max_length=200, description="the other session's key")):
    here = project(request)
    return compare_sessions(get_session(here, a), get_session(here, b))
