"""manage.py demo_data: demo sessions and logins for development. With DEBUG off it refuses unless forced,
and then never gives the logins the documented development password."""

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from sessions.models import Session

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("demo_data", *args, stdout=out)
    return out.getvalue()


def test_with_debug_off_it_refuses_to_run_unless_forced(settings):
    settings.DEBUG = False

    with pytest.raises(CommandError, match="--force"):
        run()

    assert not get_user_model().objects.exists()
    assert not Session.objects.exists()


def test_forced_with_debug_off_the_logins_get_a_random_password_printed_once(settings):
    settings.DEBUG = False

    output = run("--force")

    shown = set(re.findall(r"Log in as (\w+) / (\S+)", output))
    assert {username for username, _ in shown} == {"admin", "editor", "viewer"}
    (password,) = {password for _, password in shown}
    assert len(password) >= 20 and password != "ctxweb-demo"
    users = get_user_model().objects.all()
    assert all(user.check_password(password) and not user.check_password("ctxweb-demo") for user in users)
    again = run("--force")
    assert password not in again and "Log in as" not in again
    assert all(user.check_password(password) for user in get_user_model().objects.all())


def test_with_debug_on_the_logins_get_the_development_password(settings, monkeypatch):
    settings.DEBUG = True
    monkeypatch.delenv("CTXWEB_DEMO_PASSWORD", raising=False)

    output = run()

    assert "Log in as admin / ctxweb-demo" in output
    assert get_user_model().objects.get(username="viewer").check_password("ctxweb-demo")
