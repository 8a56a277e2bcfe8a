"""API keys are found by their stored, non-secret prefix and their SHA-256 is compared in constant time
(hmac.compare_digest), on a hit and on a miss alike (stored only as a hash)."""

import hashlib
import hmac

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.access import api_keys
from sessions.access.api_keys import PREFIX_LENGTH, create_api_key, revoke
from sessions.models import ApiKey
from tests.api.conftest import UNKNOWN_SECRET, Api, assert_error
from tests.conftest import AUTH_FAILURE_LIMIT

pytestmark = pytest.mark.django_db


@pytest.fixture
def comparisons(monkeypatch):
    """Every hmac.compare_digest call authenticate() makes, as (stored, offered) pairs."""
    calls = []
    real = hmac.compare_digest

    def recording(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(api_keys.hmac, "compare_digest", recording)
    return calls


def twin_of(secret: str) -> str:
    """A secret with the same prefix that differs after it (its last character changed)."""
    return secret[:-1] + ("A" if secret[-1] != "A" else "B")


def test_only_the_hash_and_the_prefix_are_stored(project):
    key, secret = create_api_key(project, "app")

    assert key.prefix == secret[:PREFIX_LENGTH]
    assert key.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiKey.objects.filter(pk=key.pk).values().get())


def test_a_correct_key_is_accepted(api):
    assert api.get("/sessions").status_code == 200


def test_a_key_that_shares_the_prefix_but_differs_later_is_refused(api_key):
    twin = twin_of(api_key)
    assert twin[:PREFIX_LENGTH] == api_key[:PREFIX_LENGTH] and twin != api_key

    assert_error(Api(twin).get("/sessions"), 401, "invalid_api_key")


def test_a_key_that_differs_only_in_its_prefix_is_refused(api_key):
    changed = ("x" if api_key[5] != "x" else "y").join([api_key[:5], api_key[6:]])
    assert_error(Api(changed).get("/sessions"), 401, "invalid_api_key")


def test_a_revoked_key_is_refused(revoked_key):
    assert_error(Api(revoked_key).get("/sessions"), 401, "revoked_api_key")


def test_a_revoked_key_next_to_an_active_key_with_the_same_prefix_refuses_only_itself(project):
    """Two keys sharing a prefix (rare, but possible): each secret finds its own key."""
    active, active_secret = create_api_key(project, "active")
    retired_secret = twin_of(active_secret)
    retired = ApiKey.objects.create(project=project, name="retired", prefix=active.prefix,
                                    secret_hash=api_keys.hash_secret(retired_secret))
    revoke(retired)

    assert Api(active_secret).get("/sessions").status_code == 200
    assert_error(Api(retired_secret).get("/sessions"), 401, "revoked_api_key")


def test_a_hit_is_decided_by_compare_digest(api_key, comparisons):
    key = api_keys.authenticate(api_key)

    assert comparisons == [(key.secret_hash, api_keys.hash_secret(api_key))]


def test_a_miss_with_an_unknown_prefix_still_makes_one_comparison_against_a_dummy_hash(api_key, comparisons):
    with pytest.raises(api_keys.AuthError):
        api_keys.authenticate(UNKNOWN_SECRET)

    assert comparisons == [(api_keys.DUMMY_HASH, api_keys.hash_secret(UNKNOWN_SECRET))]


def test_a_miss_with_a_known_prefix_makes_one_comparison_against_that_key(api_key, comparisons, project):
    twin = twin_of(api_key)
    with pytest.raises(api_keys.AuthError):
        api_keys.authenticate(twin)

    stored = ApiKey.objects.get(project=project).secret_hash
    assert comparisons == [(stored, api_keys.hash_secret(twin))]


def test_the_api_compares_through_compare_digest_on_a_hit_and_on_a_miss(api, comparisons):
    assert api.get("/sessions").status_code == 200
    assert len(comparisons) == 1
    assert_error(api.get("/sessions", secret=UNKNOWN_SECRET), 401, "invalid_api_key")
    assert len(comparisons) == 2


def test_the_key_is_looked_up_by_prefix_not_by_hash(api_key):
    """The database is asked for the prefix only; the hash is compared in Python."""
    with CaptureQueriesContext(connection) as queries:
        api_keys.authenticate(api_key)

    lookup = queries.captured_queries[0]["sql"]
    assert api_keys.hash_secret(api_key) not in lookup
    assert '"prefix"' in lookup


def test_the_secret_hash_stays_unique():
    field = ApiKey._meta.get_field("secret_hash")
    assert field.unique


def test_the_prefix_is_indexed():
    assert any(index.fields == ["prefix"] for index in ApiKey._meta.indexes)


@pytest.mark.parametrize("secret", ["ctx_\x00guess", "ctx_\ud800guess", "ctx_éü\u2028guess", "ctx_'; --\\"])
def test_a_secret_no_database_can_hold_is_refused_401_and_counted(project, low_auth_failure_limit, secret):
    """A NUL (PostgreSQL text cannot hold one) or a lone surrogate (SQLite cannot bind one) in the key a
    client sends is a wrong key like any other: 401, counted against the address and the prefix, then
    429 once over the limit. Real HTTP servers do not pass such headers on; Django's test client does."""
    from django.test import Client

    from sessions.models import AuthFailure

    client = Client()
    for _ in range(AUTH_FAILURE_LIMIT):
        response = client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert_error(response, 401, "invalid_api_key")
    assert AuthFailure.objects.count() == 2 * AUTH_FAILURE_LIMIT  # the address and the prefix, each time
    assert_error(client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {secret}"), 429, "too_many_auth_failures")
