"""Pinned facts over the API (issue 41, item 1): PUT /sessions/{key} and PATCH /project take `pinned_facts`,
checked whole before anything is stored (tests/test_pinned_facts.py holds what compaction does with them)."""

import pytest

from sessions.models import Session
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

ORDER = {"name": "order id", "pattern": "W[0-9]{7}"}


def test_pinned_facts_over_the_api(api, project):
    assert api.put("/sessions/chat", json={"pinned_facts": [ORDER]}).json()["pinned_facts"] == [ORDER]
    assert_error(api.put("/sessions/chat", json={"pinned_facts": [{"name": "x", "pattern": "(a"}]}), 422,
                 "invalid_pinned_facts")
    assert Session.objects.get(key="chat").pinned_facts == [ORDER]
    body = api.patch("/project", json={"pinned_facts": [{"name": "card last four", "value": "7447"}]}).json()
    assert body["pinned_facts"] == [{"name": "card last four", "value": "7447"}]
    assert_error(api.patch("/project", json={"pinned_facts": [{"name": "x", "pattern": "a*"}]}), 422,
                 "invalid_pinned_facts")
    project.refresh_from_db()
    assert project.pinned_facts == [{"name": "card last four", "value": "7447"}]


