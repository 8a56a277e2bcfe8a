import pytest

from sessions.access.api_keys import create_api_key, revoke


@pytest.fixture
def api_key(project) -> str:
    """The secret of an active key of `project`."""
    return create_api_key(project, "traced-app")[1]


@pytest.fixture
def revoked_key(project) -> str:
    key, secret = create_api_key(project, "retired-app")
    revoke(key)
    return secret
