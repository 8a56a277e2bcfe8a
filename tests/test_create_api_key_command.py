"""manage.py create_api_key: a second active key of the same name in a project is refused unless
--allow-duplicate says it is meant (running the README walk-through twice then says why)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sessions.access.api_keys import authenticate, revoke
from sessions.models import ApiKey, Project

pytestmark = pytest.mark.django_db


def create(*args) -> str:
    out, err = StringIO(), StringIO()
    call_command("create_api_key", *args, stdout=out, stderr=err)
    return out.getvalue().strip()


@pytest.fixture
def project():
    return Project.objects.get_or_create(name="default")[0]


def test_it_prints_a_working_secret(project):
    secret = create("default", "readme-walkthrough")
    assert authenticate(secret).name == "readme-walkthrough"


def test_it_refuses_a_second_key_with_the_same_name_and_says_what_to_do(project):
    create("default", "readme-walkthrough")
    with pytest.raises(CommandError) as refused:
        create("default", "readme-walkthrough")
    message = str(refused.value)
    assert "already has an active API key named 'readme-walkthrough'" in message
    assert "--allow-duplicate" in message and "revoke" in message
    assert ApiKey.objects.filter(project=project, name="readme-walkthrough").count() == 1


def test_allow_duplicate_creates_a_second_key_with_the_name(project):
    first = create("default", "readme-walkthrough")
    second = create("default", "readme-walkthrough", "--allow-duplicate")
    assert first != second
    assert authenticate(second).name == "readme-walkthrough"
    assert ApiKey.objects.filter(project=project, name="readme-walkthrough").count() == 2


def test_the_same_name_in_another_project_or_after_revoking_is_fine(project):
    Project.objects.get_or_create(name="other")
    create("default", "app")
    assert authenticate(create("other", "app")).project.name == "other"
    revoke(ApiKey.objects.get(project=project, name="app"))
    assert authenticate(create("default", "app")).project == project
