"""Fetching and caching the gateways' JWKS (CONTRACT §3 step 5).

The rules, each one here for a reason:

* Only allowlisted origins are ever contacted. The verifier checks the ``jku`` origin before
  calling us; ``get_key`` asserts it again so no future caller can turn us into an SSRF.
* One overall deadline per fetch (``asyncio.timeout`` around connect + headers + the whole
  streamed body), so a server dripping one byte a second cannot hold a request.
* A size cap, enforced while streaming (``Content-Length`` is only a hint), and
  ``Accept-Encoding: identity`` (any other ``Content-Encoding`` is refused) so a compressed
  body cannot expand past it.
* No redirects: a 3xx is a failure (a redirect could point anywhere). Non-200 is a failure.
* The cache is keyed by **origin**, not by URL: trust is per origin (the allowlist names
  origins), so varying the ``jku`` path or query must not force extra fetches. The URL whose
  keys verified a token's signature (``confirm``) is **pinned** for that origin and used for
  every later refresh. Until then the URL is only provisional: anyone can send an unsigned
  token, so the first request must not choose the URL for the life of the process (another
  JWKS-shaped document on the gateway's origin would otherwise lock its real keys out). A
  token naming another URL of the origin than the provisional set's is fetched at most once
  per ``_FAILURE_BACKOFF_SECONDS``; meanwhile the set held answers.
* An unknown ``kid`` refetches at most once per ``jwks_cooldown_seconds`` per origin, and a
  failed fetch with nothing cached is retried at most once per ``_FAILURE_BACKOFF_SECONDS``
  after it ended: a flood of forged tokens cannot turn the edge into a load generator against
  the gateway.
* Single-flight: one ``asyncio.Lock`` per origin; whoever waited on it while a fetch ran
  takes the outcome that fetch left (keys or failure) instead of fetching again, so N
  requests behind a gateway that times out wait one deadline, not N of them.
* Steady state makes no network call at all: a cached, unexpired set answers immediately.
* A failed refetch while a cached set exists keeps using the cached set until it expires
  (a gateway blip must not turn into 401s for keys we already hold).

Only ``kty OKP, crv Ed25519`` keys fit for verification are kept (``parse_jwks``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.errors import Unauthorized
from app.origins import ParsedUrl
from app.security.jose_strict import JoseError, b64url_decode, check_ed25519_public_bytes
from app.security.jose_strict import loads_object as strict_loads_object
from app.security.verify_key import Ed25519VerificationKey
from app.settings import Settings

logger = logging.getLogger(__name__)

# How long a failed fetch with nothing cached blocks the next attempt for that origin. Short,
# so a gateway blip at start does not lock everyone out, but long enough that a flood of
# tokens cannot make us hammer a failing gateway (at most one fetch a second per origin).
_FAILURE_BACKOFF_SECONDS = 1.0

FetchResult = str  # "ok" | "error" | "too_large" | "redirect" | "timeout" | "invalid"
FETCH_RESULTS: tuple[FetchResult, ...] = (
    "ok",
    "error",
    "too_large",
    "redirect",
    "timeout",
    "invalid",
)


class _FetchFailed(Exception):
    def __init__(self, label: FetchResult) -> None:
        super().__init__(label)
        self.label = label


# --- parsing ---------------------------------------------------------------------------------


def _usable_ed25519_key(jwk: dict[str, Any]) -> Ed25519VerificationKey | None:
    """The verification key of one JWK, or ``None`` if it must not be used."""
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        return None  # Ed448, EC, RSA, oct...: CONTRACT §3 step 5 allows Ed25519 only
    if "d" in jwk:
        return None  # a published private key is compromised by definition
    if "use" in jwk and jwk["use"] != "sig":  # RFC 7517 §4.2
        return None
    if "alg" in jwk and jwk["alg"] != "EdDSA":  # RFC 7517 §4.4, RFC 8037 §3.1
        return None
    if "key_ops" in jwk:  # RFC 7517 §4.3
        ops = jwk["key_ops"]
        if not isinstance(ops, list) or "verify" not in ops:
            return None
    x = jwk.get("x")
    if not isinstance(x, str):
        return None
    try:
        raw = b64url_decode(x)
        check_ed25519_public_bytes(raw)  # length, canonical, on-curve, not small-order
        return Ed25519VerificationKey(raw)
    except (JoseError, ValueError):
        return None


def parse_jwks(data: bytes) -> dict[str, Ed25519VerificationKey]:
    """Parse a JWKS document into ``kid -> key`` keeping only usable Ed25519 keys.

    Keys without a string ``kid`` are dropped (the token names its key by ``kid``). A ``kid``
    that appears more than once is ambiguous, so **every** key carrying it is dropped, even
    if only one of them would otherwise be usable. Raises ``JoseError`` if the document is not
    a JSON object with a ``keys`` array.
    """
    doc = strict_loads_object(data)
    entries = doc.get("keys")
    if not isinstance(entries, list):
        raise JoseError("JWKS has no keys array")
    seen: dict[str, int] = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("kid"), str):
            seen[entry["kid"]] = seen.get(entry["kid"], 0) + 1
    keys: dict[str, Ed25519VerificationKey] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        kid = entry.get("kid")
        if not isinstance(kid, str) or not kid or seen[kid] != 1:
            continue
        key = _usable_ed25519_key(entry)
        if key is not None:
            keys[kid] = key
    return keys


# --- fetching and caching --------------------------------------------------------------------


@dataclass
class _OriginState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    keys: dict[str, Ed25519VerificationKey] | None = None
    expires_at: float = 0.0
    keys_url: str | None = None  # the URL the cached keys came from
    pinned: bool = False  # keys_url's keys verified a signature (see module docstring)
    last_attempt: float | None = None  # when the latest fetch ended
    last_failed: bool = False
    fetches: int = 0  # fetches ended: a waiter that sees it move takes their outcome


class JwksFetcher:
    """Bounded, cached, single-flight JWKS fetching, per allowlisted origin.

    ``fetch_count`` counts network fetches; ``last_result`` holds the label of the latest one
    (one of ``FETCH_RESULTS``); ``on_fetch`` (optional) is called with that label after each
    fetch, for metrics.
    """

    def __init__(
        self,
        settings: Settings,
        client: httpx.AsyncClient,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_fetch: Callable[[FetchResult], None] | None = None,
        origins: frozenset[str] | None = None,
    ) -> None:
        # Gateways' and peers' (CONTRACT §10) origins: nothing else is ever fetched. ``origins``
        # replaces them for a fetcher of one directory peer's keys (app.peers.card).
        if origins is None:
            origins = settings.allowlist.origins | settings.peer_allowlist.origins
        self._allowed = origins
        self._client = client
        self._clock = clock
        self._on_fetch = on_fetch
        self._ttl = settings.jwks_cache_seconds
        self._cooldown = settings.jwks_cooldown_seconds
        self._deadline = settings.jwks_deadline_seconds
        self._max_bytes = settings.jwks_max_bytes
        self._states: dict[str, _OriginState] = {}
        self.fetch_count = 0
        self.last_result: FetchResult | None = None

    async def get_key(self, jku: ParsedUrl, kid: str) -> Ed25519VerificationKey:
        """The verification key ``kid`` of the gateway at ``jku``'s origin.

        Raises ``Unauthorized`` (reason ``unknown_kid`` or ``jwks_unavailable``).
        """
        key = self.cached_key(jku, kid)
        if key is not None:
            return key
        if jku.origin not in self._allowed:
            # Defensive: the verifier already refused this (CONTRACT §3 step 3).
            raise Unauthorized(
                "jku origin is not in the allowed gateway origins", reason="jku_not_allowed"
            )
        state = self._states.get(jku.origin)
        if state is None:
            state = self._states.setdefault(jku.origin, _OriginState())
        seen = state.fetches
        async with state.lock:
            # A fetch that ended while we waited settled the question, whatever its outcome.
            if state.fetches == seen and self._should_fetch(state, kid, jku):
                await self._refresh(state, jku)
        return self._lookup(state, kid)

    def cached_key(self, jku: ParsedUrl, kid: str) -> Ed25519VerificationKey | None:
        """``get_key``'s steady state without an await: the key when a fresh set of an
        allowlisted origin, fetched from ``jku``'s URL or pinned, holds ``kid``; else None
        (then ``get_key`` decides, fetching or refusing)."""
        if jku.origin not in self._allowed:
            return None
        state = self._states.get(jku.origin)
        if state is None:
            return None
        keys = state.keys
        if (
            keys is not None
            and self._clock() < state.expires_at
            and (state.pinned or state.keys_url == jku.url)
        ):
            return keys.get(kid)
        return None

    def confirm(self, jku: ParsedUrl, key: Ed25519VerificationKey) -> None:
        """Pin the URL whose keys held ``key``, which has just verified a token's signature.

        Only a genuine gateway token can get here, so from now on refreshes of this origin
        fetch that URL, whatever URL later tokens name (module docstring).
        """
        state = self._states.get(jku.origin)
        if state is None or state.pinned or state.keys is None:
            return
        if any(held is key for held in state.keys.values()):
            state.pinned = True

    def _fresh(self, state: _OriginState) -> bool:
        return state.keys is not None and self._clock() < state.expires_at

    def _should_fetch(self, state: _OriginState, kid: str, jku: ParsedUrl) -> bool:
        now = self._clock()
        since = None if state.last_attempt is None else now - state.last_attempt
        if self._fresh(state):
            assert state.keys is not None
            if not state.pinned and state.keys_url != jku.url:
                # A provisional set from another URL of the origin: try the token's own URL,
                # at the failure backoff's pace (module docstring).
                return since is None or since >= min(self._cooldown, _FAILURE_BACKOFF_SECONDS)
            if kid in state.keys:
                return False
            # Unknown kid on a fresh set: refetch at most once per cooldown per origin.
            return since is None or since >= self._cooldown
        if state.last_failed and since is not None:
            return since >= min(self._cooldown, _FAILURE_BACKOFF_SECONDS)
        return True

    def _lookup(self, state: _OriginState, kid: str) -> Ed25519VerificationKey:
        if not self._fresh(state):
            raise Unauthorized("gateway keys are unavailable", reason="jwks_unavailable")
        assert state.keys is not None
        key = state.keys.get(kid)
        if key is None:
            raise Unauthorized("token kid is not in the gateway keys", reason="unknown_kid")
        return key

    async def _refresh(self, state: _OriginState, jku: ParsedUrl) -> None:
        url = state.keys_url if state.pinned and state.keys_url else jku.url
        self.fetch_count += 1
        try:
            keys = parse_jwks(await self._download(url))
        except (_FetchFailed, JoseError) as failure:
            label = failure.label if isinstance(failure, _FetchFailed) else "invalid"
            self._record(label, jku.origin)
            # Keep a cached set until it expires (module docstring); only mark the failure.
            state.last_failed = True
            return
        finally:
            # The backoff and the cooldown count from the end of the fetch: a fetch that
            # took the whole deadline must not leave the next one free to start at once.
            state.last_attempt = self._clock()
            state.fetches += 1
        self._record("ok", jku.origin)
        state.keys = keys
        state.expires_at = self._clock() + self._ttl
        state.keys_url = url
        state.last_failed = False

    def _record(self, label: FetchResult, origin: str) -> None:
        self.last_result = label
        if label != "ok":
            logger.warning("gateway JWKS fetch failed", extra={"origin": origin, "result": label})
        if self._on_fetch is not None:
            try:
                self._on_fetch(label)
            except Exception:  # a metrics hook must never break verification
                logger.exception("jwks on_fetch hook failed")

    async def _download(self, url: str) -> bytes:
        try:
            async with asyncio.timeout(self._deadline):
                return await self._stream_body(url)
        except TimeoutError:
            raise _FetchFailed("timeout") from None
        except httpx.TimeoutException:
            raise _FetchFailed("timeout") from None
        except _FetchFailed:
            raise
        except Exception:  # any transport or protocol fault is a failed fetch, never a 500
            raise _FetchFailed("error") from None

    async def _stream_body(self, url: str) -> bytes:
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        request = self._client.build_request("GET", url, headers=headers)
        response = await self._client.send(request, stream=True, follow_redirects=False)
        try:
            if response.is_redirect or 300 <= response.status_code < 400:
                raise _FetchFailed("redirect")
            if response.status_code != 200:
                raise _FetchFailed("error")
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                raise _FetchFailed("error")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > self._max_bytes:
                raise _FetchFailed("too_large")
            body = bytearray()
            # Content-Encoding was refused above, so these are the raw bytes: no bomb.
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self._max_bytes:
                    raise _FetchFailed("too_large")
            return bytes(body)
        finally:
            await response.aclose()
