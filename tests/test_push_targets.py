"""The SSRF rules for open tenants' push targets (app/push/targets.py, app/push/pinning.py):
the refused address ranges (RFC 6890 and successors), the URL's form when a config is stored,
and resolution pinned to the checked address (issue 49)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pytest

from app.origins import OriginAllowlist, OriginError, parse_url
from app.push.pinning import ResolveFailed, pin, system_resolver
from app.push_targets import PushTargets, TargetRefused, refusal

ALLOWLIST = OriginAllowlist.from_entries(["https://gateway.test"], allow_loopback_http=False)
STRICT = PushTargets(ALLOWLIST)
DEV = PushTargets(ALLOWLIST, allow_private=True)
PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:4700:4700::1111"

REFUSED = [
    "127.0.0.1",
    "127.255.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "169.254.0.1",
    "100.64.0.1",
    "100.127.255.254",
    "224.0.0.1",
    "239.255.255.250",
    "0.0.0.0",
    "255.255.255.255",
    "192.0.2.1",
    "::1",
    "::",
    "fd00:ec2::254",
    "fc00::1",
    "fe80::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    "2002:7f00:1::",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:db8::1",
]


@pytest.mark.parametrize("address", REFUSED)
def test_special_purpose_addresses_are_refused(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", [PUBLIC_V4, "8.8.8.8", PUBLIC_V6, "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


def test_the_metadata_addresses_say_so() -> None:
    assert refusal(ipaddress.ip_address("169.254.169.254")) == "a cloud metadata address"
    assert refusal(ipaddress.ip_address("fd00:ec2::254")) == "a cloud metadata address"
    assert refusal(ipaddress.ip_address("100.64.0.1")) == "a shared (CGNAT) address"


def _form(url: str, targets: PushTargets = STRICT) -> None:
    parsed = parse_url(url, allow_loopback_http=False, allow_any_http=targets.allow_private)
    targets.check_open_form(parsed)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/a2a?x=1",
        "https://hooks.example.com:8443/",
        f"https://{PUBLIC_V4}/",
    ],
)
def test_a_public_https_url_may_be_stored(url: str) -> None:
    _form(url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://hooks.example.com/", "https"),
        ("https://user:secret@hooks.example.com/", "userinfo"),
        ("https://hooks.example.com/#frag", "fragment"),
        ("https://127.0.0.1/", "loopback"),
        ("https://[::1]/", "loopback"),
        ("https://169.254.169.254/latest/meta-data/", "metadata"),
        ("https://[fd00:ec2::254]/", "metadata"),
        ("https://10.0.0.1/", "private"),
        ("https://100.64.0.1/", "CGNAT"),
        ("https://intranet/hook", "single-label"),
        ("https://localhost/hook", "single-label"),
        ("https://2130706433/", "DNS name"),
        ("https://127.1/", "DNS name"),
    ],
)
def test_a_refused_form_names_the_rule_never_the_url(url: str, reason: str) -> None:
    with pytest.raises(OriginError) as refused:
        _form(url)
    assert reason in str(refused.value)
    assert "secret" not in str(refused.value) and "intranet" not in str(refused.value)


def test_the_development_switch_lifts_the_address_and_single_label_rules() -> None:
    for url in (
        "https://127.0.0.1:9/",
        "http://127.0.0.1:9/",
        "https://localhost/",
        "http://10.0.0.1/",
    ):
        _form(url, DEV)
    with pytest.raises(OriginError, match="userinfo"):
        _form("https://u:p@127.0.0.1/", DEV)


class Resolver:
    """A resolver that answers each call from a script (DNS that changes between calls)."""

    def __init__(self, *answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append((host, port))
        return self.answers.pop(0)


async def test_a_public_name_is_pinned_to_its_checked_address() -> None:
    resolver = Resolver([PUBLIC_V4], ["127.0.0.1"])
    parsed = parse_url("https://hooks.example.com:8443/a2a?x=1", allow_loopback_http=False)
    pinned = await pin(parsed, STRICT, resolver)
    assert pinned.url == f"https://{PUBLIC_V4}:8443/a2a?x=1"
    assert pinned.headers == {"Host": "hooks.example.com:8443"}
    # TLS SNI and the certificate check use the name, the connection the checked address.
    assert pinned.extensions == {"sni_hostname": "hooks.example.com"}
    assert resolver.calls == [("hooks.example.com", 8443)]


async def test_an_ipv6_answer_is_bracketed() -> None:
    parsed = parse_url("https://hooks.example.com/", allow_loopback_http=False)
    pinned = await pin(parsed, STRICT, Resolver([PUBLIC_V6]))
    assert pinned.url == f"https://[{PUBLIC_V6}]:443/"
    assert pinned.headers == {"Host": "hooks.example.com"}


@pytest.mark.parametrize(
    "answer",
    [
        ["127.0.0.1"],
        ["169.254.169.254"],
        [PUBLIC_V4, "10.0.0.5"],
        ["::ffff:127.0.0.1"],
        ["fe80::1%eth0"],
    ],
)
async def test_a_name_resolving_to_a_refused_address_is_refused(answer: list[str]) -> None:
    parsed = parse_url("https://rebind.example.com/", allow_loopback_http=False)
    with pytest.raises(TargetRefused) as refused:
        await pin(parsed, STRICT, Resolver(answer))
    assert "rebind" not in str(refused.value)


async def test_no_answer_is_a_resolution_failure() -> None:
    parsed = parse_url("https://gone.example.com/", allow_loopback_http=False)
    with pytest.raises(ResolveFailed):
        await pin(parsed, STRICT, Resolver([]))


async def test_development_http_stays_off_the_public_internet() -> None:
    parsed = parse_url("http://hooks.example.com/", allow_loopback_http=False, allow_any_http=True)
    with pytest.raises(TargetRefused, match="private addresses only"):
        await pin(parsed, DEV, Resolver([PUBLIC_V4]))
    pinned = await pin(parsed, DEV, Resolver(["127.0.0.1"]))
    assert pinned.url == "http://127.0.0.1:80/" and pinned.extensions == {}


async def test_the_system_resolver_answers_addresses_the_rules_then_judge() -> None:
    # localhost is in /etc/hosts: no network needed. Loopback, so the strict rules refuse it.
    addresses = await system_resolver("localhost", 443)
    assert addresses and all(refusal(ipaddress.ip_address(a)) for a in addresses)
