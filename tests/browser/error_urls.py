"""The site's URLs plus two that fail on purpose, for the browser tests of the 400 and 500 pages (with
DEBUG off, as pytest-django runs the live server): the handlers are ctxweb.urls' own."""

from django.core.exceptions import BadRequest
from django.urls import path

from ctxweb.urls import handler400, handler403, handler404, handler500
from ctxweb.urls import urlpatterns as site_patterns

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]


def bad_request(request):
    raise BadRequest("Say which page you want (a test address that is always malformed).")


def server_error(request):
    raise RuntimeError("a test address that always fails (tests/browser/error_urls.py)")


urlpatterns = [
    path("test-errors/400/", bad_request),
    path("test-errors/500/", server_error),
    *site_patterns,
]
