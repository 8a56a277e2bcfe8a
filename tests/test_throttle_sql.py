"""The brute-force check's count of recent failures, run by every API request, is written as SQL
(sessions.throttle.recent_failures): it counts what the ORM's filtered aggregate counted, per subject,
on both databases, at the window's edge too."""

from datetime import timedelta

import pytest
from django.db.models import Count, Q
from django.utils import timezone

from sessions.models import AuthFailure
from sessions.throttle import Scope, recent_failures

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
