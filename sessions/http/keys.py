"""The API key itself: which project and key a request is made with."""


from ninja import Router

from sessions.http import schemas as s
from sessions.http.common import ERRORS, link, links

router = Router(tags=["sessions"])


@router.get("/ping", response={200: s.PingOut, **ERRORS}, summary="Check an API key: which project and key it is",
            openapi_extra=links(200, ListSessions=link("list_sessions")))
def ping(request):
    """Authenticates like every other call (key lookup, brute-force check, rate limit) and reads nothing
    else: a client's cheapest check of its key and the server, and the benchmark's HTTP floor."""
    key = request.auth
    return {"project": key.project.name, "key": key.name, "key_prefix": key.prefix}
