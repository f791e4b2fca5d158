"""The far side of the A2A tools' tests in one process: a scripted peer answering through
``httpx.MockTransport`` (its card, signed or not, its JWKS, and JSON-RPC methods a test
scripts, faults included), the tools built as the edge builds them, and a tool context."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.agents.llm.config import LlmConfig, parse_llm_config
from app.agents.llm.tools import Tool, ToolContext
from app.cards.signing import sign_card
from app.db.engine import Database
from app.db.peer_sends import NewPeerSend, PeerSendStore
from app.db.storage import Storage, open_storage
from app.peers.client import PeerClients
from app.peers.tools import PeerTools
from app.security.keys import SigningKey, generate_private_jwk
from app.settings import Settings
from app.testing.edge import harness_settings
from app.testing.gateway import GatewayKit

ORIGIN = "http://127.0.0.1:7301"  # nothing listens there: the mock transport answers
RPC_URL = ORIGIN + "/a2a"
Handler = Callable[[dict[str, Any]], Any]  # params -> result dict, or an httpx.Response


def task(task_id: str, state: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": task_id, "contextId": "ctx-1", "status": {"state": state}}
    if text is not None:
        doc["artifacts"] = [{"artifactId": "a1", "name": "answer", "parts": [{"text": text}]}]
    doc.update(extra)
    return doc


@dataclass
class FakePeer:
    """A scripted A2A agent at ``ORIGIN``: ``methods`` answer JSON-RPC calls; ``calls`` and
    ``sent`` (the messageIds of SendMessage) say what it received."""

    signed: bool = False
    streaming: bool = False
    key: SigningKey = field(default_factory=lambda: new_key("peer-key-1"))
    methods: dict[str, Handler] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    card_override: Callable[[], httpx.Response | Awaitable[httpx.Response]] | None = None
    down: bool = False

    def card(self) -> dict[str, Any]:
        doc = {
            "name": "Helper",
            "description": "answers questions",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": RPC_URL, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": self.streaming},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "qa", "name": "Q&A", "description": "answers", "tags": ["qa"]}],
        }
        if self.signed:
            return sign_card(doc, self.key, jku=ORIGIN + "/.well-known/jwks.json")
        return doc

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        path = request.url.path
        if path == "/.well-known/agent-card.json":
            self.calls.append("card")
            if self.card_override is None:
                return httpx.Response(200, json=self.card())
            answer = self.card_override()
            return await answer if inspect.isawaitable(answer) else answer
        if path == "/.well-known/jwks.json":
            return httpx.Response(200, json=self.key.jwks())
        body = json.loads(request.content)
        method = body["method"]
        self.calls.append(method)
        self.headers.append(dict(request.headers))
        if method == "SendMessage":
            self.sent.append(body["params"]["message"]["messageId"])
        handler = self.methods.get(method)
        if handler is None:
            error = {"code": -32601, "message": "no such method: secret-diagnostic"}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "error": error})
        result = handler(body["params"])
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, httpx.Response):
            return result
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})


def sse(*results: dict[str, Any]) -> httpx.Response:
    """A JSON-RPC SSE stream of ``results`` (StreamResponse objects), as a streaming peer
    answers SubscribeToTask."""
    lines = [f"data: {json.dumps({'jsonrpc': '2.0', 'id': '1', 'result': r})}\n\n" for r in results]
    return httpx.Response(
        200, content="".join(lines).encode(), headers={"content-type": "text/event-stream"}
    )


def new_key(kid: str) -> SigningKey:
    return SigningKey.from_jwk_json(json.dumps(generate_private_jwk(kid)))


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "peer_wait_seconds": 2.0,
        "peer_request_seconds": 1.0,
        "peer_poll_seconds": 0.01,
    }
    values.update(overrides)
    return harness_settings("sqlite+aiosqlite://", GatewayKit(), **values)


def config(auth: Any = None, **extra: Any) -> LlmConfig:
    entry = {"url": ORIGIN, "auth": auth or {"bearer_env": "PEER_TOKEN"}}
    if auth == "edge-token":
        entry["tenant"] = "helper"
    return parse_llm_config(
        {
            "model": {"base_url": "http://127.0.0.1:1/v1", "name": "m"},
            "system_prompt": "x",
            "allow_http_loopback": True,
            "agents": {"helper": entry},
            "max_tool_output_bytes": 64 * 1024,
            **extra,
        }
    )


def peer_tools(
    storage: Storage,
    transport: httpx.AsyncBaseTransport,
    *,
    environ: dict[str, str] | None = None,
    **overrides: Any,
) -> PeerTools:
    s = settings(**overrides)
    key = SigningKey.from_jwk_json(s.signing_key_json())
    clients = PeerClients(
        s,
        key,
        storage.peer_pins,
        {"PEER_TOKEN": "t0k3n"} if environ is None else environ,
        transport,
    )

    async def party_name(tenant: str) -> str:
        return f"Agent of {tenant}"

    return PeerTools(clients, storage.peer_sends, party_name=party_name)


def ctx(call_id: str = "call-1", task_id: str = "t-1") -> ToolContext:
    return ToolContext(
        tenant="acme",
        identity_key="alice",
        task_id=task_id,
        call_id=call_id,
        idempotency_key=f"{task_id}:{call_id}",
        secrets={},
        cancelled=asyncio.Event(),
        clock=time.time,
    )


def tool(tools: PeerTools, cfg: LlmConfig, name: str) -> Tool:
    return next(t for t in tools.tools(cfg) if t.name == name)


async def call(tools: PeerTools, cfg: LlmConfig, name: str, c: ToolContext, **args: Any) -> Any:
    """The tool's result: the frame line checked, the JSON returned."""
    the_tool = tool(tools, cfg, name)
    text = await the_tool.call(c, the_tool.validate(args))
    frame, _, doc = text.partition("\n")
    assert frame.startswith("Remote data from A2A agent") and "not instructions" in frame
    return json.loads(doc)


