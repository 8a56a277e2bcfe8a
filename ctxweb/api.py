"""The one NinjaAPI of the project, mounted at /api/v1/, and its error handling: every error is
JSON {"detail", "code"} with the right status, and nothing a client sends turns into a 500."""

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from sessions.access import rate_limits, throttle
from sessions.access.api_keys import AuthError, authenticate, keys_with_prefix, secret_prefix
from sessions.errors import DomainError
from sessions.http.api import router as sessions_router
from sessions.wire.ctxweb import UNION_TAGS
from sessions.wire.json_body import load_json_body
from sessions.wire.validation import field_path, plain_message

LIMIT_CODES = {"text_too_long", "json_too_deep", "image_too_large"}

logger = logging.getLogger("ctxweb.api")


class ApiKeyAuth(HttpBearer):
    def __call__(self, request):
        header = request.headers.get("Authorization") or ""
        scheme, _, secret = header.partition(" ")
        secret = secret.strip() if scheme.lower() == "bearer" else ""
        prefix = secret_prefix(secret)
        # An address, or a key prefix, over the limit of failed keys is refused before its key is looked at.
        if not header or not secret:
            throttle.check(request, throttle.Scope.API_KEY, prefix)
        if not header:
            raise AuthError("Send your API key as 'Authorization: Bearer <key>'.", code="missing_api_key")
        if not secret:
            raise AuthError("The Authorization header must be 'Bearer <key>'.", code="malformed_authorization")
        # The keys with the prefix and the failures of its subjects are read in one query; only a subject
        # over the limit costs the check's own queries, which say for how long it is refused.
        subjects = throttle.subjects(request, throttle.Scope.API_KEY, prefix)
        candidates, failures = keys_with_prefix(prefix, subjects, throttle.window_start())
        if throttle.over_limit(failures):
            throttle.check(request, throttle.Scope.API_KEY, prefix)
        key = self.authenticate(request, secret, candidates)
        request.rate_limit = rate_limits.admit(key, len(request.body))  # its RateLimit-* headers: RateLimitHeaders
        return key

    def authenticate(self, request, token, candidates=None):
        try:
            return authenticate(token, candidates)
        except AuthError:
            # 429 instead when the limit was reached by attempts running at the same time as this one.
            throttle.record_failure(request, throttle.Scope.API_KEY, secret_prefix(token))
            raise


class JsonBodyParser(Parser):
    """Request bodies are strict JSON (sessions.wire.json_body.load_json_body). ninja turns any error of
    the parser into a 400; on_http_error below gives the client the parser's own error instead."""

    def parse_body(self, request):
        return load_json_body(request.body)


class CtxwebApi(NinjaAPI):
    """The API's operation ids name the operation alone (`sessions_api_<view>`), as they did when every
    operation lived in one module: they are public (OpenAPI links, generated clients), so where a view
    lives in sessions/http/ does not change them."""

    def get_openapi_operation_id(self, operation) -> str:
        return f"sessions_api_{operation.view_func.__name__}"


api = CtxwebApi(
    title="ctxweb API",
    version="1",
    description="What did the model actually see? Append messages, fetch the model input, compact, read events.",
    auth=ApiKeyAuth(),
    urls_namespace="api",
    parser=JsonBodyParser(),
    # Deep links off: Swagger UI puts them as links inside each operation's toggle button, which WCAG
    # forbids (nested interactive controls); templates/ninja/swagger.html fixes the page's other failures.
    docs=Swagger(settings={"deepLinking": False}),
)
api.add_router("/", sessions_router)


def error(request, status: int, detail: str, code: str, **extra):
    return api.create_response(request, {"detail": detail, "code": code, **extra}, status=status)


@api.exception_handler(DomainError)
def on_domain_error(request, exc: DomainError):
    return api.create_response(request, exc.as_dict(), status=exc.status)


@api.exception_handler(throttle.TooManyAuthFailures)
@api.exception_handler(rate_limits.RateLimited)
def on_too_many_requests(request, exc: throttle.TooManyAuthFailures | rate_limits.RateLimited):
    response = api.create_response(request, exc.as_dict(), status=exc.status)
    response["Retry-After"] = str(exc.retry_after)
    request.rate_limit = getattr(exc, "quota", None)
    return response


@api.exception_handler(ValidationError)
def on_validation_error(request, exc: ValidationError):
    """A body, path or query value that does not fit its schema: the same plain words and limit codes
    (text_too_long, json_too_deep) as sessions.wire.validation gives everywhere else; invalid_request
    otherwise."""
    errors = []
    for e in exc.errors:
        loc = [part for part in e.get("loc", ()) if part not in UNION_TAGS]
        while loc[:1] == ["body"] and len(loc) > 1:
            loc = loc[1:]
        errors.append({"loc": [str(part) for part in loc], "msg": plain_message(e), "type": str(e.get("type", ""))})
    if not errors:
        return error(request, 422, "Invalid request.", "invalid_request")
    first = exc.errors[0]
    code = first.get("type") if first.get("type") in LIMIT_CODES else "invalid_request"
    where = field_path(errors[0]["loc"])
    status = 413 if code == "image_too_large" else 422
    return error(request, status, f"Invalid request: {where} {errors[0]['msg']}", code, errors=errors)


@api.exception_handler(AuthenticationError)
def on_authentication_error(request, exc):
    return error(request, 401, "Send your API key as 'Authorization: Bearer <key>'.", "missing_api_key")


@api.exception_handler(HttpError)
def on_http_error(request, exc: HttpError):
    cause = exc.__cause__  # what the body parser raised, when this is ninja's "cannot parse" 400
    if isinstance(cause, DomainError):
        return on_domain_error(request, cause)
    if isinstance(cause, RequestDataTooBig):
        return on_too_big(request, cause)
    code = "invalid_json" if exc.status_code == 400 else "http_error"
    detail = "The request body is not valid JSON." if exc.status_code == 400 else str(exc)
    return error(request, exc.status_code, detail, code)


@api.exception_handler(Http404)
def on_not_found(request, exc):
    return error(request, 404, "Not found.", "not_found")


@api.exception_handler(RequestDataTooBig)
def on_too_big(request, exc):
    return error(request, 413, "The request body is too large.", "request_too_large")


@api.exception_handler(Exception)
def on_unexpected(request, exc):
    logger.exception("unhandled error in %s %s", request.method, request.path)
    return error(request, 500, "Internal error; it was logged.", "internal_error")
