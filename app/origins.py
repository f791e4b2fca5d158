"""Origins: the allowlist of gateways and the strict parsing of URLs against it.

The allowlist is decided on a *parsed* origin (RFC 6454 §4: scheme, host, port), never by a
string prefix, and always before any network I/O (CONTRACT §3 step 3): an attacker must never be
able to make the edge fetch a URL of their choosing. We refuse rather than guess on anything a
lenient parser would reinterpret: userinfo, backslashes, control characters, whitespace,
fragments, trailing-dot hosts, non-ASCII hosts and out-of-range ports.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"https": 443, "http": 80}
# RFC 3986 §3.2.2 reg-name restricted to LDH labels: anything else is refused outright.
# Used with ``fullmatch`` (``$`` would also match before a trailing newline).
_HOST_RE = re.compile(
    r"(?=.{1,253}\Z)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
)
_FORBIDDEN_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
# WHATWG URL "ends in a number": a resolver reads "127.1" or "0x7f.1" as an IPv4 address.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


class OriginError(ValueError):
    """A URL or origin that cannot be trusted; the message is safe to show."""


@dataclass(frozen=True)
class ParsedUrl:
    """A URL that passed the strict parse: its normalised origin and the URL to use."""

    origin: str
    url: str
    scheme: str
    host: str
    path: str
    port: int = 443  # the explicit port, else the scheme's default


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _normalise_host(raw: str | None) -> str:
    if not raw:
        raise OriginError("URL has no host")
    host = raw.lower()
    if host.endswith("."):
        raise OriginError("host must not end with a dot")
    if "%" in host:
        # Percent-encoded names and IPv6 zone ids (RFC 6874) are never a gateway's origin.
        raise OriginError("host is not a valid DNS name")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_RE.fullmatch(host) or _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
            raise OriginError("host is not a valid DNS name") from None
        return host
    return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed


def _plain_text(value: object) -> str:
    """``value`` if it is a non-empty, bounded ASCII string with nothing a URL parser could
    read two ways (whitespace, control characters, backslashes), else ``OriginError``."""
    if not isinstance(value, str) or not value:
        raise OriginError("URL must be a non-empty string")
    if len(value) > 2048:
        raise OriginError("URL is too long")
    if _FORBIDDEN_CHARS.search(value):
        raise OriginError("URL contains whitespace, control characters or backslashes")
    if not value.isascii():
        raise OriginError("URL must be ASCII")
    return value


def parse_url(
    value: object,
    *,
    allow_loopback_http: bool,
    allow_fragment: bool = False,
    allow_any_http: bool = False,
) -> ParsedUrl:
    """Parse an absolute URL strictly and return its normalised origin.

    ``https`` is required; plain ``http`` only for loopback hosts when the development setting
    ``EDGE_ALLOW_LOOPBACK_HTTP`` allows it (CONTRACT §3 step 3), or for any host when
    ``allow_any_http`` (``EDGE_PUSH_ALLOW_PRIVATE_TARGETS``, whose addresses are checked at
    delivery, ``app.push_targets``).
    """
    value = _plain_text(value)
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise OriginError("URL is not a valid absolute URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        raise OriginError("URL must be an absolute https URL")
    if "@" in parts.netloc:
        raise OriginError("URL must not carry userinfo")
    if "#" in value and not allow_fragment:
        raise OriginError("URL must not carry a fragment")
    host = _normalise_host(parts.hostname)
    loopback_ok = allow_loopback_http and is_loopback_host(host)
    if scheme == "http" and not (allow_any_http or loopback_ok):
        raise OriginError("URL must use https")
    origin = f"{scheme}://{host}"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        if port == 0:
            raise OriginError("URL port is out of range")
        origin = f"{origin}:{port}"
    path = parts.path or "/"
    url = origin + path + (f"?{parts.query}" if parts.query else "")
    return ParsedUrl(
        origin=origin,
        url=url,
        scheme=scheme,
        host=host,
        path=path,
        port=port or _DEFAULT_PORTS[scheme],
    )


def normalise_allowlist_entry(entry: str, *, allow_loopback_http: bool) -> str:
    """Normalise one ``GATEWAY_ORIGINS`` entry to an origin.

    A bare host becomes ``https://host``; an ``http://`` entry is upgraded to ``https://``
    (only loopback hosts keep ``http`` when development http is allowed); a trailing slash is
    dropped. A path, query or fragment is refused: an allowlist entry names an origin only.
    """
    stripped = entry.strip()
    if not stripped:
        raise OriginError("gateway origin entries must not be empty")
    candidate = stripped if "://" in stripped else f"https://{stripped}"
    if candidate.lower().startswith("http://"):
        rest = candidate[len("http://") :]
        try:
            host_part = urlsplit(candidate).hostname or ""
        except ValueError:
            host_part = ""
        keep_http = allow_loopback_http and is_loopback_host(host_part)
        if not keep_http:
            candidate = "https://" + rest
    parsed = parse_url(candidate, allow_loopback_http=allow_loopback_http)
    if parsed.path not in ("", "/") or "?" in candidate:
        raise OriginError("gateway origin entries must not carry a path or query")
    return parsed.origin


@dataclass(frozen=True)
class OriginAllowlist:
    """The exact set of trusted gateway origins (``GATEWAY_ORIGINS``)."""

    origins: frozenset[str]
    allow_loopback_http: bool = False

    @classmethod
    def from_entries(
        cls, entries: list[str], *, allow_loopback_http: bool, required: bool = True
    ) -> OriginAllowlist:
        """``required``: at least one entry (``GATEWAY_ORIGINS``; ``PEER_ORIGINS`` may be
        empty)."""
        if required and not entries:
            raise OriginError("at least one gateway origin is required")
        normalised = {
            normalise_allowlist_entry(e, allow_loopback_http=allow_loopback_http) for e in entries
        }
        return cls(origins=frozenset(normalised), allow_loopback_http=allow_loopback_http)

    def check_url(self, value: object, *, what: str) -> ParsedUrl:
        """Parse ``value`` and require its origin to be allowlisted (exact match)."""
        try:
            parsed = parse_url(value, allow_loopback_http=self.allow_loopback_http)
        except OriginError as exc:
            raise OriginError(f"{what} is not acceptable: {exc}") from None
        if not self.allows(parsed):
            raise OriginError(f"{what} origin is not in the allowed gateway origins")
        return parsed

    def allows(self, parsed: ParsedUrl) -> bool:
        """Whether an already parsed URL's origin is allowlisted (exact match)."""
        return parsed.origin in self.origins
