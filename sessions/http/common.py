"""What every router of the HTTP API shares: the error responses it declares, the OpenAPI links from
one operation to the next (which values of a response feed the next call: they document the API's
workflows, and schemathesis's stateful tests follow them), and the project of the API key."""



from sessions.http import schemas as s

# 429: the caller's address has too many failed API keys (sessions/access/throttle.py).
ERRORS = {400: s.ErrorOut, 401: s.ErrorOut, 404: s.ErrorOut, 413: s.ErrorOut, 422: s.ErrorOut, 429: s.ErrorOut}


WRITE_ERRORS = {**ERRORS, 409: s.ErrorOut}


def link(view: str, request_body: dict | None = None, **parameters: str) -> dict:
    target = {"operationId": f"sessions_api_{view}", "parameters": parameters}
    return target if request_body is None else {**target, "requestBody": request_body}


def session_links(key: str = "$request.path.key") -> dict:
    """From a response about one session to every operation on that session."""
    return {
        "GetSession": link("get_one_session", key=key),
        "UpdateSession": link("put_session", key=key),
        "AppendMessages": link("append", key=key),
        "GetRawLog": link("raw_log", key=key),
        "GetModelInput": link("model_input", key=key),
        "Compact": link("request_compaction", key=key),
        "BuildRequest": link("build_next_request", key=key),
        "ListCheckpoints": link("list_checkpoints", key=key),
        "ListEvents": link("list_events", key=key),
        "ListRequests": link("list_requests", key=key),
        "Export": link("export", key=key),
        "ListReviews": link("list_reviews", key=key),
        "AddReview": link("add_review", key=key),
        "Trace": link("trace", key=key, q=key),  # where the session's own key turns up in it
        "CompareWithItself": link("compare", a=key, b=key),  # with another key, against another session
    }


def message_links(seq: str) -> dict:
    """From a response naming a stored message (by a JSON pointer to its seq) to that message."""
    return {
        "PatchMessage": link("patch_message", key="$request.path.key", seq=seq),
        "GetModelInputAsOf": link("model_input", key="$request.path.key", as_of=seq),
        "GetRawLogAfter": link("raw_log", key="$request.path.key", after=seq),
    }


def run_link(run_id: str) -> dict:
    """To the compaction run a response names."""
    return link("compaction_run", key="$request.path.key", run_id=run_id)


def links(*statuses: int, **named: dict) -> dict:
    """openapi_extra for an operation whose `statuses` responses carry these links."""
    return {"responses": {status: {"links": named} for status in statuses}}


def project(request):
    return request.auth.project
