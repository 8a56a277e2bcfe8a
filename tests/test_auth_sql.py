"""The statement every API request's authentication reads with, written as SQL
(sessions.access.api_keys.keys_with_prefix), and the brute-force check's own count (sessions.access.throttle.recent_failures)
read what the ORM's queries read on both databases: the count of recent failures per subject, at the
window's edge too, and the keys of a prefix with their project, every column converted as the ORM
converts it."""

from datetime import timedelta

import pytest
from django.db.models import Count, Q
from django.utils import timezone

from sessions.access.throttle import Scope, recent_failures
from sessions.models import AuthFailure

pytestmark = pytest.mark.django_db


def orm_counts(pairs, since) -> list[int]:
    counts = AuthFailure.objects.filter(
        Q(*[Q(scope=scope, subject=subject) for scope, subject in pairs], _connector=Q.OR), created_at__gt=since,
    ).aggregate(**{f"n{i}": Count("pk", filter=Q(scope=scope, subject=subject)) for i, (scope, subject) in enumerate(pairs)})
    return [counts[f"n{i}"] for i in range(len(pairs))]


def test_the_recent_failures_are_counted_as_the_orm_counted_them():
    now = timezone.now()
    rows = []
    for age, scope, subject in [(1, Scope.API_KEY, "10.0.0.1"), (5, Scope.API_KEY, "10.0.0.1"),
                                (299, Scope.API_KEY, "10.0.0.1"), (300, Scope.API_KEY, "10.0.0.1"),
                                (301, Scope.API_KEY, "10.0.0.1"), (2, Scope.KEY_PREFIX, "ctx_abcdefgh"),
                                (3, Scope.KEY_PREFIX, "ctx_abcdefgh"), (4, Scope.LOGIN, "10.0.0.1"),
                                (5, Scope.ACCOUNT, "o'brien \"x\" é"), (6, Scope.API_KEY, "10.0.0.2")]:
        rows.append(AuthFailure(scope=scope, subject=subject, created_at=now - timedelta(seconds=age)))
    AuthFailure.objects.bulk_create(rows)
    since = now - timedelta(seconds=300)
    cases = [
        [(Scope.API_KEY, "10.0.0.1"), (Scope.KEY_PREFIX, "ctx_abcdefgh")],
        [(Scope.API_KEY, "10.0.0.1")],
        [(Scope.LOGIN, "10.0.0.1"), (Scope.ACCOUNT, "o'brien \"x\" é")],
        [(Scope.API_KEY, "10.9.9.9"), (Scope.KEY_PREFIX, "ctx_nothing")],
    ]
    for pairs in cases:
        assert recent_failures(pairs, since) == orm_counts(pairs, since), pairs
    assert recent_failures(cases[0], since) == [3, 2]  # the one exactly 300 s old is outside the window
    assert recent_failures(cases[3], since) == [0, 0]


def test_the_keys_of_a_prefix_are_read_as_the_orm_reads_them(project, other_project):
    from django.forms.models import model_to_dict

    from sessions.access.api_keys import PREFIX_LENGTH, create_api_key, keys_with_prefix, revoke
    from sessions.models import ApiKey

    project.max_tokens, project.auto_compact, project.summarizer = 5_000, False, "openai"
    project.save()
    keys = [create_api_key(project, "first")[0], create_api_key(other_project, "second")[0]]
    revoke(keys[1])
    ApiKey.objects.filter(pk=keys[0].pk).update(last_used_at=timezone.now(), usage_since=12.5, usage_bytes=10**12)
    shared = "ctx_" + "s" * (PREFIX_LENGTH - 4)
    ApiKey.objects.filter(pk__in=[k.pk for k in keys]).update(prefix=shared)  # two keys, one prefix
    expected = list(ApiKey.objects.select_related("project").filter(prefix=shared).order_by("pk"))
    found, _ = keys_with_prefix(shared)
    assert [model_to_dict(k) for k in found] == [model_to_dict(k) for k in expected]
    assert [(k.created_at, k.last_used_at, k.revoked_at, k.usage_since, k.usage_bytes) for k in found] == [
        (k.created_at, k.last_used_at, k.revoked_at, k.usage_since, k.usage_bytes) for k in expected]
    assert [model_to_dict(k.project) | {"created_at": k.project.created_at} for k in found] == [
        model_to_dict(k.project) | {"created_at": k.project.created_at} for k in expected]
    assert found[0].project.auto_compact is False and found[0].project.max_tokens == 5_000
    assert found[1].revoked_at is not None and found[0].last_used_at.tzinfo is not None
    assert keys_with_prefix("ctx_nothing") == ([], [])


def test_the_key_lookup_counts_the_failures_of_its_subjects_with_or_without_a_key(project):
    from sessions.access.api_keys import create_api_key, keys_with_prefix

    key = create_api_key(project, "counted")[0]
    now = timezone.now()
    AuthFailure.objects.bulk_create([AuthFailure(scope=scope, subject=subject, created_at=now - timedelta(seconds=age))
                                     for age, scope, subject in [(1, Scope.API_KEY, "10.0.0.1"), (2, Scope.API_KEY, "10.0.0.1"),
                                                                 (400, Scope.API_KEY, "10.0.0.1"),
                                                                 (3, Scope.KEY_PREFIX, key.prefix)]])
    since = now - timedelta(seconds=300)
    subjects = [(Scope.API_KEY, "10.0.0.1"), (Scope.KEY_PREFIX, key.prefix)]
    found, failures = keys_with_prefix(key.prefix, subjects, since)
    assert [k.pk for k in found] == [key.pk] and failures == orm_counts(subjects, since) == [2, 1]
    found, failures = keys_with_prefix("ctx_nothing", subjects, since)
    assert found == [] and failures == [2, 1]
