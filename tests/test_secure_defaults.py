"""With DEBUG off the defaults are the secure ones, with nothing else configured: secure, HttpOnly,
SameSite cookies, HTTPS redirect and HSTS, no MIME sniffing, no framing, a referrer policy and a
content security policy. Checked on the settings and on real responses of the WSGI application, in a
subprocess started like a deployment (DEBUG=0, a real SECRET_KEY, its own SQLite database)."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Environment variables that would change what is measured here.
CLEARED = ("SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "DATABASE_URL", "BEHIND_TLS_PROXY", "SECURE_SSL_REDIRECT",
           "SECURE_COOKIES", "SECURE_HSTS_SECONDS", "SECURE_HSTS_PRELOAD", "CSRF_TRUSTED_ORIGINS")

SETTINGS = """
import json, django
django.setup()
from django.conf import settings as s
print(json.dumps({name: getattr(s, name) for name in [
    "DEBUG", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "CSRF_COOKIE_HTTPONLY",
    "SESSION_COOKIE_SAMESITE", "CSRF_COOKIE_SAMESITE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_CONTENT_TYPE_NOSNIFF", "X_FRAME_OPTIONS", "SECURE_REFERRER_POLICY",
    "SECURE_PROXY_SSL_HEADER", "CTXWEB_TRUSTED_PROXY_COUNT"]}))
"""

# Requests through ctxweb.wsgi.application, as a WSGI server would make them. Prints one JSON object of
# {name: {"status", "headers": [[name, value], ...]}}. Arguments: the static root; "plain" to stop after
# the requests that need no database.
RESPONSES = r"""
import io, json, re, sys, django
from pathlib import Path
from wsgiref.util import setup_testing_defaults
django.setup()
from django.conf import settings
from django.core.management import call_command

settings.STATIC_ROOT = sys.argv[1]  # collected like a deployment does, into a temporary directory
if not (Path(sys.argv[1]) / "staticfiles.json").exists():  # once for the module: the files do not change
    call_command("collectstatic", interactive=False, verbosity=0)
plain = sys.argv[2:] == ["plain"]
if not plain:
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model
    get_user_model().objects.create_user("alice", password="a long and secret password")
from ctxweb.wsgi import application

cookies = {}

