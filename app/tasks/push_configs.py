"""Push-notification configs: validation, durable scoped storage and the CRUD methods
(CONTRACT §5 "Push-config CRUD", §7).

* The url must parse strictly and its origin must be one of ``GATEWAY_ORIGINS``: a gateway
  tenant's pushes only ever go back to a trusted gateway (CONTRACT §5, §7 "push targets
  outside GATEWAY_ORIGINS are never contacted"). An open tenant's may name any URL that passes
  the SSRF form rules (issue 49, ``app.push_targets``). Stored exactly as given (CONTRACT §7
  "POST to the config's url exactly").
* The token and the A2A §13.2 credentials are encrypted at rest (``push_secrets``) and never
  returned: answers carry ``url``, ``id``, ``taskId`` and ``authentication.scheme`` only.
* Every operation first finds the task in the caller scope: another caller's task is
  ``-32001`` exactly like a missing one.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from a2a.types import TaskPushNotificationConfig

from app.db.engine import Database
from app.db.push_configs import PushConfigView, SealedPush
from app.errors import InvalidParams, TaskNotFound
from app.origins import OriginError, parse_url
from app.push_targets import PushTargets
from app.security.caller import CallerScope
from app.tasks.push_secrets import PushSecrets
from app.text import is_clean, shown

MAX_CONFIG_ID = 128
_CURSOR = re.compile(r"[A-Za-z0-9_-]+")  # what _encode_id_cursor writes
MAX_SECRET = 4096
# RFC 9110 §5.6.2 token: an auth scheme is sent as ``Authorization: <scheme> <credentials>``.
_SCHEME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
# A header value we can send verbatim (RFC 9110 §5.5 field-value): visible ASCII with inner
# spaces, no CR/LF (header injection) and no leading or trailing space, which HTTP clients
# refuse to send (the push would fail on every attempt). All three are matched whole
# (``fullmatch``: ``$`` would also match before a trailing newline).
_HEADER_VALUE_RE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
_ID_RE = re.compile(r"[\x21-\x7e]{1,128}")


@dataclass(frozen=True)
class PushConfigInput:
    """A validated push config, secrets still in clear (never logged, never returned)."""

    id: str | None
    url: str
    token: str | None
    auth_scheme: str | None = None
    auth_credentials: str | None = None

    def canonical(self) -> dict[str, Any]:
        """What the SendMessage content hash covers (the idempotency conflict check)."""
        return {
            "id": self.id,
            "url": self.url,
            "token": self.token,
            "authScheme": self.auth_scheme,
            "authCredentials": self.auth_credentials,
        }


def _header_safe(value: str, *, field: str) -> str:
    if len(value) > MAX_SECRET or not _HEADER_VALUE_RE.fullmatch(value):
        raise InvalidParams(
            f"{field} must be at most {MAX_SECRET} printable ASCII characters, "
            "without leading or trailing spaces",
            reason="invalid_push_config",
        )
    return value


def validate_push_config(
    config: TaskPushNotificationConfig,
    *,
    prefix: str,
    targets: PushTargets,
    require_token: bool,
    open_tenant: bool = False,
) -> PushConfigInput:
    """CONTRACT §5: missing or bad fields are ``-32602`` naming the field (REFERENCE 44-46)."""
    if not config.url:
        raise InvalidParams(f"{prefix}.url is required", reason="push_config_required")
    if require_token and not config.token:
        raise InvalidParams(f"{prefix}.token is required", reason="push_token_required")
    _check_url(config.url, prefix=prefix, targets=targets, open_tenant=open_tenant)
    if config.id and not _ID_RE.fullmatch(config.id):
        raise InvalidParams(
            f"{prefix}.id must be 1-{MAX_CONFIG_ID} printable characters without spaces",
            reason="invalid_push_config",
        )
    token = _header_safe(config.token, field=f"{prefix}.token") if config.token else None
    scheme: str | None = None
    credentials: str | None = None
    if config.HasField("authentication"):
        scheme = config.authentication.scheme
        if not _SCHEME_RE.fullmatch(scheme):
            raise InvalidParams(
                f"{prefix}.authentication.scheme must be an HTTP auth scheme name",
                reason="invalid_push_config",
            )
        if config.authentication.credentials:
            credentials = _header_safe(
                config.authentication.credentials, field=f"{prefix}.authentication.credentials"
            )
    return PushConfigInput(
        id=config.id or None,
        url=config.url,
        token=token,
        auth_scheme=scheme,
        auth_credentials=credentials,
    )


def _check_url(url: str, *, prefix: str, targets: PushTargets, open_tenant: bool) -> None:
    """A gateway tenant's push URL must be on ``GATEWAY_ORIGINS`` (CONTRACT §5); an open
    tenant's may be any URL that passes the SSRF form rules (``app.push_targets``; the
    addresses are checked again at delivery). Messages name the rule, never the URL."""
    allowlist = targets.allowlist
    try:
        parsed = parse_url(
            url,
            allow_loopback_http=allowlist.allow_loopback_http,
            allow_any_http=open_tenant and targets.allow_private,
        )
    except OriginError as exc:
        raise InvalidParams(
            f"{prefix}.url is not a valid URL ({exc})", reason="invalid_push_url"
        ) from None
    # One parse serves both checks (it was parsed twice per accept, 8-11 us each).
    if allowlist.allows(parsed):
        return
    if not open_tenant:
        raise InvalidParams(
            f"{prefix}.url origin is not in the allowed gateway origins (GATEWAY_ORIGINS)",
            reason="push_url_not_allowed",
        )
    try:
        targets.check_open_form(parsed)
    except OriginError as exc:
        raise InvalidParams(
            f"{prefix}.url is not an allowed push target ({exc})", reason="push_url_not_allowed"
        ) from None


def seal(config: PushConfigInput, secrets: PushSecrets) -> SealedPush:
    """The config as stored: token and credentials encrypted at rest."""
    return SealedPush(
        id=config.id,
        url=config.url,
        token_enc=secrets.encrypt(config.token) if config.token else None,
        auth_scheme=config.auth_scheme,
        auth_credentials_enc=(
            secrets.encrypt(config.auth_credentials) if config.auth_credentials else None
        ),
    )


def public_config(config: PushConfigView) -> dict[str, Any]:
    """The config as answered: no token, no credentials (CONTRACT §5, §7)."""
    doc: dict[str, Any] = {
        "tenant": config.tenant,
        "id": config.id,
        "taskId": config.task_id,
        "url": config.url,
    }
    if config.auth_scheme:
        doc["authentication"] = {"scheme": config.auth_scheme}
    return doc


class PushConfigService:
    """The four push-config methods, scoped to the caller (the store finds the task first)."""

    def __init__(self, db: Database, targets: PushTargets, secrets: PushSecrets) -> None:
        self._store = db.storage.push_configs
        self._targets = targets
        self._secrets = secrets

    async def create(
        self, scope: CallerScope, config: TaskPushNotificationConfig, *, open_tenant: bool = False
    ) -> dict[str, Any]:
        checked = validate_push_config(
            config,
            prefix="params",
            targets=self._targets,
            require_token=False,
            open_tenant=open_tenant,
        )
        stored = await self._store.put(scope, config.task_id, seal(checked, self._secrets))
        return public_config(stored)

    async def get(self, scope: CallerScope, task_id: str, config_id: str) -> dict[str, Any]:
        found = await self._store.get(scope, task_id, config_id)
        if found is None:
            raise TaskNotFound(
                f"push notification config '{shown(config_id)}' not found for this task",
                reason="push_config_not_found",
            )
        return public_config(found)

    async def list(
        self, scope: CallerScope, task_id: str, page_size: int, page_token: str
    ) -> dict[str, Any]:
        after = _decode_id_cursor(page_token) if page_token else None
        rows = await self._store.page(scope, task_id, after=after, limit=page_size + 1)
        more = len(rows) > page_size
        rows = rows[:page_size]
        token = _encode_id_cursor(rows[-1].id) if more and rows else ""
        return {"configs": [public_config(r) for r in rows], "nextPageToken": token}

    async def delete(self, scope: CallerScope, task_id: str, config_id: str) -> dict[str, Any]:
        """Idempotent: deleting a config that is already gone succeeds (CONTRACT §5)."""
        await self._store.delete(scope, task_id, config_id)
        return {}


def _encode_id_cursor(config_id: str) -> str:
    return base64.urlsafe_b64encode(config_id.encode()).decode("ascii").rstrip("=")


def _decode_id_cursor(token: str) -> str:
    try:
        # Strict: the lenient decoder drops characters outside the alphabet, so "!!!" read as
        # an empty id and restarted the listing instead of being refused (found by audit).
        if not _CURSOR.fullmatch(token):
            raise ValueError
        padded = token + "=" * (-len(token) % 4)
        raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
        config_id = raw.decode()
        if not config_id or not is_clean(config_id):  # U+0000 would reach PostgreSQL as -32603
            raise ValueError
        return config_id
    except (ValueError, UnicodeError):
        raise InvalidParams("params.pageToken is not a valid page token") from None
