"""API keys: created with a secret shown once, stored as a hash, revocable."""

import hashlib
import hmac
import secrets
import time

from django.utils import timezone

from sessions.access import rate_limits
from sessions.db import api_keys as key_sql
from sessions.db.rows import instance_from_row
from sessions.errors import DomainError
from sessions.models import ApiKey, Project

SECRET_PREFIX = "ctx_"
PREFIX_LENGTH = 12
# Compared against when no key has the secret's prefix, so a miss costs what a hit costs.
DUMMY_HASH = hashlib.sha256(b"ctxweb: no API key has this prefix").hexdigest()


class AuthError(DomainError):
    status = 401
    code = "invalid_api_key"


def secret_prefix(secret: str) -> str:
    """The prefix a secret is looked up and throttled by. A real key's prefix is printable ASCII and is
    itself; anything else a client sends (a NUL, which PostgreSQL text cannot hold, or a lone surrogate,
    which SQLite cannot bind) is escaped, so it matches no key and is still counted as a failure."""
    prefix = secret[:PREFIX_LENGTH]
    return prefix if prefix.isascii() and prefix.isprintable() else prefix.encode("unicode_escape").decode("ascii")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def create_api_key(project: Project, name: str, user=None, *, masked: bool = False) -> tuple[ApiKey, str]:
    """A new key and its secret. The secret is returned here once and never stored. A `masked` key is for
    people's tools: where the project masks personal data, its answers are masked."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise DomainError("An API key needs a name of 1-100 characters.", code="invalid_field")
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        project=project, name=name, prefix=secret[:PREFIX_LENGTH], secret_hash=hash_secret(secret), created_by=user,
        masked=masked,
    )
    return key, secret


def keys_with_prefix(prefix: str, subjects=(), since=None) -> tuple[list[ApiKey], list[int]]:
    """The keys whose secret starts with `prefix`, with their project, and how many failed attempts each
    (scope, subject) of `subjects` has had since `since` (the brute-force check, sessions.access.throttle), in one
    query written as SQL (sessions.db.api_keys.keys_with_prefix_rows, which says why)."""
    rows, db = key_sql.keys_with_prefix_rows(prefix, subjects, since)
    failures = list(rows[0][: len(subjects)])
    split = len(subjects) + len(ApiKey._meta.concrete_fields)
    keys = []
    for row in rows:
        if row[len(subjects)] is None:  # no key has the prefix: the one row of the failures
            continue
        key = instance_from_row(ApiKey, row[len(subjects):split], db)
        key.project = instance_from_row(Project, row[split:], db)
        keys.append(key)
    return keys, failures


def authenticate(secret: str, candidates: list[ApiKey] | None = None) -> ApiKey:
    """The key whose secret this is. It is found by its non-secret prefix (`candidates`: the keys with
    that prefix, when the caller has read them already) and its hash is compared in constant time: one
    hmac.compare_digest per key with that prefix, or one against a dummy hash when there is none, so
    neither the database nor the comparison tells how much of a guess was right."""
    if not secret or len(secret) > 200:
        raise AuthError("The API key is not valid.", code="invalid_api_key")
    digest = hash_secret(secret)
    if candidates is None:
        candidates, _ = keys_with_prefix(secret_prefix(secret))
    key = None
    for candidate in candidates:
        if hmac.compare_digest(candidate.secret_hash, digest):
            key = candidate
    if not candidates:
        hmac.compare_digest(DUMMY_HASH, digest)
    if key is None:
        raise AuthError("The API key is not valid.", code="invalid_api_key")
    if key.revoked_at is not None:
        raise AuthError("This API key was revoked.", code="revoked_api_key")
    # last_used_at is written by sessions.access.rate_limits.admit, in the UPDATE every request makes anyway.
    return key


def revoke(key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def keys_of(projects) -> list[ApiKey]:
    """The API keys of `projects`, by project, newest first, with who created them and their last minute's
    figures (`usage`, sessions.access.rate_limits.Usage), read from the same rows."""
    keys = list(
        ApiKey.objects.filter(project__in=projects).select_related("project", "created_by")
        .order_by("project__name", "-created_at")
    )
    now = time.time()
    for key in keys:
        key.usage = rate_limits.usage(key, now)
    return keys