def call(method, path, https=True, headers=None, form=None):
    body = "&".join(f"{k}={v}" for k, v in (form or {}).items()).encode()
    environ = {}
    setup_testing_defaults(environ)
    environ.update({
        "REQUEST_METHOD": method, "PATH_INFO": path, "HTTP_HOST": "example.com", "SERVER_NAME": "example.com",
        "SERVER_PORT": "443" if https else "80", "wsgi.url_scheme": "https" if https else "http",
        "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/x-www-form-urlencoded", "REMOTE_ADDR": "192.0.2.1",
    })
    if cookies:
        environ["HTTP_COOKIE"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    environ.update(headers or {})
    seen = {}
    def start_response(status, response_headers, exc_info=None):
        seen["status"], seen["headers"] = int(status.split()[0]), response_headers
    content = b"".join(application(environ, start_response))
    for name, value in seen["headers"]:
        if name.lower() == "set-cookie":
            key, _, rest = value.strip().partition("=")
            cookies[key] = rest.split(";")[0]
    return {"status": seen["status"], "headers": seen["headers"]}, content

out = {}
out["http"], _ = call("GET", "/login/", https=False)
out["forwarded_https"], _ = call("GET", "/login/", https=False, headers={"HTTP_X_FORWARDED_PROTO": "https"})
if plain:
    print(json.dumps(out))
    raise SystemExit
out["login_page"], page = call("GET", "/login/")
token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
out["login"], _ = call("POST", "/login/", headers={"HTTP_ORIGIN": "https://example.com"},
                       form={"username": "alice", "password": "a long and secret password", "csrfmiddlewaretoken": token})
out["dashboard"], _ = call("GET", "/")
out["api"], _ = call("GET", "/api/v1/sessions")
print(json.dumps(out))
"""


def run(script: str, *args: str, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ.update(DJANGO_SETTINGS_MODULE="ctxweb.settings", DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), **env)
    return subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=300)


def header(response: dict, name: str) -> str | None:
    values = [v for k, v in response["headers"] if k.lower() == name.lower()]
    return values[0] if values else None


def cookie(response: dict, name: str) -> str:
    found = [v.strip() for k, v in response["headers"] if k.lower() == "set-cookie" and v.strip().startswith(name + "=")]
    assert found, (name, response["headers"])
    return found[0]


def test_the_settings_are_the_secure_ones_when_debug_is_off():
    result = run(SETTINGS)
    assert result.returncode == 0, result.stderr
    s = json.loads(result.stdout)

    assert s["DEBUG"] is False
    assert s["SESSION_COOKIE_SECURE"] and s["CSRF_COOKIE_SECURE"]
    assert s["SESSION_COOKIE_HTTPONLY"] and s["CSRF_COOKIE_HTTPONLY"]
    assert s["SESSION_COOKIE_SAMESITE"] in ("Lax", "Strict") and s["CSRF_COOKIE_SAMESITE"] in ("Lax", "Strict")
    assert s["SECURE_SSL_REDIRECT"] is True
    assert s["SECURE_HSTS_SECONDS"] > 0 and s["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    assert s["SECURE_CONTENT_TYPE_NOSNIFF"] is True
    assert s["X_FRAME_OPTIONS"] == "DENY"
    assert s["SECURE_REFERRER_POLICY"]
    # Nothing a client sends is trusted about the connection or its address unless configured.
    assert s["SECURE_PROXY_SSL_HEADER"] is None
    assert s["CTXWEB_TRUSTED_PROXY_COUNT"] == 0


@pytest.fixture(scope="module")
def static_root(tmp_path_factory) -> Path:
    """Where the static files are collected, by the first run of RESPONSES (collectstatic's hashing and
    compressing costs seconds); the module's other run serves the same files."""
    return tmp_path_factory.mktemp("static") / "static"


@pytest.fixture(scope="module")
def responses(tmp_path_factory, static_root) -> dict:
    tmp = tmp_path_factory.mktemp("secure-defaults")
    result = run(RESPONSES, str(static_root), ALLOWED_HOSTS="example.com",
                 DATABASE_URL=f"sqlite:///{tmp / 'db.sqlite3'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_plain_http_is_redirected_to_https(responses):
    assert responses["http"]["status"] == 301
    assert header(responses["http"], "Location") == "https://example.com/login/"


def test_a_forwarded_proto_header_is_not_trusted_without_behind_tls_proxy(responses):
    assert responses["forwarded_https"]["status"] == 301


@pytest.mark.parametrize("name", ["login_page", "login", "dashboard", "api"])
def test_every_response_carries_the_security_headers(responses, name):
    response = responses[name]
    hsts = header(response, "Strict-Transport-Security")
    assert hsts and "max-age=31536000" in hsts and "includeSubDomains" in hsts
    assert header(response, "X-Content-Type-Options") == "nosniff"
    assert header(response, "X-Frame-Options") == "DENY"
    assert header(response, "Referrer-Policy") == "same-origin"


@pytest.mark.parametrize("name", ["login_page", "dashboard"])
def test_dashboard_pages_carry_a_content_security_policy(responses, name):
    policy = header(responses[name], "Content-Security-Policy")
    assert policy and "script-src 'self';" in policy and "style-src 'self';" in policy and "frame-ancestors 'none'" in policy


def test_the_csrf_cookie_is_secure_httponly_and_samesite(responses):
    value = cookie(responses["login_page"], "csrftoken")
    assert "Secure" in value and "HttpOnly" in value and "SameSite=Lax" in value


def test_logging_in_sets_a_secure_httponly_samesite_session_cookie(responses):
    assert responses["login"]["status"] == 302, responses["login"]
    value = cookie(responses["login"], "sessionid")
    assert "Secure" in value and "HttpOnly" in value and "SameSite=Lax" in value
    assert responses["dashboard"]["status"] == 200


def test_behind_a_tls_proxy_its_forwarded_proto_counts_as_https(tmp_path, static_root):
    result = run(RESPONSES, str(static_root), "plain", ALLOWED_HOSTS="example.com", BEHIND_TLS_PROXY="1",
                 DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])

    assert out["http"]["status"] == 301
    assert out["forwarded_https"]["status"] == 200
    assert "max-age=31536000" in header(out["forwarded_https"], "Strict-Transport-Security")
    assert "Secure" in cookie(out["forwarded_https"], "csrftoken")