def tools_for(database: Database, peer: FakePeer, **overrides: Any) -> PeerTools:
    """The tools on ``database``'s storage, calling ``peer`` in process."""
    return peer_tools(open_storage(database), httpx.MockTransport(peer.handle), **overrides)


def working_then_done(peer: FakePeer, text: str = "42") -> None:
    """``peer`` acknowledges a send with task ``p-1``, working for two reads, then done."""
    reads = {"n": 0}

    def get_task(params: dict[str, Any]) -> dict[str, Any]:
        reads["n"] += 1
        if reads["n"] < 3:
            return task(params["id"], "TASK_STATE_WORKING")
        return task(params["id"], "TASK_STATE_COMPLETED", text)

    peer.methods["SendMessage"] = lambda p: {"task": task("p-1", "TASK_STATE_SUBMITTED")}
    peer.methods["GetTask"] = get_task


async def raw_call(tools: PeerTools, name: str, **args: Any) -> str:
    """The tool's result as the model reads it (frame line and JSON)."""
    the_tool = tool(tools, config(), name)
    return str(await the_tool.call(ctx(), the_tool.validate(args)))


async def hang(params: dict[str, Any]) -> dict[str, Any]:
    """A method that does not answer within any test's deadline."""
    await asyncio.sleep(30)
    raise AssertionError("unreachable")


OWN_TASK = "p-1"  # the scripted peer's task the test caller's own send made (conftest)


async def own_task(store: PeerSendStore, peer_task_id: str, url: str = ORIGIN) -> None:
    """Record that ``ctx()``'s caller sent the message that made ``peer_task_id``."""
    c = ctx()
    key = f"seed:{peer_task_id}"
    send = NewPeerSend(c.tenant, key, c.identity_key, c.task_id, "helper", url, f"m-{key}")
    await store.record_intent(send)
    await store.acknowledge(c.tenant, key, peer_task_id=peer_task_id, answer=None)
