"""The system checks of the client address settings: behind a TLS proxy, a list of trusted proxies is
needed, or every client has the proxy's address and shares one count of failed log-ins and API keys."""

from sessions.checks import check_auth_failure_limits


def ids(settings) -> list[str]:
    return [message.id for message in check_auth_failure_limits(None)]


def test_behind_a_tls_proxy_without_trusted_proxies_it_warns(settings):
    settings.BEHIND_TLS_PROXY = True
    settings.CTXWEB_TRUSTED_PROXIES = []

    messages = check_auth_failure_limits(None)
    assert [m.id for m in messages] == ["ctxweb.W014"]
    assert "CTXWEB_TRUSTED_PROXIES" in messages[0].msg and "127.0.0.1" in messages[0].hint


def test_behind_a_tls_proxy_with_trusted_proxies_it_is_quiet(settings):
    settings.BEHIND_TLS_PROXY = True
    settings.CTXWEB_TRUSTED_PROXIES = ["127.0.0.1", "10.0.0.0/8", "::1"]

    assert ids(settings) == []


def test_without_a_tls_proxy_it_is_quiet(settings):
    settings.BEHIND_TLS_PROXY = False
    settings.CTXWEB_TRUSTED_PROXIES = []

    assert ids(settings) == []


def test_an_entry_that_is_no_address_or_network_is_an_error(settings):
    settings.CTXWEB_TRUSTED_PROXIES = ["127.0.0.1", "proxy.example.com", "10.0.0.0/33"]

    messages = check_auth_failure_limits(None)
    assert [m.id for m in messages] == ["ctxweb.E013"]
    assert "proxy.example.com, 10.0.0.0/33" in messages[0].msg
