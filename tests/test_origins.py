"""The gateway allowlist and the strict URL parser (CONTRACT §3 step 3, REFERENCE-CASES 10-12,
91, 92, 99, 100)."""

from __future__ import annotations

import pytest

from app.errors import ConfigError
from app.origins import (
    OriginAllowlist,
    OriginError,
    is_loopback_host,
    normalise_allowlist_entry,
    parse_url,
)
from tests.security.conftest import make_settings


@pytest.mark.parametrize(
    "entry",
    [
        "gateway.test",  # ref 100: bare host
        "https://gateway.test",
        "https://gateway.test/",  # trailing slash
        "http://gateway.test",  # upgraded: the allowlist forces https
        "http://gateway.test/",
        "HTTPS://GATEWAY.TEST",
        "https://gateway.test:443",
        "  https://gateway.test  ",
    ],
)
def test_allowlist_entries_normalise_to_the_https_origin(entry: str) -> None:  # ref 10
    assert normalise_allowlist_entry(entry, allow_loopback_http=False) == "https://gateway.test"


def test_allowlist_keeps_a_non_default_port() -> None:
    assert (
        normalise_allowlist_entry("gateway.test:8443", allow_loopback_http=False)
        == "https://gateway.test:8443"
    )


@pytest.mark.parametrize("entry", ["", "   ", "\t"])
def test_empty_allowlist_entries_are_refused(entry: str) -> None:  # ref 12
    with pytest.raises(OriginError):
        normalise_allowlist_entry(entry, allow_loopback_http=False)


def test_empty_allowlist_is_refused() -> None:  # ref 99: we refuse to start
    with pytest.raises(OriginError):
        OriginAllowlist.from_entries([], allow_loopback_http=False)
    with pytest.raises(ConfigError) as info:
        make_settings(gateway_origins=[" "]).validate_for_serving()
    assert "GATEWAY_ORIGINS" in info.value.message


@pytest.mark.parametrize(
    "entry",
    [
        "https://gateway.test/path",
        "https://gateway.test/?q=1",
        "https://gateway.test#f",
        "https://user@gateway.test",
        "https://gateway.test.",
        "ftp://gateway.test",
        "https://",
    ],
)
def test_allowlist_entries_that_are_not_origins_are_refused(entry: str) -> None:
    with pytest.raises(OriginError):
        normalise_allowlist_entry(entry, allow_loopback_http=False)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost:9000/", "http://localhost:9000"),
        ("http://[::1]:7000", "http://[::1]:7000"),
        ("http://[::1]", "http://[::1]"),
        ("http://[0:0:0:0:0:0:0:1]", "http://[::1]"),
        ("http://gateway.test", "https://gateway.test"),  # not loopback: upgraded anyway
    ],
)
def test_loopback_http_entries_stay_http_only_when_allowed(entry: str, expected: str) -> None:
    assert normalise_allowlist_entry(entry, allow_loopback_http=True) == expected
    assert normalise_allowlist_entry(entry, allow_loopback_http=False).startswith("https://")


def test_allowlist_is_exact() -> None:  # ref 11
    allowlist = OriginAllowlist.from_entries(["gateway.test"], allow_loopback_http=False)
    for url in [
        "https://evil-gateway.test/x",
        "https://gateway.test.evil.test/x",
        "https://sub.gateway.test/x",
        "https://gateway.tes/x",
        "https://gateway.test:8443/x",  # ref 92
    ]:
        with pytest.raises(OriginError, match="not in the allowed gateway origins"):
            allowlist.check_url(url, what="jku")
    assert (
        allowlist.check_url("https://gateway.test/x", what="jku").origin == "https://gateway.test"
    )


@pytest.mark.parametrize(
    ("url", "origin", "normalised"),
    [
        ("https://gateway.test/.well-known/jwks.json", "https://gateway.test", None),
        ("HTTPS://GATEWAY.test/a?b=1", "https://gateway.test", "https://gateway.test/a?b=1"),
        ("https://gateway.test:443/x", "https://gateway.test", "https://gateway.test/x"),
        ("https://gateway.test:0443/x", "https://gateway.test", "https://gateway.test/x"),
        ("https://gateway.test", "https://gateway.test", "https://gateway.test/"),
        ("https://gateway.test:8443/x", "https://gateway.test:8443", None),
        ("https://1.2.3.4/x", "https://1.2.3.4", None),
        ("https://[2001:DB8::1]/x", "https://[2001:db8::1]", "https://[2001:db8::1]/x"),
    ],
)
def test_parse_url_normalises_the_origin(url: str, origin: str, normalised: str | None) -> None:
    parsed = parse_url(url, allow_loopback_http=False)
    assert parsed.origin == origin
    assert parsed.url == (normalised or url)


@pytest.mark.parametrize(
    "url",
    [
        "https://gateway.test@evil.test/",
        "https://user:pw@gateway.test/",
        "https://@gateway.test/",
        "https://evil.test\\@gateway.test/",
        "https://evil.test\\.gateway.test/",
        "https://gateway.test./",
        "https://gateway.test../",
        "https://gateway.test/#frag",
        "https://gateway.test/ x",
        "https://gateway.test/\nx",
        "https://gateway.test\n",
        "https://gate\x00way.test/",
        "https://gatewaý.test/",
        "https://xn--gatewa-x9a.test\u200b/",
        "https://gateway%2etest/",
        "https://[fe80::1%25eth0]/",
        "https://127.1/",
        "https://0x7f.0.0.1/",
        "https://2130706433/",
        "https://-gateway.test/",
        "https://gate_way.test/",
        "https://" + "a" * 64 + ".test/",
        "https://gateway.test:99999/",
        "https://gateway.test:0/",
        "https://gateway.test:+443/",
        "https://gateway.test:-1/",
        "http://gateway.test/",
        "http://127.0.0.1/",
        "javascript:alert(1)",
        "data:text/plain,x",
        "//gateway.test/",
        "gateway.test",
        "/relative",
        "",
        "https://" + "a." * 1100 + "test/",
        None,
        42,
        b"https://gateway.test/",
    ],
)
def test_parse_url_refuses_tricks(url: object) -> None:
    with pytest.raises(OriginError):
        parse_url(url, allow_loopback_http=False)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/x", "http://localhost/x", "http://[::1]:1/x", "http://127.5.6.7/x"],
)
def test_loopback_http_only_with_the_setting(url: str) -> None:
    assert parse_url(url, allow_loopback_http=True).scheme == "http"
    with pytest.raises(OriginError):
        parse_url(url, allow_loopback_http=False)


def test_fragments_only_when_asked() -> None:
    parsed = parse_url("https://gateway.test/x#y", allow_loopback_http=False, allow_fragment=True)
    assert parsed.url == "https://gateway.test/x"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("[::1]", True),
        ("10.0.0.1", False),
        ("gateway.test", False),
        ("localhost.evil.test", False),
    ],
)
def test_is_loopback_host(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_settings_expose_the_allowlist() -> None:
    settings = make_settings(gateway_origins=["gateway.test", "https://other.test/"])
    assert settings.allowlist.origins == {"https://gateway.test", "https://other.test"}
