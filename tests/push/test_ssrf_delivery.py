"""Delivery to an open tenant's target outside GATEWAY_ORIGINS (issue 49, SSRF): the name is
resolved once per attempt, every address checked, the request sent to the checked address
with ``Host`` and TLS SNI set to the name, redirects never followed; a gateway tenant's
pushes still go only to GATEWAY_ORIGINS. The wire is an ``httpx.MockTransport`` recording what
would have been sent, and the resolver is scripted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from app.push.pinning import Resolver as PinResolver
from app.push.policy import Outcome
from app.push.sender import PushSender
from app.push.store import ClaimedPush
from app.security.keys import SigningKey, generate_private_jwk
from app.settings import load_settings
from app.tasks.push_secrets import PushSecrets
from tests.push.conftest import payload

PUBLIC = "93.184.215.14"
HOOK = "https://hooks.example.com/a2a/cb"


class _Body(httpx.AsyncByteStream):
    """A body read from the wire (a ``content=`` body counts as already read)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b""


class Wire:
    """Records each request; answers ``status`` (with ``Location`` for a redirect)."""

    def __init__(self, status: int = 200, location: str | None = None) -> None:
        self.status = status
        self.location = location
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        headers = {"Location": self.location} if self.location else {}
        return httpx.Response(self.status, headers=headers, stream=_Body())

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.MockTransport(self.handler), follow_redirects=False
        )


class Resolver:
    def __init__(self, *answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def _sender(
    wire: Wire, resolver: PinResolver, *, open_tenant: bool = True, **settings: Any
) -> tuple[PushSender, PushSecrets]:
    config = load_settings(gateway_origins=["https://gateway.test"], **settings)
    key = SigningKey.from_jwk_json(json.dumps(generate_private_jwk("k1")))
    secrets = PushSecrets.from_settings(config, key)

    async def is_open(_tenant: str) -> bool:
        return open_tenant

    sender = PushSender(
        key=key,
        jku="https://edge.test/.well-known/jwks.json",
        allowlist=config.allowlist,
        secrets=secrets,
        client=wire.client(),
        timeout=config.push_timeout_seconds,
        targets=config.push_targets,
        open_tenant=is_open,
        pinned_client=wire.client(),
        resolver=resolver,
    )
    return sender, secrets


def _push(url: str, secrets: PushSecrets, **fields: Any) -> ClaimedPush:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": 1,
        "tenant": "open-t",
        "identity": "user-1",
        "task_id": "t-1",
        "config_id": "c-1",
        "kind": "final",
        "message_key": "final",
        "payload": payload("t-1", "final", state="TASK_STATE_COMPLETED"),
        "attempts": 1,
        "unauthorized_attempts": 0,
        "first_attempt_at": now,
        "created_at": now,
        "url": url,
        "token_enc": secrets.encrypt("notify-token"),
        "auth_scheme": None,
        "auth_credentials_enc": None,
        **fields,
    }
    return ClaimedPush(**values)


async def test_a_public_target_gets_the_push_at_the_checked_address() -> None:
    wire, resolver = Wire(), Resolver([PUBLIC])
    sender, secrets = _sender(wire, resolver)
    push = _push(
        HOOK,
        secrets,
        auth_scheme="Basic",
        auth_credentials_enc=secrets.encrypt("dXNlcjpwYXNz"),
    )
    result = await sender.attempt(push)
    assert result.outcome is Outcome.DELIVERED
    (request,) = wire.requests
    assert str(request.url) == f"https://{PUBLIC}/a2a/cb"
    assert request.headers["host"] == "hooks.example.com"
    assert request.extensions["sni_hostname"] == "hooks.example.com"
    # A2A §13.2: the client's credentials as given, and its notification token echoed.
    assert request.headers["authorization"] == "Basic dXNlcjpwYXNz"
    assert request.headers["x-a2a-notification-token"] == "notify-token"


