"""The pages Django shows for 400, 403, 404 and 500 with DEBUG off (ctxweb/urls.py names them): the
site's layout with its navigation, a sentence saying what happened and what to do. Under /api/ the
answer is the API's JSON error shape instead, so a client never gets HTML."""

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.urls import Resolver404

API_PREFIX = "/api/"


def _api_error(status: int, detail: str, code: str) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": code}, status=status)


def _detail(exception) -> str:
    """The message a view raised with (`Http404("No such session.")`), when it is a sentence for people;
    not the resolver's own (a dict of the patterns tried)."""
    if exception is None or isinstance(exception, Resolver404) or not exception.args:
        return ""
    message = exception.args[0]
    return message if isinstance(message, str) else ""


def _page(request: HttpRequest, template: str, status: int, exception=None) -> HttpResponse:
    return render(request, template, {"detail": _detail(exception)}, status=status)


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return _api_error(400, "Bad request.", "bad_request")
    # A view's BadRequest says what was wrong; a SuspiciousOperation's message is for the log only.
    return _page(request, "400.html", 400, exception if type(exception) is BadRequest else None)


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return _api_error(403, "Forbidden.", "forbidden")
    return _page(request, "403.html", 403, exception)


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return _api_error(404, "Not found.", "not_found")
    return _page(request, "404.html", 404, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Rendered without the request: whatever broke (the database, a context processor) may break the
    page's context too. 500.html needs nothing but the static files."""
    if request.path.startswith(API_PREFIX):
        return _api_error(500, "Internal error; it was logged.", "internal_error")
    return HttpResponse(loader.get_template("500.html").render(), status=500)
