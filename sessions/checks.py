"""Configuration mistakes reported at start-up by Django's system checks."""

from django.conf import settings
from django.core.checks import Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from sessions.context.summarizers import SUMMARIZERS
from sessions.wire.tokens import load_encoding


@register()
def check_token_encoding(app_configs, **kwargs):
    try:
        load_encoding(settings.CTXWEB_TOKEN_ENCODING)
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="ctxweb.E001")]
    return []


def _at_least(name: str, minimum: int, check_id: str, unit: str = "") -> list[Error]:
    """An error when setting `name` is below `minimum`."""
    if getattr(settings, name) >= minimum:
        return []
    wording = "must not be negative" if minimum == 0 else f"must be at least {minimum}{unit}"
    return [Error(f"{name} {wording}.", id=check_id)]


@register()
def check_compaction_defaults(app_configs, **kwargs):
    errors = _at_least("CTXWEB_MAX_TOKENS", 1, "ctxweb.E002") + _at_least("CTXWEB_KEEP_RECENT_TOKENS", 0, "ctxweb.E003")
    errors += _at_least("CTXWEB_COMPACTION_RUN_MAX_TOKENS", 1, "ctxweb.E007")
    errors += _at_least("CTXWEB_COMPACTION_RUN_MAX_BYTES", 1, "ctxweb.E008", " byte")
    if settings.CTXWEB_SUMMARIZER not in SUMMARIZERS:
        errors.append(Error(f"CTXWEB_SUMMARIZER must be one of {', '.join(SUMMARIZERS)}.", id="ctxweb.E004"))
    if settings.CTXWEB_SUMMARIZER_TIMEOUT <= 0:
        errors.append(Error("CTXWEB_SUMMARIZER_TIMEOUT must be more than 0 seconds.", id="ctxweb.E005"))
    return errors


@register()
def check_auth_failure_limits(app_configs, **kwargs):
    from sessions.access.throttle import parse_networks

    errors = (
        _at_least("CTXWEB_AUTH_FAILURE_LIMIT", 1, "ctxweb.E010")
        + _at_least("CTXWEB_AUTH_FAILURE_WINDOW", 1, "ctxweb.E011", " second")
        + _at_least("CTXWEB_TRUSTED_PROXY_COUNT", 0, "ctxweb.E012")
    )
    _, invalid = parse_networks(tuple(settings.CTXWEB_TRUSTED_PROXIES))
    if invalid:
        errors.append(Error(f"CTXWEB_TRUSTED_PROXIES: not an IP address or network: {', '.join(invalid)}.",
                            id="ctxweb.E013"))
    if settings.BEHIND_TLS_PROXY and not settings.CTXWEB_TRUSTED_PROXIES:
        errors.append(Warning(
            "BEHIND_TLS_PROXY is set but CTXWEB_TRUSTED_PROXIES is empty: every client has the proxy's "
            "address, so failed log-ins and API keys of anyone block everyone.",
            hint="Set CTXWEB_TRUSTED_PROXIES to the proxy's address, e.g. 127.0.0.1 when it runs on this machine.",
            id="ctxweb.W014",
        ))
    return errors


@register()
def check_rate_limits(app_configs, **kwargs):
    return (
        _at_least("CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE", 0, "ctxweb.E015")
        + _at_least("CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE", 0, "ctxweb.E016")
        + _at_least("CTXWEB_MAX_TOKEN_COUNT_CHARS", 1, "ctxweb.E017")
    )


@register()
def check_compaction_queue(app_configs, **kwargs):
    errors = _at_least("CTXWEB_COMPACTION_MAX_ATTEMPTS", 1, "ctxweb.E020")
    for name, check_id in (("CTXWEB_COMPACTION_WAIT_SECONDS", "ctxweb.E021"), ("CTXWEB_COMPACTION_RETRY_DELAY", "ctxweb.E022")):
        errors += _at_least(name, 0, check_id)
    for name, check_id in (("CTXWEB_COMPACTION_LEASE_SECONDS", "ctxweb.E023"), ("CTXWEB_COMPACTION_SWEEP_INTERVAL", "ctxweb.E024")):
        if getattr(settings, name) <= 0:
            errors.append(Error(f"{name} must be more than 0 seconds.", id=check_id))
    return errors
