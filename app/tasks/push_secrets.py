"""Encryption at rest of push-config secrets: the notification token and A2A §13.2
credentials (CONTRACT §7: "stored credentials are encrypted at rest").

Fernet (AES-128-CBC + HMAC-SHA256, authenticated) with a key derived by HKDF-SHA256 (RFC 5869)
from ``EDGE_PUSH_SECRET_KEY`` when set (any high-entropy string), otherwise from the raw
private bytes of the edge's Ed25519 signing key. The fallback keeps a single-secret deployment
working, but a signing-key rotation then makes stored configs unreadable (their deliveries
fail permanently): production should set ``EDGE_PUSH_SECRET_KEY``. The HKDF ``info`` label
separates this key from any other use of the same secret.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.security.keys import SigningKey
from app.settings import Settings

_INFO = b"looping-edge/push-config-secrets/fernet/v1"


class PushSecretError(Exception):
    """A stored secret cannot be decrypted (wrong key, or tampered). Message carries no data."""


def _derive(material: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material)


class PushSecrets:
    def __init__(self, material: bytes) -> None:
        if len(material) < 16:
            raise ValueError("push secret material is too short")
        self._fernet = Fernet(base64.urlsafe_b64encode(_derive(material, _INFO)))

    @classmethod
    def from_settings(cls, settings: Settings, key: SigningKey) -> PushSecrets:
        secret = settings.push_secret_key
        if secret is not None and secret.get_secret_value().strip():
            return cls(secret.get_secret_value().encode())
        return cls(key.private_key.private_bytes_raw())

    def encrypt(self, plain: str) -> str:
        return self._fernet.encrypt(plain.encode()).decode("ascii")

    def decrypt(self, stored: str) -> str:
        try:
            return self._fernet.decrypt(stored.encode("ascii")).decode()
        except (InvalidToken, UnicodeError, ValueError):
            raise PushSecretError("stored push secret cannot be decrypted") from None
