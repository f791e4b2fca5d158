"""The ``agents`` block of an ``llm`` agent's config (issue 54): the A2A agents it may call,
by name. An entry holds the peer's base URL, an optional tenant there, and how to
authenticate: ``"edge-token"`` (a caller token minted with this edge's key, CONTRACT §10) or
``{"bearer_env": NAME}`` (a bearer token read from the worker's environment at call time).

Nothing here is a credential, and nothing that looks like one is accepted: a directory is
stored in the tenant registry, so a literal token, password or secret anywhere in an entry is
refused when the config is checked (``tenants add``/``update``, exit 2), naming where it was
and never what it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.origins import OriginError, parse_url
from app.settings import is_edge_variable

EDGE_TOKEN = "edge-token"  # noqa: S105 - the name of an auth kind, not a secret
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_PEER_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MAX_AGENTS = 64

# Keys that name a credential (compared without case, ``-`` and ``_``); ``bearer_env`` names an
# environment variable and is the one allowed.
_CREDENTIAL_KEYS = (
    "token",
    "bearer",
    "authorization",
    "password",
    "passwd",
    "secret",
    "apikey",
    "credential",
    "cookie",
    "privatekey",
)
_ALLOWED_KEYS = frozenset({"bearer_env"})
# Values that carry a credential: an auth scheme, a JWT/JWS, well-known key prefixes, URL
# userinfo, or a long opaque string mixing cases and digits (an env var name or a tenant id
# never does: those are one case).
_SCHEME = re.compile(r"^\s*(bearer|basic|token|digest)\s+\S", re.IGNORECASE)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*\.?[A-Za-z0-9_-]*")
_PREFIXES = re.compile(r"^(sk-|sk_|pk_|rk_|ghp_|gho_|ghs_|github_pat_|xox[abpr]-|AKIA|glpat-)")
_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@?#]*@")
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_.~-]{32,}")


def looks_like_credential(value: str) -> bool:
    if _SCHEME.match(value) or _JWT.search(value) or _PREFIXES.match(value):
        return True
    if _USERINFO.match(value):
        return True
    if _OPAQUE.fullmatch(value) and "://" not in value:
        has = (any(c.islower() for c in value), any(c.isupper() for c in value))
        return all(has) and any(c.isdigit() for c in value)
    return False


def _is_credential_key(key: str) -> bool:
    if key in _ALLOWED_KEYS:
        return False
    folded = key.lower().replace("-", "").replace("_", "")
    return any(word in folded for word in _CREDENTIAL_KEYS)


def _walk(value: Any, path: str) -> Iterator[str]:
    """Where in ``value`` a credential sits (a path of keys, never the value)."""
    if isinstance(value, dict):
        for key, item in value.items():
            name = str(key)
            shown = "a key" if looks_like_credential(name) else name[:64]
            if _is_credential_key(name) or looks_like_credential(name):
                yield f"{path}.{shown}"
            else:
                yield from _walk(item, f"{path}.{shown}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")
    elif isinstance(value, str) and looks_like_credential(value):
        yield path


def credential_in(agents: Any) -> str | None:
    """The first place in a raw ``agents`` block that holds a literal credential, if any."""
    if not isinstance(agents, dict):
        return None
    for name, entry in agents.items():
        if looks_like_credential(str(name)):
            return "an entry's name"
        where = next(_walk(entry, f"'{str(name)[:64]}'"), None)
        if where is not None:
            return where
    return None


class BearerEnv(BaseModel):
    """``Authorization: Bearer`` with the value of an environment variable of the worker."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bearer_env: str

    @field_validator("bearer_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        return _bearer_env(value)


def _bearer_env(value: object) -> str:
    """``value`` when it may name the variable holding a peer's token: a variable name, and
    not one of the edge's own settings (its signing key or database URL would otherwise be
    sent to whatever URL the entry names)."""
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise ValueError("bearer_env: must be an environment variable name (letters, digits, _)")
    if is_edge_variable(value):
        raise ValueError("bearer_env: must not name one of the edge's own settings")
    return value


class PeerEntry(BaseModel):
    """One registered peer. ``url`` is checked against the block's ``allow_http_loopback``
    by ``LlmConfig`` (https, or http to a loopback host in development)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(min_length=1, max_length=2048)
    tenant: str | None = None
    auth: Literal["edge-token"] | BearerEnv

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        if value is not None and not _PEER_TENANT.fullmatch(value):
            raise ValueError("must be a tenant id (letters, digits, '.', '_', '-')")
        return value

    @field_validator("auth", mode="before")
    @classmethod
    def _auth(cls, value: Any) -> Any:
        if value == EDGE_TOKEN:
            return value
        if isinstance(value, dict) and set(value) == {"bearer_env"}:
            _bearer_env(value["bearer_env"])
            return value
        raise ValueError('must be "edge-token" or {"bearer_env": "NAME"}')

    @property
    def bearer_env(self) -> str | None:
        return self.auth.bearer_env if isinstance(self.auth, BearerEnv) else None

    def check(self, *, allow_http_loopback: bool) -> None:
        """``ValueError`` when the URL is not one this entry may name."""
        try:
            parsed = parse_url(self.url, allow_loopback_http=allow_http_loopback)
        except OriginError as exc:
            hint = " (http only to a loopback host with allow_http_loopback)"
            raise ValueError(f"url: {exc}{hint if 'https' in str(exc) else ''}") from None
        if "?" in self.url:
            raise ValueError("url: must not carry a query")
        if not parsed.path.startswith("/"):
            raise ValueError("url: must be a base URL")
        if self.auth == EDGE_TOKEN and self.tenant is None:
            raise ValueError("tenant: required with auth edge-token (the token names it)")


def check_directory(agents: dict[str, PeerEntry], *, allow_http_loopback: bool) -> None:
    """``ValueError`` naming the first entry that does not hold."""
    if len(agents) > MAX_AGENTS:
        raise ValueError(f"at most {MAX_AGENTS} agents")
    for name, entry in agents.items():
        if not AGENT_NAME.fullmatch(name):
            raise ValueError(f"'{name[:64]}' is not an agent name (letters, digits, _ . -)")
        try:
            entry.check(allow_http_loopback=allow_http_loopback)
        except ValueError as exc:
            raise ValueError(f"'{name}': {exc}") from None
