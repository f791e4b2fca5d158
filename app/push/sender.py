"""One delivery attempt: the signed POST to the gateway's push URL (CONTRACT §7).

- A URL on ``GATEWAY_ORIGINS`` is contacted as given, re-checked at send time (the list may
  have shrunk since the config was stored). Any other URL only for an ``open`` tenant (asked
  at send time: the tenant may have changed profile since) and only past the SSRF rules:
  its form again, then the name resolved once, every address checked, and the connection
  made to the checked address (``app.push_targets``, ``app.push.pinning``), on a client that
  keeps no connection alive (its pool keys on the address, not the name verified).
- ``Authorization: Bearer <callback JWT>`` signed for this attempt (``kid``/``jku`` exactly the
  card's, ``aud`` = the push URL, ``exp = iat + 300``), or A2A §13.2
  ``Authorization: <scheme> <credentials>`` when the config carries authentication.
- ``X-A2A-Notification-Token`` echoed verbatim; ``Content-Type: application/a2a+json``.
- No redirects, one overall deadline per attempt (``httpx`` timeouts are per phase, so a
  server dripping bytes could otherwise hold an attempt forever), the response body is
  never trusted or logged (at most a small prefix is drained so the connection can be reused).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from app.origins import OriginAllowlist, OriginError, parse_url
from app.push.pinning import PinnedRequest, ResolveFailed, Resolver, pin, system_resolver
from app.push.policy import AttemptResult, Outcome, classify_status, status_error
from app.push.store import ClaimedPush
from app.push_targets import PushTargets, TargetRefused
from app.security.keys import SigningKey
from app.tasks.push_secrets import PushSecretError, PushSecrets

CONTENT_TYPE = "application/a2a+json"
TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 - a header name
CALLBACK_TTL_SECONDS = 300
_DRAIN_BYTES = 16 * 1024
# RFC 9110 §5.5 field values: visible ASCII, space and tab only (no CR/LF header injection).
_FIELD_VALUE = re.compile(r"[\x20-\x7e\t]*")
# RFC 9110 §11.1 auth-scheme is a token.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class _Refused(Exception):
    """A push that must not (or cannot) be sent; the message is safe text."""


def push_client(*, timeout: float, concurrency: int, keep_alive: bool = True) -> httpx.AsyncClient:
    """The one shared client for pushes: no redirects, no proxies from the environment.
    ``keep_alive=False`` for pinned targets: a pooled connection is matched by address, so
    it could carry a request for another name than the one its certificate was checked for."""
    return httpx.AsyncClient(
        follow_redirects=False,
        timeout=httpx.Timeout(timeout),
        limits=httpx.Limits(
            max_connections=max(concurrency, 1) * 2,
            max_keepalive_connections=concurrency if keep_alive else 0,
        ),
        trust_env=False,
    )


OpenTenant = Callable[[str], Awaitable[bool]]


async def _never_open(_tenant: str) -> bool:
    return False


def encode_body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class PushSender:
    def __init__(
        self,
        *,
        key: SigningKey,
        jku: str,
        allowlist: OriginAllowlist,
        secrets: PushSecrets,
        client: httpx.AsyncClient,
        timeout: float,
        targets: PushTargets | None = None,
        open_tenant: OpenTenant = _never_open,
        pinned_client: httpx.AsyncClient | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._key = key
        self._jku = jku
        self._allowlist = allowlist
        self._secrets = secrets
        self._client = client
        self._timeout = timeout
        self._targets = targets or PushTargets(allowlist)
        self._open_tenant = open_tenant
        self._pinned_client = pinned_client or client
        self._resolver = resolver

    def headers(self, push: ClaimedPush) -> dict[str, str]:
        """The request headers for one attempt (a fresh callback JWT each call)."""
        url = push.url or ""
        headers = {"Content-Type": CONTENT_TYPE}
        if push.auth_scheme and push.auth_credentials_enc:
            credentials = self._open(push.auth_credentials_enc, "push credentials")
            if not _TOKEN.fullmatch(push.auth_scheme) or not _FIELD_VALUE.fullmatch(credentials):
                raise _Refused("push credentials are not a valid header value")
            headers["Authorization"] = f"{push.auth_scheme} {credentials}"
        else:
            token = self._key.callback_jwt(jku=self._jku, audience=url, ttl=CALLBACK_TTL_SECONDS)
            headers["Authorization"] = f"Bearer {token}"
        if push.token_enc is not None:
            token_value = self._open(push.token_enc, "notification token")
            if not _FIELD_VALUE.fullmatch(token_value):
                raise _Refused("notification token is not a valid header value")
            headers[TOKEN_HEADER] = token_value
        return headers

    def _open(self, sealed: str, what: str) -> str:
        try:
            return self._secrets.decrypt(sealed)
        except PushSecretError:
            raise _Refused(f"{what} cannot be decrypted") from None

    async def attempt(self, push: ClaimedPush) -> AttemptResult:
        if not deterministic_message(push):
            # CONTRACT §7: never push SUBMITTED or an update without a deterministic message
            # id; the gateway deduplicates on it. A writer bug must not reach the gateway.
            return AttemptResult(Outcome.PERMANENT, error="payload has no task message id")
        route: PinnedRequest | None = None
        try:
            # CONTRACT §7: never contact a target outside GATEWAY_ORIGINS, decided before I/O
            # (an open tenant's other targets only past the SSRF rules, ``_pinned``).
            self._allowlist.check_url(push.url, what="push url")
        except OriginError:
            pinned = await self._pinned(push)
            if isinstance(pinned, AttemptResult):
                return pinned
            route = pinned
        try:
            headers = self.headers(push)
        except _Refused as exc:
            return AttemptResult(Outcome.PERMANENT, error=str(exc))
        body = encode_body(push.payload)
        if route is None:
            return await self._post(str(push.url), headers, body)
        return await self._post(
            route.url, {**headers, **route.headers}, body, route.extensions, pinned=True
        )

    async def _pinned(self, push: ClaimedPush) -> PinnedRequest | AttemptResult:
        """An open tenant's target outside GATEWAY_ORIGINS, past the SSRF rules, or why not.
        Refusals are permanent (fail closed); a name that does not resolve is retried."""
        if not await self._open_tenant(push.tenant):
            return AttemptResult(Outcome.PERMANENT, error="push url is not an allowed gateway")
        try:
            parsed = parse_url(
                push.url,
                allow_loopback_http=self._allowlist.allow_loopback_http,
                allow_any_http=self._targets.allow_private,
            )
            self._targets.check_open_form(parsed)
            # The lookup shares the attempt's deadline: a resolver that never answers must
            # not hold a delivery slot.
            async with asyncio.timeout(self._timeout):
                return await pin(parsed, self._targets, self._resolver)
        except TimeoutError:
            return AttemptResult(Outcome.RETRYABLE, error="name resolution timed out")
        except OriginError as exc:
            return AttemptResult(Outcome.PERMANENT, error=f"push url is not acceptable: {exc}")
        except TargetRefused as exc:
            return AttemptResult(Outcome.PERMANENT, error=str(exc))
        except ResolveFailed as exc:
            return AttemptResult(Outcome.RETRYABLE, error=str(exc))

    async def _post(
        self,
        url: str,
        headers: dict[str, str],
        body: bytes,
        extensions: dict[str, str] | None = None,
        *,
        pinned: bool = False,
    ) -> AttemptResult:
        status: int | None = None
        retry_after: str | None = None
        failure: AttemptResult | None = None
        try:
            async with asyncio.timeout(self._timeout):
                client = self._pinned_client if pinned else self._client
                async with client.stream(
                    "POST", url, content=body, headers=headers, extensions=extensions
                ) as resp:
                    status = resp.status_code
                    retry_after = resp.headers.get("retry-after")
                    await _drain(resp)
        except (TimeoutError, httpx.TimeoutException):
            failure = AttemptResult(Outcome.RETRYABLE, error="timeout")
        except httpx.TransportError as exc:
            # The class name only: exception text can carry the URL or peer details.
            failure = AttemptResult(
                Outcome.RETRYABLE, error=f"network error ({type(exc).__name__})"
            )
        except httpx.HTTPError as exc:
            failure = AttemptResult(Outcome.RETRYABLE, error=f"http error ({type(exc).__name__})")
        if status is None:
            return failure or AttemptResult(Outcome.RETRYABLE, error="no answer")
        # The status line is the answer (CONTRACT §7: "200 means done"): a body that drips past
        # the deadline or is cut off after it only costs the connection, not a resend.
        return AttemptResult(
            classify_status(status),
            status=status,
            error=status_error(status),
            retry_after=retry_after,
        )


def deterministic_message(push: ClaimedPush) -> bool:
    """The payload reports this task with ``<taskId>:<key>`` and is not SUBMITTED."""
    body = push.payload
    update = body.get("task") or body.get("statusUpdate")
    if not isinstance(update, dict):
        return False
    task_id = update.get("id", update.get("taskId"))
    status = update.get("status")
    if task_id != push.task_id or not isinstance(status, dict):
        return False
    message = status.get("message")
    if status.get("state") == "TASK_STATE_SUBMITTED" or not isinstance(message, dict):
        return False
    return message.get("messageId") == f"{push.task_id}:{push.message_key}"


async def _drain(response: httpx.Response) -> None:
    """Read a small body so the connection can be reused; give up (close) past the cap."""
    seen = 0
    async for chunk in response.aiter_raw():
        seen += len(chunk)
        if seen > _DRAIN_BYTES:
            break
