"""The bench's gateway: a ``GatewayKit`` whose JWKS is served on a real loopback port (the
project's ``serve_jwks``, in a background thread), and pools of pre-minted distinct tokens.

Every token has its own ``jti`` (and ``iat``), so the signing input differs per token and the
edge performs a full Ed25519 verification for each (its memo holds 256 accepted headers and
``iss`` values, never signatures). Tokens live ``EDGE_MAX_TOKEN_LIFETIME_SECONDS`` (300 s):
pools are minted right before the runs that use them and re-minted when older than 200 s.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks

TOKEN_TTL = 300
POOL_MAX_AGE = 200.0


def identity_doc(key: str) -> dict[str, Any]:
    return {"key": key, "name": f"Bench {key}", "kind": "user"}


def _mint_chunk(
    raw_key: bytes, kid: str, origin: str, audience: str, tenant: str, identities: list[str]
) -> list[str]:
    kit = GatewayKit(origin=origin, kid=kid, key=Ed25519PrivateKey.from_private_bytes(raw_key))
    return [
        kit.mint(audience=audience, tenant=tenant, identity=identity_doc(i), ttl=TOKEN_TTL)
        for i in identities
    ]


@dataclass
class BenchGateway:
    kit: GatewayKit = field(default_factory=GatewayKit)
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _stop: asyncio.Event | None = None
    _pools: dict[tuple[Any, ...], tuple[float, list[str]]] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return self.kit.origin

    def start(self) -> None:
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            async with serve_jwks(self.kit):  # binds 127.0.0.1:<free>, sets kit.origin
                ready.set()
                await self._stop.wait()

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("JWKS server did not start")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(5)

    def mint(self, *, audience: str, tenant: str, identity: str) -> str:
        return self.kit.mint(
            audience=audience, tenant=tenant, identity=identity_doc(identity), ttl=TOKEN_TTL
        )

    def pool(self, *, audience: str, tenant: str, identities: list[str], size: int) -> list[str]:
        """``size`` distinct tokens; token ``k`` is for ``identities[k % len(identities)]``."""
        key = (audience, tenant, tuple(identities), size)
        cached = self._pools.get(key)
        if cached is not None and time.time() - cached[0] < POOL_MAX_AGE:
            return cached[1]
        minted_at = time.time()
        owners = [identities[k % len(identities)] for k in range(size)]
        raw = self.kit.key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        # Two chunks at least, so both processes of the pool mint (a quick run's pool is one
        # 5,000-token chunk otherwise).
        step = max(1, min(5000, -(-size // 2)))
        chunks = [owners[i : i + step] for i in range(0, size, step)]
        with ProcessPoolExecutor(max_workers=2) as pool:
            futures = [
                pool.submit(
                    _mint_chunk, raw, self.kit.kid, self.kit.origin, audience, tenant, chunk
                )
                for chunk in chunks
            ]
            tokens = [t for f in futures for t in f.result()]
        self._pools[key] = (minted_at, tokens)
        return tokens
