"""The development gateway's state directory (default ``.dev/gateway``).

- ``gateway-key.json``: the gateway's own Ed25519 private JWK (mode 0600), created on first use;
  its public half is served at ``<origin>/.well-known/jwks.json`` for the edge to verify our
  tokens (CONTRACT §3 step 5).
- ``endpoints.json``: the push paths we handed out and their notification tokens (mode 0600),
  so a later run (answering an input-required task) still checks ``X-A2A-Notification-Token``.
- ``pins.json``: per edge origin, the ``jku`` and ``kid`` its card was signed with when we first
  registered (trust on first use, CONTRACT §4 last bullet). A different pair later is refused
  until the operator removes the pin: a changed signing identity is a re-registration event.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.security.keys import SigningKey, generate_private_jwk
from app.testing.gateway import b64url_encode
from app.testing.verify import Pin, VerificationError

KEY_FILE = "gateway-key.json"
PINS_FILE = "pins.json"
ENDPOINTS_FILE = "endpoints.json"
KID_PREFIX = "gateway-dev-"


def _new_key_jwk() -> dict[str, str]:
    """A fresh key whose ``kid`` names it (RFC 7638 thumbprint): a new state directory on the
    same port must not reuse the kid of the old key, or an edge holding the old JWKS would
    check the new key's tokens against the old key (401 until its cache expired) instead of
    refetching for an unknown kid (CONTRACT §3 step 5)."""
    jwk = generate_private_jwk(KID_PREFIX + "new")
    members = json.dumps(
        {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}, separators=(",", ":")
    )
    jwk["kid"] = KID_PREFIX + b64url_encode(hashlib.sha256(members.encode()).digest())[:16]
    return jwk


class PinMismatch(VerificationError):
    """The edge now signs with another ``jku``/``kid`` than the pinned ones."""


@dataclass(frozen=True)
class GatewayIdentity:
    kid: str
    key: Ed25519PrivateKey


class GatewayState:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _ensure_dir(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def identity(self) -> GatewayIdentity:
        """Load the gateway key, creating it (0600, never overwritten) on first use."""
        self._ensure_dir()
        path = self.directory / KEY_FILE
        if not path.exists():
            text = json.dumps(_new_key_jwk())
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass  # another run created it meanwhile: load theirs
            else:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
        key = SigningKey.from_jwk_json(path.read_text(encoding="utf-8"))
        return GatewayIdentity(kid=key.kid, key=key.private_key)

    def _pins(self) -> dict[str, Any]:
        path = self.directory / PINS_FILE
        if not path.exists():
            return {}
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise VerificationError(f"{path} is unreadable; remove it to re-register") from None
        return doc if isinstance(doc, dict) else {}

    def pinned(self, edge_origin: str) -> Pin | None:
        entry = self._pins().get(edge_origin)
        if not isinstance(entry, dict):
            return None
        jku, kid = entry.get("jku"), entry.get("kid")
        if not isinstance(jku, str) or not isinstance(kid, str):
            return None
        return Pin(jku=jku, kid=kid)

    def check_or_pin(self, edge_origin: str, seen: Pin) -> bool:
        """Trust on first use: store ``seen``; later, require it. True if newly pinned."""
        current = self.pinned(edge_origin)
        if current is None:
            self._ensure_dir()
            pins = self._pins()
            pins[edge_origin] = {**seen.as_json(), "pinnedAt": datetime.now(UTC).isoformat()}
            path = self.directory / PINS_FILE
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(pins, indent=2) + "\n", encoding="utf-8")
            tmp.replace(path)
            return True
        if current != seen:
            raise PinMismatch(
                f"the edge {edge_origin} now signs with kid '{seen.kid}' (jku {seen.jku}) but "
                f"kid '{current.kid}' (jku {current.jku}) is pinned. A changed signing identity "
                f"is a re-registration: if the rotation is intended, remove the entry for "
                f"{edge_origin} from {self.directory / PINS_FILE} and run again."
            )
        return False

    def endpoints(self) -> dict[str, str]:
        path = self.directory / ENDPOINTS_FILE
        if not path.exists():
            return {}
        # Refused, not treated as empty: the next save would replace it and lose the
        # notification tokens of every registration (as pins.json is refused above).
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise VerificationError(f"{path} is unreadable; remove it to start over") from None
        if not isinstance(doc, dict):
            raise VerificationError(f"{path} is not a JSON object; remove it to start over")
        return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, str)}

    def save_endpoint(self, push_path: str, token: str) -> None:
        self._ensure_dir()
        known = self.endpoints()
        known[push_path] = token
        path = self.directory / ENDPOINTS_FILE
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(known, indent=2) + "\n")
        tmp.replace(path)