@pytest.mark.parametrize("address", ["127.0.0.1", "169.254.169.254", "::1", "100.64.1.1"])
async def test_a_target_resolving_to_a_refused_address_is_never_contacted(address: str) -> None:
    wire = Wire()
    sender, secrets = _sender(wire, Resolver([address]))
    result = await sender.attempt(_push(HOOK, secrets))
    assert result.outcome is Outcome.PERMANENT and wire.requests == []
    assert result.error is not None and "hooks.example.com" not in result.error


async def test_dns_that_changes_after_the_check_does_not_move_the_connection() -> None:
    # Rebinding: public for the check, loopback for any later lookup. The attempt resolves
    # once and connects to the address it checked.
    wire, resolver = Wire(), Resolver([PUBLIC], ["127.0.0.1"])
    sender, secrets = _sender(wire, resolver)
    result = await sender.attempt(_push(HOOK, secrets))
    assert result.outcome is Outcome.DELIVERED and resolver.calls == 1
    assert [r.url.host for r in wire.requests] == [PUBLIC]
    # The next attempt resolves again and is refused: nothing reaches loopback.
    again = await sender.attempt(_push(HOOK, secrets))
    assert again.outcome is Outcome.PERMANENT and len(wire.requests) == 1


@pytest.mark.parametrize(
    "location", ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:8080/admin"]
)
async def test_a_redirect_is_not_followed(location: str) -> None:
    wire = Wire(status=307, location=location)
    sender, secrets = _sender(wire, Resolver([PUBLIC]))
    result = await sender.attempt(_push(HOOK, secrets))
    assert result.outcome is Outcome.PERMANENT and result.status == 307
    assert len(wire.requests) == 1 and result.error == "HTTP 307 (redirects are not followed)"


async def test_a_gateway_tenant_still_pushes_only_to_gateway_origins() -> None:
    wire, resolver = Wire(), Resolver([PUBLIC])
    sender, secrets = _sender(wire, resolver, open_tenant=False)
    result = await sender.attempt(_push(HOOK, secrets))
    assert result.outcome is Outcome.PERMANENT and wire.requests == [] and resolver.calls == 0
    assert result.error == "push url is not an allowed gateway"
    delivered = await sender.attempt(_push("https://gateway.test/push", secrets))
    assert delivered.outcome is Outcome.DELIVERED
    assert [str(r.url) for r in wire.requests] == ["https://gateway.test/push"]


@pytest.mark.parametrize(
    "url", ["http://hooks.example.com/", "https://127.0.0.1/", "https://intranet/hook"]
)
async def test_a_stored_target_that_no_longer_passes_the_form_is_refused(url: str) -> None:
    wire = Wire()
    sender, secrets = _sender(wire, Resolver([PUBLIC]))
    result = await sender.attempt(_push(url, secrets))
    assert result.outcome is Outcome.PERMANENT and wire.requests == []


async def test_a_name_that_does_not_resolve_is_retried() -> None:
    wire = Wire()
    sender, secrets = _sender(wire, Resolver([]))
    result = await sender.attempt(_push(HOOK, secrets))
    assert result.outcome is Outcome.RETRYABLE and result.error == "name resolution failed"


async def test_a_resolver_that_never_answers_is_bounded_and_retried() -> None:
    wire = Wire()

    async def hang(host: str, port: int) -> Sequence[str]:
        await asyncio.sleep(60)
        return [PUBLIC]

    sender, secrets = _sender(wire, hang, push_timeout_seconds=0.05)
    result = await sender.attempt(_push(HOOK, secrets))
    assert result.outcome is Outcome.RETRYABLE and result.error == "name resolution timed out"
    assert wire.requests == []


async def test_the_development_switch_reaches_loopback() -> None:
    wire = Wire()
    sender, secrets = _sender(wire, Resolver(["127.0.0.1"]), push_allow_private_targets=True)
    result = await sender.attempt(_push("http://hooks.example.com:8080/cb", secrets))
    assert result.outcome is Outcome.DELIVERED
    assert str(wire.requests[0].url) == "http://127.0.0.1:8080/cb"
    assert wire.requests[0].headers["host"] == "hooks.example.com:8080"
