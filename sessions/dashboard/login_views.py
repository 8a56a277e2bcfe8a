"""The log-in pages, the dashboard's and the Django admin's, refused with 429 while the client's
address or the username has too many failed log-ins: the password is then not checked at all. Each
log-in is recorded as a failure before its password is checked (sessions.access.throttle, under a lock, so
parallel guesses cannot overshoot the limit) and given back unless Django's user_login_failed signal
said it failed; both pages share one count."""

import math
from functools import wraps

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme

from sessions.access import throttle


def refused_while_blocked(view):
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        try:
            attempt = throttle.record_failure(request, throttle.Scope.LOGIN, throttle.posted_username(request))
        except throttle.TooManyAuthFailures as exc:
            return blocked(request, exc.retry_after)
        request.login_attempt = attempt
        try:
            return view(request, *args, **kwargs)
        finally:
            if not attempt.failed:  # a right password, or a form that checked none
                attempt.release()

    return wrapped


def blocked(request: HttpRequest, seconds: int) -> HttpResponse:
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        next_url = ""
    response = render(request, "registration/login.html", {
        "form": AuthenticationForm(request),
        "next": next_url,
        "blocked": True,
        "retry_minutes": math.ceil(seconds / 60),
    }, status=429)
    response["Retry-After"] = str(seconds)
    add_never_cache_headers(response)
    return response


login = refused_while_blocked(auth_views.LoginView.as_view(template_name="registration/login.html"))
admin_login = refused_while_blocked(admin.site.login)
