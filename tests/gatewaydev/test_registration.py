"""Registration like the Looping gateway: verified cards, pinned jku+kid (trust on first use)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from app.gatewaydev.registration import RegistrationError, register
from app.gatewaydev.session import Turn, send_message_params
from app.gatewaydev.state import GatewayState
from app.security.keys import generate_private_jwk
from app.testing.edge import EDGE_PUBLIC_URL, EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit

Rewrite = Callable[[httpx.Request, httpx.Response], httpx.Response]


class _Rewriting(httpx.AsyncBaseTransport):
    """The edge app, with an optional man in the middle rewriting answers."""

    def __init__(self, app: object, rewrite: Rewrite | None) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.rewrite = rewrite
        self.urls: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        response = await self.inner.handle_async_request(request)
        if self.rewrite is None:
            return response
        await response.aread()
        return self.rewrite(request, response)


@asynccontextmanager
async def edge(db_url: str, **overrides: object) -> AsyncIterator[EdgeHarness]:
    from app.tenants.registry import TenantExists

    async with edge_harness(db_url, **overrides) as harness:
        with contextlib.suppress(TenantExists):  # a second edge over the same database
            await harness.add_tenant("demo", agent="echo")
        yield harness


def client_for(harness: EdgeHarness, rewrite: Rewrite | None = None) -> httpx.AsyncClient:
    from app.main import create_app

    return httpx.AsyncClient(transport=_Rewriting(create_app(harness.services), rewrite))


async def test_first_registration_pins_and_the_second_matches(db_url: str, tmp_path: Path) -> None:
    state = GatewayState(tmp_path)
    async with edge(db_url) as harness, client_for(harness) as client:
        reg = await register(
            client, edge_url=EDGE_PUBLIC_URL, state=state, kit=harness.gateway, tenant="demo"
        )
        assert reg.newly_pinned and reg.endpoint == harness.settings.endpoint_url
        assert reg.pin.kid == harness.services.key.kid
        assert reg.pin.jku == harness.services.cards.jku
        assert reg.tenant_card is not None
        assert reg.tenant_card["supportedInterfaces"][0]["tenant"] == "demo"
        pins = json.loads((tmp_path / "pins.json").read_text())
        assert pins[EDGE_PUBLIC_URL]["kid"] == reg.pin.kid
        again = await register(client, edge_url=EDGE_PUBLIC_URL, state=state)
        assert not again.newly_pinned and again.pin == reg.pin


async def test_a_changed_signing_key_is_refused(db_url: str, tmp_path: Path) -> None:
    state = GatewayState(tmp_path)
    async with edge(db_url) as harness, client_for(harness) as client:
        await register(client, edge_url=EDGE_PUBLIC_URL, state=state)
    rotated = json.dumps(generate_private_jwk("edge-rotated"))
    async with edge(db_url, signing_key=rotated) as harness, client_for(harness) as client:
        with pytest.raises(RegistrationError) as info:
            await register(client, edge_url=EDGE_PUBLIC_URL, state=state)
        assert "edge-rotated" in str(info.value) and "pinned" in str(info.value)
        assert "pins.json" in str(info.value)
        transport = client._transport
        assert isinstance(transport, _Rewriting)
        # Refused before fetching the new JWKS.
        assert not any(u.endswith("/jwks.json") for u in transport.urls)


def _tamper_card(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    if request.url.path == "/.well-known/agent-card.json":
        doc = response.json()
        doc["description"] = "tampered"
        return httpx.Response(200, json=doc)
    return httpx.Response(response.status_code, content=response.content)


def _foreign_jku(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    if request.url.path == "/.well-known/agent-card.json":
        from app.security.keys import SigningKey

        evil = SigningKey.from_jwk_json(json.dumps(generate_private_jwk("edge-test-key")))
        from app.cards.signing import sign_card

        doc = response.json()
        return httpx.Response(
            200, json=sign_card(doc, evil, jku="https://evil.test/.well-known/jwks.json")
        )
    return httpx.Response(response.status_code, content=response.content)


async def test_a_tampered_card_is_refused_and_not_pinned(db_url: str, tmp_path: Path) -> None:
    state = GatewayState(tmp_path)
    async with edge(db_url) as harness, client_for(harness, _tamper_card) as client:
        with pytest.raises(RegistrationError, match="signature does not verify"):
            await register(client, edge_url=EDGE_PUBLIC_URL, state=state)
    assert not (tmp_path / "pins.json").exists()


async def test_a_jku_off_the_edge_origin_is_never_fetched(db_url: str, tmp_path: Path) -> None:
    state = GatewayState(tmp_path)
    async with edge(db_url) as harness, client_for(harness, _foreign_jku) as client:
        with pytest.raises(RegistrationError, match="not on the edge origin"):
            await register(client, edge_url=EDGE_PUBLIC_URL, state=state)
        transport = client._transport
        assert isinstance(transport, _Rewriting)
        assert not any("evil.test" in u for u in transport.urls)


async def test_tenant_card_needs_our_token_to_be_trusted(db_url: str, tmp_path: Path) -> None:
    state = GatewayState(tmp_path)
    stranger = GatewayKit(origin="https://stranger.test")
    async with edge(db_url) as harness, client_for(harness) as client:
        with pytest.raises(RegistrationError, match="HTTP 401"):
            await register(
                client, edge_url=EDGE_PUBLIC_URL, state=state, kit=stranger, tenant="demo"
            )


async def test_unknown_tenant_is_reported(db_url: str, tmp_path: Path) -> None:
    state = GatewayState(tmp_path)
    async with edge(db_url) as harness, client_for(harness) as client:
        with pytest.raises(RegistrationError, match="unknown tenant"):
            await register(
                client, edge_url=EDGE_PUBLIC_URL, state=state, kit=harness.gateway, tenant="nope"
            )


def test_gateway_key_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    state = GatewayState(tmp_path / "gw")
    first = state.identity()
    assert (tmp_path / "gw" / "gateway-key.json").stat().st_mode & 0o777 == 0o600
    assert state.identity().kid == first.kid
    assert GatewayState(tmp_path / "gw").identity().key.private_bytes_raw() == (
        first.key.private_bytes_raw()
    )


def test_send_message_params_carry_the_push_config() -> None:
    params = send_message_params(
        Turn("hi", "demo", {"key": "u"}, task_id="t", context_id="c"), "http://x/push/1", "tok"
    )
    assert params["configuration"]["taskPushNotificationConfig"] == {
        "url": "http://x/push/1",
        "token": "tok",
    }
    assert params["message"]["taskId"] == "t" and params["message"]["contextId"] == "c"
    assert params["message"]["role"] == "ROLE_USER"


def test_endpoints_are_remembered_privately(tmp_path: Path) -> None:
    state = GatewayState(tmp_path / "gw")
    assert state.endpoints() == {}
    state.save_endpoint("/push/a", "tok-a")
    state.save_endpoint("/push/b", "tok-b")
    assert GatewayState(tmp_path / "gw").endpoints() == {"/push/a": "tok-a", "/push/b": "tok-b"}
    assert (tmp_path / "gw" / "endpoints.json").stat().st_mode & 0o777 == 0o600
