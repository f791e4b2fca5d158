"""Which URLs a push may name, and which addresses a push may reach (issue 49, SSRF).

A ``gateway`` tenant's pushes go only to ``GATEWAY_ORIGINS`` (CONTRACT §5, §7), as always.
An ``open`` tenant's push config may also name any other ``https`` URL, because a general A2A
client brings its own webhook (A2A §13). That URL is chosen by the caller, so the edge must
never become a way to reach what only it can reach (server-side request forgery):

- when the config is stored, the URL's form: ``https`` only, no userinfo, no fragment (the
  strict parse of ``app.origins``), no single-label host (``intranet``, ``localhost``: names a
  local resolver completes), no IP literal in a refused range;
- at delivery (``app.push.pinning``), every address the name resolves to must be allowed, and
  the connection goes to the address that was checked.

Refused addresses are those RFC 6890 and its successors reserve for something other than the
public internet: loopback, private (RFC 1918, ULA RFC 4193), link-local (RFC 3927, RFC 4291,
which holds the cloud metadata address 169.254.169.254), shared address space (CGNAT, RFC
6598), multicast, unspecified, reserved and documentation ranges, and fd00:ec2::254 (the IPv6
metadata address). IPv6 forms that carry an IPv4 address (mapped, RFC 4291 §2.5.5.2; NAT64,
RFC 6052; 6to4, RFC 3056) are judged by the IPv4 address they carry; Teredo is refused.

``EDGE_PUSH_ALLOW_PRIVATE_TARGETS`` lifts the address and single-label rules and allows plain
``http`` (to refused addresses only), for development and tests; it is logged as a warning at
start.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from app.origins import OriginAllowlist, OriginError, ParsedUrl

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# RFC 6598 shared address space: Python's is_private leaves it out, is_global too, but say so.
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_METADATA = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
# RFC 6052 well-known and local-use NAT64 prefixes: the low 32 bits are an IPv4 address.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class TargetRefused(Exception):
    """A push target the rules refuse; the message is safe to show (never the URL)."""


def refusal(address: IPAddress) -> str | None:
    """Why a push may not connect to ``address`` (None: it may)."""
    if address in _METADATA:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        if address.teredo is not None:
            return "a Teredo address"
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return refusal(embedded)
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "a shared (CGNAT) address"
    if address.is_private or address.is_reserved or not address.is_global:
        return "a private or reserved address"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def ip_literal(host: str) -> IPAddress | None:
    """The address a normalised host names literally (``[::1]`` included), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class PushTargets:
    """The rules for push URLs, from settings: the gateway allowlist and the development
    switch ``EDGE_PUSH_ALLOW_PRIVATE_TARGETS``."""

    allowlist: OriginAllowlist
    allow_private: bool = False

    def check_open_form(self, parsed: ParsedUrl) -> None:
        """The form rules for an open tenant's target outside ``GATEWAY_ORIGINS``."""
        if self.allow_private:
            return
        if parsed.scheme != "https":
            raise OriginError("URL must use https")
        literal = ip_literal(parsed.host)
        if literal is not None:
            reason = refusal(literal)
            if reason is not None:
                raise OriginError(f"host is {reason}")
        elif "." not in parsed.host:
            raise OriginError("host must be a fully qualified name (no single-label hosts)")

    def check_address(self, parsed: ParsedUrl, address: IPAddress) -> None:
        """At delivery: may the push connect to ``address`` for ``parsed``?"""
        reason = refusal(address)
        if self.allow_private:
            if parsed.scheme == "http" and reason is None:
                # Development http stays off the public internet.
                raise TargetRefused("plain http is allowed to private addresses only")
            return
        if reason is not None:
            raise TargetRefused(f"push url resolves to {reason}")
