from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.urls import include, path, re_path

from .api import api


def api_not_found(request, rest=""):
    return JsonResponse({"detail": "No such API endpoint.", "code": "not_found"}, status=404)


urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="registration/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
    path("", include("sessions.urls")),
]
