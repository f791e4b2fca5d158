"""Fixtures for the gateway-token tests: a kit, settings, a fetcher on a mock transport and
a controllable monotonic clock."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.security.caller import VerifiedCaller
from app.security.jwks import JwksFetcher
from app.security.token import GatewayTokenVerifier
from app.settings import Settings, load_settings
from app.testing.gateway import GatewayKit, transport_for

GATEWAY = "https://gateway.test"
ENDPOINT = "http://localhost/a2a"
JWKS_URL = "https://gateway.test/.well-known/jwks.json"


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"gateway_origins": [GATEWAY], "public_url": "http://localhost"}
    values.update(overrides)
    return load_settings(**values)


@dataclass
class Env:
    kit: GatewayKit
    settings: Settings
    clock: FakeClock
    fetcher: JwksFetcher
    verifier: GatewayTokenVerifier
    labels: list[str]

    async def verify(self, token: str) -> VerifiedCaller:
        return await self.verifier.verify(f"Bearer {token}")

    def mint(self, **kwargs: Any) -> str:
        kwargs.setdefault("audience", ENDPOINT)
        return self.kit.mint(**kwargs)


@pytest.fixture
def kit() -> GatewayKit:
    return GatewayKit()


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    """Override in a test module (or with ``pytest.mark.parametrize``) to change settings."""
    return {}


@pytest.fixture
async def env(kit: GatewayKit, settings_overrides: dict[str, Any]) -> AsyncIterator[Env]:
    settings = make_settings(**settings_overrides)
    clock = FakeClock()
    labels: list[str] = []
    others = [GatewayKit(origin=o) for o in settings.gateway_origins if o != kit.origin]
    async with httpx.AsyncClient(transport=transport_for(kit, *others)) as client:
        fetcher = JwksFetcher(settings, client, clock=clock, on_fetch=labels.append)
        verifier = GatewayTokenVerifier(settings, fetcher, clock=time.time)
        yield Env(kit, settings, clock, fetcher, verifier, labels)
