"""Resolve a push target's name once, check every address, and connect to the checked one
(issue 49, SSRF; the rules are in ``app.push_targets``).

Checking a name and then handing the name to the HTTP client would let DNS answer
differently the second time (DNS rebinding: a public address for the check, 127.0.0.1 for
the connection). So the request goes to the checked address itself: the URL carries the
address, ``Host`` carries the name and port as written (RFC 9110 §7.2), and for ``https`` the
TLS SNI is the name (httpcore's ``sni_hostname`` extension), which is also the name the
certificate is verified against. Every address the name resolves to must pass, so a mixed
answer cannot slip a private address in on a later connection.

The resolver is injectable: tests answer differently on each call, and a real resolver
is only asked once per attempt.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from app.origins import ParsedUrl
from app.push_targets import IPAddress, PushTargets, TargetRefused, ip_literal

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]


class ResolveFailed(Exception):
    """The name did not resolve (a transient failure: the attempt is retried)."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, through the system's resolver."""
    try:
        # AI_ADDRCONFIG: only families this host can reach (the first address is the one
        # used; an AAAA answer on an IPv4-only host would fail every attempt).
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG
        )
    except (OSError, UnicodeError):
        raise ResolveFailed("name resolution failed") from None
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class PinnedRequest:
    """Where one attempt connects and what it says there."""

    url: str  # the target URL with the checked address in place of the name
    headers: dict[str, str]  # ``Host`` as the client wrote it
    extensions: dict[str, str] = field(default_factory=dict)  # ``sni_hostname`` for https


async def pin(parsed: ParsedUrl, targets: PushTargets, resolver: Resolver) -> PinnedRequest:
    """Resolve ``parsed``'s host once and check each address; ``TargetRefused`` (safe text)
    if any is refused, ``ResolveFailed`` if there is none."""
    literal = ip_literal(parsed.host)
    if literal is not None:
        targets.check_address(parsed, literal)
        return PinnedRequest(url=parsed.url, headers={})
    addresses = [_address(a) for a in await resolver(parsed.host, parsed.port)]
    if not addresses:
        raise ResolveFailed("name resolution failed")
    for address in addresses:
        targets.check_address(parsed, address)
    chosen = addresses[0]
    shown = f"[{chosen.compressed}]" if chosen.version == 6 else chosen.compressed
    rest = parsed.url[len(parsed.origin) :]
    authority = parsed.origin.split("://", 1)[1]
    extensions = {"sni_hostname": parsed.host} if parsed.scheme == "https" else {}
    return PinnedRequest(
        url=f"{parsed.scheme}://{shown}:{parsed.port}{rest}",
        headers={"Host": authority},
        extensions=extensions,
    )


def _address(text: str) -> IPAddress:
    try:
        # A scoped IPv6 address (``fe80::1%eth0``) is link-local, refused either way.
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        raise TargetRefused("push url resolves to an unparseable address") from None
