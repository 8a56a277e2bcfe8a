"""What the schemathesis tests (test_fuzz.py, stateful test_stateful.py) share: the schema of the app
in this process, the checks every response must pass, and the host its WSGI client sends."""

import json
from functools import cache

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ctxweb.wsgi import application

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
SCHEMA_PATH = "/api/v1/openapi.json"


@cache
def served_schema() -> str:
    """The schema the app serves, fetched once per process (generating it takes seconds): a test loads
    it when it runs, not when its module is collected, which every xdist worker does."""
    return json.dumps(schemathesis.openapi.from_wsgi(SCHEMA_PATH, application).raw_schema)


def load_schema():
    """The served schema, as schemathesis.openapi.from_wsgi loads it, in a new object each time (a test
    may change its configuration). The WSGI app runs in this process, on the test's database connection."""
    schema = schemathesis.openapi.from_file(served_schema())
    schema.app = application
    schema.location = SCHEMA_PATH
    return schema


@pytest.fixture
def wsgi_host(settings):
    """schemathesis's WSGI client sends `Host: localhost`."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    settings.SECURE_SSL_REDIRECT = False


@pytest.fixture
def rate_limits_off(settings):
    """The fuzzers send more than a minute's worth of requests with one key (1,200 a minute by default)
    on a fast machine: a 429 that depends on how fast the machine ran would make the same drawn data get
    a different answer, which Hypothesis reports as a flaky strategy. tests/api/test_rate_limits.py tests
    the limits themselves."""
    settings.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE = 0
    settings.CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE = 0


@pytest.fixture
def connection_kept_across_requests():
    """The end of a request closes a database connection that is not in autocommit mode, which would
    end the test's transaction (the `db` fixture's). Django's test client holds back that close for the
    request it makes; schemathesis's WSGI client does not, so it is held back here for the test's
    requests, as Django's client does: the tests need no commit, and no flush of every table after each."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
