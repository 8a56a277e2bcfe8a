"""The pages Django shows for 400, 403, 404 and 500 with DEBUG off (ctxweb/urls.py names them): the
site's layout with its navigation, a sentence saying what happened and what to do. Under /api/ the
answer is the API's JSON error shape instead, so a client never gets HTML."""

from django.conf import settings
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
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
    response = render(request, template, {"detail": _detail(exception)}, status=status)
    response.product_page = True
    return response


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


# Paths whose 404 is not a page of the product: the API answers JSON, the admin has its own pages, and
# the static files are served by WhiteNoise or runserver.
NOT_PRODUCT_PAGES = (API_PREFIX, "/admin/", "/static/", "/v1/")


class ProductNotFoundPage:
    """With DEBUG on (`make run`), a page of the product that does not exist still gets the product's 404
    page, in its layout, rather than Django's technical one (unstyled, listing every URL pattern, 980 px
    wide on a phone). A view's Http404 keeps its sentence; a URL that matches nothing gets the page
    without one. With DEBUG off, Django already uses page_not_found (handler404): nothing changes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (settings.DEBUG and response.status_code == 404 and not getattr(response, "product_page", False)
                and response.get("Content-Type", "").startswith("text/html")
                and not request.path.startswith(NOT_PRODUCT_PAGES)):
            return page_not_found(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if settings.DEBUG and isinstance(exception, Http404) and not request.path.startswith(NOT_PRODUCT_PAGES):
            return page_not_found(request, exception)
        return None
