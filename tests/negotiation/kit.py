"""Two edges in one process for negotiation tests: each its own database, key and public
origin, each listing the other in ``PEER_ORIGINS``; their HTTP clients reach each other's app
in process (and the gateway kit's JWKS)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from app.main import create_app
from app.runtime import attach_background
from app.services import EdgeServices, build_services
from app.testing.edge import EdgeHarness, harness_settings
from app.testing.fake_model import Step, dynamic, text
from app.testing.gateway import GatewayKit

ORIGIN_A = "http://127.0.0.1:7101"
ORIGIN_B = "http://127.0.0.1:7102"
FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01, "push_retry_base_seconds": 0.01}
_OFFER = re.compile(r"\[offer ([0-9a-f-]{36}):")


class Router(httpx.AsyncBaseTransport):
    """By origin: an edge's app, else the gateway kit's JWKS."""

    def __init__(self, kit: GatewayKit) -> None:
        self.kit = httpx.MockTransport(kit.handle)
        self.apps: dict[str, httpx.ASGITransport] = {}
        self.tamper_cards = False  # change a served card after it was signed
        self.calls: list[str] = []  # "<origin> <method or path>" of every call between edges

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = f"{request.url.scheme}://{request.url.host}:{request.url.port}"
        app = self.apps.get(origin)
        if app is None:
            return await self.kit.handle_async_request(request)
        what = request.url.path
        if request.method == "POST":
            what = str(json.loads(request.content or b"{}").get("method"))
        self.calls.append(f"{origin} {what}")
        response = await app.handle_async_request(request)
        if self.tamper_cards and request.url.path == "/.well-known/agent-card.json":
            card = json.loads(await response.aread())
            card["description"] = str(card.get("description")) + " (changed in transit)"
            return httpx.Response(200, json=card)
        return response


def decision(
    action: str, message: str, terms: Mapping[str, Any] | None = None, **extra: Any
) -> Step:
    doc: dict[str, Any] = {"action": action, "message": message, **extra}
    if terms is not None:
        doc["terms"] = dict(terms)
    return text(json.dumps(doc))


def accepting(message: str, *, with_terms: bool = False) -> Step:
    """An accept naming the last offer the negotiator was shown (its id is the edge's)."""

    def compute(body: dict[str, Any]) -> Step:
        shown = "\n".join(str(m.get("content")) for m in body.get("messages") or [])
        ids = _OFFER.findall(shown)
        terms_line = re.findall(r"\[offer [0-9a-f-]{36}: (\{.*\})\]", shown)
        extra: dict[str, Any] = {"acceptsOfferId": ids[-1]} if ids else {}
        if with_terms and terms_line:
            extra["terms"] = json.loads(terms_line[-1])
        return text(json.dumps({"action": "accept", "message": message, **extra}))

    return dynamic(compute)


@dataclass
class Edges:
    a: EdgeHarness
    b: EdgeHarness
    router: Router


async def _edge(
    url: str, origin: str, peer: str, kit: GatewayKit, router: Router
) -> tuple[EdgeServices, EdgeHarness, Any]:
    settings = harness_settings(url, kit, public_url=origin, peer_origins=[peer], **FAST)
    services = build_services(settings, gateway_client=httpx.AsyncClient(transport=router))
    attach_background(services)
    app = create_app(services)
    router.apps[origin] = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=origin)
    harness = EdgeHarness(settings=settings, services=services, client=client, gateway=kit, app=app)
    return services, harness, client


@asynccontextmanager
async def two_edges(url_a: str, url_b: str) -> AsyncIterator[Edges]:
    kit = GatewayKit()
    router = Router(kit)
    sa, a, ca = await _edge(url_a, ORIGIN_A, ORIGIN_B, kit, router)
    sb, b, cb = await _edge(url_b, ORIGIN_B, ORIGIN_A, kit, router)
    for service in [*sa.background, *sb.background]:
        await service.start()
    try:
        yield Edges(a, b, router)
    finally:
        for service in [*reversed(sa.background), *reversed(sb.background)]:
            await service.stop()
        await ca.aclose()
        await cb.aclose()
        await sa.aclose()
        await sb.aclose()


def llm_config(base_url: str, **negotiation: Any) -> dict[str, Any]:
    block = {"enabled": True, "negotiator_prompt": "You negotiate carefully.", **negotiation}
    return {
        "model": {"base_url": base_url, "name": "fake"},
        "system_prompt": "You act for your party.",
        "negotiation": block,
    }
