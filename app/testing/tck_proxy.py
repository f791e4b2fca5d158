"""An authenticating proxy that lets the A2A TCK, which sends no tokens, talk to the edge.

The TCK (a2aproject/a2a-tck) reads ``/.well-known/agent-card.json`` and dials every interface
the card lists. This proxy stands where the Looping gateway stands (``scripts/tck``,
docs/conformance.md):

- it serves the card of the edge with each interface's ``url`` pointing at the proxy (the
  card is rewritten, so its ``signatures`` are dropped: they sign the edge's own URLs);
- it is a gateway: it publishes a JWKS at its own origin (which the edge lists in
  ``GATEWAY_ORIGINS``) and signs, per call, a caller token as the gateway does
  (``app.testing.gateway.GatewayKit``: EdDSA, ``jku`` on its origin, ``iss``, ``aud`` = the
  url of the edge interface being called, the tenant and identity claims);
- it adds the tenant: JSON-RPC ``params.tenant`` (CONTRACT §3 step 10), HTTP+JSON the
  ``/{tenant}`` path prefix (A2A §11), gRPC the request's ``tenant`` field
  (``app.testing.tck_grpc_proxy``).

Everything else passes through unchanged, malformed bodies and odd headers included, so the
TCK's negative tests reach the edge as written. Run it with ``python -m app.testing.tck_proxy``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.testing.gateway import JWKS_PATH, GatewayKit

CARD_PATH = "/.well-known/agent-card.json"
JSONRPC_PREFIX = "/jsonrpc"
REST_PREFIX = "/rest"
JSONRPC, HTTP_JSON, GRPC = "JSONRPC", "HTTP+JSON", "GRPC"

# Hop-by-hop and framing headers are the proxy's own on each leg (RFC 9110 §7.6.1).
_NOT_FORWARDED = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "authorization",
        "accept-encoding",
        "content-encoding",
        "upgrade",
        "te",
        "trailer",
        "proxy-authorization",
    }
)


def tck_identity() -> dict[str, Any]:
    """The one caller the TCK speaks as."""
    return {"key": "tck", "name": "A2A TCK", "kind": "agent"}


@dataclass
class ProxyConfig:
    edge_url: str  # the edge's PUBLIC_URL, where its card is read
    tenant: str
    public_origin: str  # this proxy's own origin, e.g. http://127.0.0.1:9999
    grpc_address: str | None = None  # host:port of the gRPC proxy, when one runs
    identity: dict[str, Any] = field(default_factory=tck_identity)


@dataclass
class EdgeInterfaces:
    """The edge's interface urls by binding, as its card lists them (the tokens' audiences)."""

    urls: dict[str, str]

    def url(self, binding: str) -> str | None:
        return self.urls.get(binding)


def edge_interfaces(card: Mapping[str, Any]) -> EdgeInterfaces:
    """The first url per binding in ``supportedInterfaces`` (A2A §5: preference order)."""
    urls: dict[str, str] = {}
    for entry in card.get("supportedInterfaces") or []:
        if isinstance(entry, dict):
            binding, url = entry.get("protocolBinding"), entry.get("url")
            if isinstance(binding, str) and isinstance(url, str):
                urls.setdefault(binding, url)
    return EdgeInterfaces(urls)


def rewrite_card(card: Mapping[str, Any], config: ProxyConfig) -> dict[str, Any]:
    """The edge's card with each interface it lists served by the proxy (unsigned)."""
    own = {
        JSONRPC: config.public_origin + JSONRPC_PREFIX,
        HTTP_JSON: config.public_origin + REST_PREFIX,
    }
    if config.grpc_address is not None:
        own[GRPC] = config.grpc_address
    interfaces = []
    for entry in card.get("supportedInterfaces") or []:
        if isinstance(entry, dict) and entry.get("protocolBinding") in own:
            interfaces.append({**entry, "url": own[entry["protocolBinding"]]})
    out = {k: v for k, v in card.items() if k != "signatures"}
    out["supportedInterfaces"] = interfaces
    return out


