"""Encryption at rest for push-config secrets (CONTRACT §5 push-config CRUD, §7).

The notification token and A2A §13.2 credentials must be echoed to the gateway verbatim, so
they are encrypted (not hashed). Fernet (AES-128-CBC + HMAC-SHA256, authenticated) with either
an operator-provided key (``EDGE_PUSH_SECRET_KEY``, a Fernet key) or a key derived from the
edge's signing key with HKDF-SHA256 (RFC 5869), so a default deployment needs no extra secret.
Rotating the signing key without setting ``EDGE_PUSH_SECRET_KEY`` makes stored secrets
unreadable: operators who rotate keys should set the push secret key explicitly.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.errors import ConfigError, EdgeError
from app.security.keys import SigningKey
from app.settings import Settings

HKDF_INFO = b"looping-edge push secrets"


class SecretUnreadable(EdgeError):
    """A stored secret cannot be decrypted (wrong key or tampered). Never carries the text."""

    default_reason = "push_secret_unreadable"


class SecretBox:
    """Seal and open short secrets; ``open`` raises ``SecretUnreadable`` on any defect."""

    def __init__(self, key: bytes) -> None:
        # ``key`` is the urlsafe-base64 Fernet key (44 bytes) as Fernet expects it.
        try:
            self._fernet = Fernet(key)
        except (ValueError, binascii.Error):
            raise ConfigError(
                "EDGE_PUSH_SECRET_KEY: must be a Fernet key (32 bytes, urlsafe base64)"
            ) from None

    def seal(self, text: str) -> str:
        return self._fernet.encrypt(text.encode("utf-8")).decode("ascii")

    def open(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError, ValueError, TypeError):
            raise SecretUnreadable("a stored push secret cannot be decrypted") from None


def derive_key(signing_key: SigningKey) -> bytes:
    """HKDF-SHA256 over the signing key's raw private bytes → a Fernet key."""
    raw = signing_key.private_key.private_bytes_raw()
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(raw)
    return base64.urlsafe_b64encode(derived)


def secret_box_for(settings: Settings, signing_key: SigningKey) -> SecretBox:
    """The box for this deployment: ``EDGE_PUSH_SECRET_KEY`` if set, else derived."""
    if settings.push_secret_key is not None:
        configured = settings.push_secret_key.get_secret_value().strip()
        if configured:
            return SecretBox(configured.encode("ascii", errors="replace"))
    return SecretBox(derive_key(signing_key))
