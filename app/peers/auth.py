"""How a call authenticates to a peer (the directory entry's ``auth``):

* ``edge-token``: a caller token minted with this edge's key for every request
  (``app.security.peer_tokens``, CONTRACT §10): ``aud`` the interface called, the tenant
  claim the entry's tenant, the identity claim ``{"key": our tenant, "name": our agent's
  name}``. The peer accepts it only when our origin is in its ``PEER_ORIGINS``.
* ``{"bearer_env": NAME}``: ``Authorization: Bearer`` with the value of ``NAME`` in the
  worker's environment mapping (``LlmRuntime.environ``), read per call and never stored.

The header is only ever sent to the interface chosen from the peer's card, which is on the
entry's own origin (``app.peers.card``), and no redirect is followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping

import httpx

from app.errors import PeerCallFailed
from app.peers.directory import Peer
from app.security.keys import SigningKey
from app.security.peer_tokens import peer_token
from app.settings import Settings, is_edge_variable

_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")


class _Bearer(httpx.Auth):
    """A fresh ``Authorization: Bearer`` on every request (tokens are short-lived)."""

    def __init__(self, value: Callable[[], str]) -> None:
        self._value = value

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._value()}"
        yield request


class PeerAuth:
    def __init__(self, settings: Settings, key: SigningKey, environ: Mapping[str, str]) -> None:
        self._settings = settings
        self._key = key
        self._environ = environ

    def for_call(self, peer: Peer, audience: str, *, our_tenant: str, our_name: str) -> httpx.Auth:
        """The auth of calls to ``audience`` (the chosen interface's url)."""
        env = peer.entry.bearer_env
        if env is not None:
            # A config that passed the directory's checks never names an edge setting; one
            # stored before that rule, or built around it, still never sends one.
            value = "" if is_edge_variable(env) else self._environ.get(env, "")
            if not _HEADER_SAFE.fullmatch(value):
                raise PeerCallFailed(
                    f"the environment variable {env} (auth.bearer_env of {peer.name!r}) is "
                    "not set to a token",
                    reason="auth_unavailable",
                    delivered=False,
                )
            return _Bearer(lambda: value)
        tenant = peer.entry.tenant or ""
        identity = {"key": our_tenant, "name": our_name}
        settings, key = self._settings, self._key
        return _Bearer(
            lambda: peer_token(settings, key, audience=audience, tenant=tenant, identity=identity)
        )
