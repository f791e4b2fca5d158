"""Signed cards, cached: steady state serves stored bytes and signs nothing per request.

The stub card is keyed by the set of tenant ids (its description may list them); a tenant card
by ``(tenant_id, version)``, so a manifest update (new revision) is signed once and served
from then on. Both caches are small LRUs: a registry churning through tenant sets or revisions
cannot grow memory without bound.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.cards.builder import CardOptions, build_stub_card, build_tenant_card
from app.cards.signing import sign_card
from app.errors import ConfigError
from app.origins import OriginError
from app.security.keys import SigningKey, b64url_encode
from app.settings import Settings
from app.tenants.manifest import TenantManifest, validate_tenant_id

_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(frozen=True)
class SignedDocument:
    """A signed card and the exact bytes to serve for it."""

    card: dict[str, Any]
    body: bytes  # compact protobuf-JSON of ``card``; the signature covers its canonical form
    etag: str  # strong ETag (RFC 9110 §8.8.3): quoted base64url SHA-256 of ``body``


def signed_document(card: dict[str, Any]) -> SignedDocument:
    body = json.dumps(card, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    etag = f'"{b64url_encode(hashlib.sha256(body).digest())}"'
    return SignedDocument(card=card, body=body, etag=etag)


class _Lru(Generic[_K, _V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class CardService:
    """Builds, signs and caches the stub card and the tenant cards (CONTRACT §4)."""

    def __init__(
        self,
        settings: Settings,
        key: SigningKey,
        *,
        options: CardOptions | None = None,
        stub_cache_size: int = 8,
        tenant_cache_size: int = 4096,
    ) -> None:
        try:
            # Resolve the URLs once: a bad PUBLIC_URL fails at start, not on the first request.
            self._jwks_url = settings.jwks_url
            settings.endpoint_url  # noqa: B018 - validation side effect
        except OriginError as exc:
            raise ConfigError(f"PUBLIC_URL: {exc}") from None
        self._settings = settings
        self._key = key
        self._options = options or CardOptions()
        self._stubs: _Lru[tuple[str, ...], SignedDocument] = _Lru(stub_cache_size)
        self._tenants: _Lru[tuple[str, Hashable], SignedDocument] = _Lru(tenant_cache_size)

    @property
    def kid(self) -> str:
        return self._key.kid

    @property
    def jku(self) -> str:
        return self._jwks_url

    def stub_card(self, tenant_ids: Sequence[str]) -> SignedDocument:
        """The signed stub card for this set of tenants (order and duplicates do not matter)."""
        ids = tuple(sorted(set(tenant_ids)))
        cached = self._stubs.get(ids)
        if cached is None:
            card = build_stub_card(self._settings, ids, self._options)
            cached = signed_document(sign_card(card, self._key, jku=self._jwks_url))
            self._stubs.put(ids, cached)
        return cached

    def tenant_document(
        self, tenant_id: str, manifest: TenantManifest | Mapping[str, Any], version: Hashable
    ) -> SignedDocument:
        """The signed tenant card; ``version`` must change whenever the manifest does
        (``TenantRecord.card_version``: a removed and re-added tenant starts at revision 1).

        ``manifest`` may be the stored JSON object: it is validated only on a cache miss, so a
        steady-state ``GetExtendedAgentCard`` neither validates nor signs. An invalid stored
        manifest raises ``ValueError``.
        """
        validate_tenant_id(tenant_id)
        cache_key = (tenant_id, version)
        cached = self._tenants.get(cache_key)
        if cached is None:
            if not isinstance(manifest, TenantManifest):
                manifest = TenantManifest.from_data(dict(manifest))
            card = build_tenant_card(self._settings, tenant_id, manifest, self._options)
            cached = signed_document(sign_card(card, self._key, jku=self._jwks_url))
            self._tenants.put(cache_key, cached)
        return cached

    def tenant_card(
        self, tenant_id: str, manifest: TenantManifest | Mapping[str, Any], version: Hashable
    ) -> dict[str, Any]:
        """The ``GetExtendedAgentCard`` result: the signed card object (a private copy)."""
        return copy.deepcopy(self.tenant_document(tenant_id, manifest, version).card)
