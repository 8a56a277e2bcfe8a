from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.urls import include, path, re_path

from sessions.dashboard import error_pages, login_views

from .api import api
from .otlp import receive_traces


def api_not_found(request, rest=""):
    return JsonResponse({"detail": "No such API endpoint.", "code": "not_found"}, status=404)


urlpatterns = [
    path("login/", login_views.login, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Before the admin's own URLs, so its log-in page is throttled like the dashboard's.
    path("admin/login/", login_views.admin_login),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
    # OTLP/HTTP's standard path, so an exporter pointed at this host's root finds it (docs/capture-and-import.md).
    path("v1/traces", receive_traces, name="otlp_traces"),
    path("", include("sessions.urls")),
]

# With DEBUG off: the site's pages for errors (JSON under /api/), see sessions/dashboard/error_pages.py.
handler400 = error_pages.bad_request
handler403 = error_pages.permission_denied
handler404 = error_pages.page_not_found
handler500 = error_pages.server_error
