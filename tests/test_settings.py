"""Production settings refuse to start without a real secret, and pass Django's deploy checks."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
SETUP = "import django; django.setup()"


def run(args: list[str], **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "ALLOWED_HOSTS")}
    environ.update(DJANGO_SETTINGS_MODULE="ctxweb.settings", **env)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120
    )


def test_it_refuses_to_start_without_a_secret_key_when_debug_is_off():
    result = run(["-c", SETUP], DEBUG="0")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY" in result.stderr


def test_it_refuses_a_short_secret_key_when_debug_is_off():
    result = run(["-c", SETUP], DEBUG="0", SECRET_KEY="too-short")
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_it_starts_with_a_real_secret_key_when_debug_is_off():
    result = run(["-c", SETUP + "; from django.conf import settings; print(settings.DEBUG)"],
                 DEBUG="0", SECRET_KEY=secrets.token_urlsafe(38)[:50])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_it_starts_without_a_secret_key_in_development():
    result = run(["-c", SETUP], DEBUG="1")
    assert result.returncode == 0, result.stderr


def test_the_deploy_checks_pass_in_production():
    result = run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        DEBUG="0", SECRET_KEY=secrets.token_urlsafe(64), ALLOWED_HOSTS="example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_sqlite_syncs_every_commit_to_disk(db):
    """synchronous=FULL: with WAL, NORMAL may lose the last commits on a power cut (docs/security.md)."""
    if connection.vendor != "sqlite":
        pytest.skip("a SQLite setting")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        assert cursor.fetchone()[0] == 2  # FULL
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"


def test_postgres_connections_run_without_the_jit_compiler(db):
    """A rare word's full-text query ran in 25 ms and JIT-compiled for 80 ms (docs/performance.md)."""
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL setting")
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"


@pytest.mark.parametrize(("env", "options"), [
    ({}, "-c jit=off"),
    ({"CTXWEB_POSTGRES_JIT": "1"}, None),  # the server's own setting
    ({"CTXWEB_PGBOUNCER": "1"}, None),  # pgbouncer refuses the startup option: set on the role
])
def test_the_jit_option_is_given_unless_asked_not_to_or_behind_pgbouncer(env, options):
    show = SETUP + "; from django.conf import settings; print(settings.DATABASES['default'].get('OPTIONS', {}).get('options'))"
    result = run(["-c", show], DEBUG="1", DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres", **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(options)
