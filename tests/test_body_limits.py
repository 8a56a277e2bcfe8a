"""Nothing reads a request's body before the request is allowed (security issue 37, item 9): a dashboard
body from a visitor who is not logged in goes to the log-in page unread (a 200 MB upload used to be spooled
to disk before the 403), a body over its page's limit is refused from its Content-Length, and the API and
the OTLP receiver, which authenticate with a key, refuse theirs from the header too. Each body here is a
stream that fails the test when more than a few kB of it are read."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from sessions.access.api_keys import create_api_key
from sessions.models import ImportJob, Membership, Message, Session
from tests.importers.conftest import HOST, client_for

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024
GRACE = 4096  # bytes of a body a refused request may read, at most
FORM = "multipart/form-data; boundary=b"
FILE_PART = (b'--b\r\nContent-Disposition: form-data; name="files"; filename="big.json"\r\n'
             b"Content-Type: application/json\r\n\r\n")


class Body:
    """A request body of `size` bytes, a form's file part and then zeros, made as it is read; reading more
    than GRACE bytes of it fails the test."""

    def __init__(self, size: int):
        self.size, self.read_bytes = size, 0

    def read(self, size=-1):
        left = self.size - self.read_bytes
        size = left if size is None or size < 0 else min(size, left)
        start, self.read_bytes = self.read_bytes, self.read_bytes + size
        assert self.read_bytes <= GRACE, f"{self.read_bytes:,} bytes of the body were read"
        return (FILE_PART + bytes(GRACE + 1))[start:self.read_bytes]

    readline = read


def send(client: Client, path: str, size: int, content_type: str = FORM, **headers):
    """POST a body of `size` bytes that must stay unread; the response, with the body as .sent."""
    body = Body(size)
    response = client.generic("POST", path, headers=headers, CONTENT_TYPE=content_type, CONTENT_LENGTH=str(size),
                              **{"wsgi.input": body})
    response.sent = body
    return response


def anonymous_with_a_csrf_cookie() -> Client:
    """A visitor who is not logged in but has the CSRF cookie (any visit to the log-in page gives one):
    CsrfViewMiddleware would then read the form for its token."""
    client = Client(HTTP_HOST=HOST, enforce_csrf_checks=True)
    client.get(reverse("login"))
    assert "csrftoken" in client.cookies
    return client


@pytest.fixture
def editor(project):
    return client_for(project, Membership.Role.EDITOR, "editor")


@pytest.fixture
def api_secret(project) -> str:
    return create_api_key(project, "app")[1]


def assert_sent_to_login(response, path: str, login: str = "/login/"):
    assert response.status_code == 302, (response.status_code, response.content[:200])
    assert response["Location"].startswith(f"{login}?next="), response["Location"]
    assert path in response["Location"].replace("%2F", "/")


# --- visitors who are not logged in ---------------------------------------------------------------


def test_an_anonymous_200_mb_upload_to_the_import_page_goes_to_login_unread(project):
    response = send(anonymous_with_a_csrf_cookie(), "/import/", 200 * MiB)

    assert_sent_to_login(response, "/import/")
    assert response.sent.read_bytes == 0
    assert not ImportJob.objects.exists()


@pytest.mark.parametrize(("path", "login"), [
    ("/tags/", "/login/"),
    ("/api-keys/", "/login/"),
    ("/p/default/members/", "/login/"),
    ("/p/default/s/chat/notes/", "/login/"),
    ("/admin/sessions/session/add/", "/admin/login/"),
])
def test_an_anonymous_body_to_any_other_page_goes_to_login_unread(project, path, login):
    response = send(anonymous_with_a_csrf_cookie(), path, 5 * MiB, "application/x-www-form-urlencoded")

    assert_sent_to_login(response, path, login)
    assert response.sent.read_bytes == 0


@pytest.mark.parametrize("path", ["/login/", "/admin/login/", "/logout/"])
def test_an_anonymous_body_to_a_log_in_page_past_64_kb_is_413_unread(project, path):
    response = send(anonymous_with_a_csrf_cookie(), path, MiB)

    assert response.status_code == 413
    assert "65,536 bytes" in response.content.decode()
    assert response.sent.read_bytes == 0


def test_the_log_in_form_still_logs_in_with_its_csrf_token(project):
    get_user_model().objects.create_user("alice", "alice@example.com", "pw")
    client = anonymous_with_a_csrf_cookie()

    response = client.post(reverse("login"), {"username": "alice", "password": "pw",
                                              "csrfmiddlewaretoken": client.cookies["csrftoken"].value})

    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get(reverse("sessions")).status_code == 200


def test_an_anonymous_form_without_a_token_is_still_refused_by_csrf(project):
    """A body is needed for the gate: an empty one reaches CsrfViewMiddleware, which refuses it as before."""
    response = Client(HTTP_HOST=HOST, enforce_csrf_checks=True).post(reverse("login"), {})

    assert response.status_code == 403


# --- logged-in members ----------------------------------------------------------------------------


def test_an_upload_over_the_import_limit_is_413_unread(editor, settings):
    settings.CTXWEB_MAX_IMPORT_BYTES = 100 * MiB

    response = send(editor, "/import/", 200 * MiB)

    assert response.status_code == 413
    assert "import limit of 104,857,600 bytes" in response.content.decode()
    assert response.sent.read_bytes == 0
    assert not ImportJob.objects.exists()


def test_an_upload_over_the_default_import_limit_is_413_unread(editor, settings):
    response = send(editor, "/import/", settings.CTXWEB_MAX_IMPORT_BYTES + 65 * 1024)

    assert response.status_code == 413
    assert response.sent.read_bytes == 0


@pytest.mark.parametrize("content_type", [FORM, "application/x-www-form-urlencoded"])
def test_a_body_over_the_form_limit_to_another_page_is_413_unread(editor, settings, content_type):
    response = send(editor, "/tags/", settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 65 * 1024, content_type)

    assert response.status_code == 413
    assert response.sent.read_bytes == 0


def test_a_content_length_that_is_not_a_size_is_400(editor):
    response = editor.generic("POST", "/tags/", CONTENT_TYPE=FORM, CONTENT_LENGTH="-5")

    assert response.status_code == 400


# --- the API and the OTLP receiver ----------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["application/json", FORM])
def test_an_api_body_over_the_request_limit_is_413_unread(api_secret, settings, content_type):
    response = send(Client(HTTP_HOST=HOST), "/api/v1/sessions/chat/messages", 200 * MiB, content_type,
                    Authorization=f"Bearer {api_secret}")

    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert response.sent.read_bytes == 0


@pytest.mark.parametrize("content_type", ["application/x-protobuf", FORM])
def test_an_otlp_body_over_the_request_limit_is_413_unread(api_secret, content_type):
    response = send(Client(HTTP_HOST=HOST), "/v1/traces", 200 * MiB, content_type,
                    Authorization=f"Bearer {api_secret}")

    assert response.status_code == 413
    assert response.sent.read_bytes == 0


def test_a_form_posted_to_the_api_is_a_4xx_not_a_500(api_secret):
    response = Client(HTTP_HOST=HOST).post("/api/v1/sessions/chat/messages", {"messages": "x"},
                                           headers={"Authorization": f"Bearer {api_secret}"})

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_json"
    assert not Session.objects.exists()


def test_an_api_body_nested_past_the_limit_is_422_before_it_is_parsed(api_secret, monkeypatch):
    """Item 11: 10 MB of "[" (the request limit) is refused by the depth check, never handed to json.loads."""
    body = b'{"messages": ' + b"[" * (10 * MiB - 100)
    loads = json.loads

    def unless_the_body(text, *args, **kwargs):
        assert len(text) < MiB, "the body was parsed"
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", unless_the_body)

    response = Client(HTTP_HOST=HOST).post("/api/v1/sessions/chat/messages", body, content_type="application/json",
                                           headers={"Authorization": f"Bearer {api_secret}"})

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "json_too_deep"
    assert "nested more than 40 levels deep" in response.json()["detail"]
    assert not Message.objects.exists()
