"""What the schemathesis tests (test_fuzz.py, stateful test_stateful.py) share: the schema of the app
in this process, the checks every response must pass, and the host its WSGI client sends."""

import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ctxweb.wsgi import application

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def load_schema():
    """The served schema, loaded when a test module is collected (the endpoint needs no database). The
    WSGI app runs in this process, on the test's database connection."""
    return schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)


@pytest.fixture
def wsgi_host(settings):
    """schemathesis's WSGI client sends `Host: localhost`."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    settings.SECURE_SSL_REDIRECT = False