def add_jsonrpc_tenant(body: bytes, tenant: str) -> bytes:
    """The request with ``params.tenant`` set when it is a JSON-RPC request object whose
    params are an object (or absent); anything else is forwarded byte for byte."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body
    if not isinstance(request, dict):
        return body
    params = request.get("params", {})
    if not isinstance(params, dict):
        return body
    if "tenant" in params:
        return body
    request["params"] = {**params, "tenant": tenant}
    return json.dumps(request, separators=(",", ":")).encode("utf-8")


def forwarded_headers(headers: Mapping[str, str], bearer: str) -> dict[str, str]:
    out = {k: v for k, v in headers.items() if k.lower() not in _NOT_FORWARDED}
    out["Authorization"] = f"Bearer {bearer}"
    return out


class TckProxy:
    """The proxy's HTTP side: card, JWKS, JSON-RPC and HTTP+JSON forwarding."""

    def __init__(self, config: ProxyConfig, kit: GatewayKit, client: httpx.AsyncClient) -> None:
        self.config = config
        self.kit = kit
        self._client = client
        self._interfaces: EdgeInterfaces | None = None

    def mint(self, audience: str) -> str:
        return self.kit.mint(
            audience=audience, tenant=self.config.tenant, identity=self.config.identity
        )

    async def interfaces(self) -> EdgeInterfaces:
        if self._interfaces is None:
            self._interfaces = edge_interfaces(await self.edge_card())
        return self._interfaces

    async def edge_card(self) -> dict[str, Any]:
        return (await self._read_edge_card())[0]

    async def _read_edge_card(self) -> tuple[dict[str, Any], httpx.Headers]:
        response = await self._client.get(self.config.edge_url.rstrip("/") + CARD_PATH)
        response.raise_for_status()
        card = response.json()
        if not isinstance(card, dict):
            raise ValueError("the edge's card is not a JSON object")
        return card, response.headers

    async def card(self, _request: Request) -> Response:
        """The rewritten card, cached as the edge's is (its ``Cache-Control``; an ``ETag`` of
        the document served, which is not the edge's)."""
        card, headers = await self._read_edge_card()
        self._interfaces = edge_interfaces(card)
        body = json.dumps(rewrite_card(card, self.config), separators=(",", ":")).encode()
        caching = {"ETag": f'"{hashlib.sha256(body).hexdigest()[:32]}"'}
        if "cache-control" in headers:
            caching["Cache-Control"] = headers["cache-control"]
        return Response(body, media_type="application/json", headers=caching)

    async def jwks(self, _request: Request) -> Response:
        return JSONResponse(self.kit.jwks(), headers={"Cache-Control": "max-age=300"})

    async def jsonrpc(self, request: Request) -> Response:
        target = (await self.interfaces()).url(JSONRPC)
        if target is None:
            return Response("the edge lists no JSON-RPC interface", status_code=502)
        body = add_jsonrpc_tenant(await request.body(), self.config.tenant)
        return await self._forward(request, target, target, body)

    async def rest(self, request: Request) -> Response:
        base = (await self.interfaces()).url(HTTP_JSON)
        if base is None:
            return Response("the edge lists no HTTP+JSON interface", status_code=404)
        suffix = request.url.path[len(REST_PREFIX) :]
        target = f"{base.rstrip('/')}/{self.config.tenant}{suffix}"
        if request.url.query:
            target += "?" + request.url.query
        return await self._forward(request, target, base, await request.body())

    async def _forward(self, request: Request, target: str, audience: str, body: bytes) -> Response:
        upstream = self._client.build_request(
            request.method,
            target,
            content=body,
            headers=forwarded_headers(request.headers, self.mint(audience)),
        )
        response = await self._client.send(upstream, stream=True)
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _NOT_FORWARDED}
        return StreamingResponse(
            _relay(response),
            status_code=response.status_code,
            headers=headers,
            background=BackgroundTask(response.aclose),
        )

    def app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(
            routes=[
                Route(CARD_PATH, self.card, methods=["GET"]),
                Route(JWKS_PATH, self.jwks, methods=["GET"]),
                Route(JSONRPC_PREFIX, self.jsonrpc, methods=["POST"]),
                Route(JSONRPC_PREFIX + "/", self.jsonrpc, methods=["POST"]),
                Route(REST_PREFIX + "/{rest:path}", self.rest, methods=methods),
            ]
        )


async def _relay(response: httpx.Response) -> AsyncIterator[bytes]:
    async for chunk in response.aiter_raw():
        yield chunk


async def serve(config: ProxyConfig, host: str, port: int, grpc_port: int | None = None) -> None:
    kit = GatewayKit(origin=config.public_origin, kid="tck-proxy")
    timeout = httpx.Timeout(10.0, read=None)  # streams stay open as long as the TCK reads
    async with httpx.AsyncClient(timeout=timeout) as client:
        proxy = TckProxy(config, kit, client)
        server = uvicorn.Server(
            uvicorn.Config(proxy.app(), host=host, port=port, log_level="warning")
        )
        if grpc_port is None:
            await server.serve()
            return
        from app.testing.tck_grpc_proxy import serve_grpc  # grpcio: the gRPC side only

        await _edge_ready(proxy)
        await asyncio.gather(server.serve(), serve_grpc(proxy, host, grpc_port))


async def _edge_ready(proxy: TckProxy, attempts: int = 120) -> None:
    """Wait for the edge's card (the gRPC side dials the interface it lists)."""
    for _ in range(attempts):
        try:
            await proxy.interfaces()
            return
        except httpx.HTTPError:
            await asyncio.sleep(0.5)
    raise RuntimeError("the edge's card did not answer")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--edge", required=True, help="the edge's PUBLIC_URL")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, default=None, help="serve a gRPC proxy too")
    args = parser.parse_args(argv)
    grpc_address = None if args.grpc_port is None else f"{args.host}:{args.grpc_port}"
    config = ProxyConfig(args.edge, args.tenant, f"http://{args.host}:{args.port}", grpc_address)
    asyncio.run(serve(config, args.host, args.port, args.grpc_port))


if __name__ == "__main__":
    main()
