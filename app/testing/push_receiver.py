"""A gateway's push receiver on a real loopback port, with fault injection.

::

    async with push_receiver(expect=CallbackExpectation.for_key(edge_key, jku)) as rx:
        url, token = rx.endpoint("task-cfg")           # http://127.0.0.1:<port>/push/task-cfg
        rx.fault = fail_first(2)                       # 503, 503, then 200
        ...
        push = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final")

Every request is recorded (``rx.requests``); ``rx.deliveries`` are those answered 2xx.
Each callback is verified like the Looping gateway does (``app.testing.verify``): the
JWT's ``kid``/``jku`` against the expectation, ``aud`` = the full URL the request reached,
and ``X-A2A-Notification-Token`` against the token registered for the path. A failed check
is answered ``401`` and recorded with its reason.

Faults (``app.testing.push_faults``): ``fail_first(n, status=503, retry_after=None)``,
``always(status)``, ``hang(seconds)`` (answer only after sleeping, i.e. past the sender's
timeout), ``unauthorized(n)`` (401 for the first n attempts), ``redirect(location)`` (307),
``broken_body(kind)``.
``await rx.go_down()`` closes the listening socket (connection refused) and
``await rx.come_back()`` listens again on the same port.

With ``kit=GatewayKit(...)`` the receiver also serves that kit's JWKS at
``/.well-known/jwks.json`` and points ``kit.origin`` at itself: one port is a whole local
gateway (what ``looping-edge gateway-dev`` runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from app.security.keys import SigningKey
from app.testing.gateway import JWKS_PATH, GatewayKit
from app.testing.push_faults import Fault
from app.testing.verify import Pin, VerificationError, verify_callback

MAX_BODY_BYTES = 1024 * 1024
TOKEN_HEADER = "x-a2a-notification-token"  # noqa: S105 - a header name


@dataclass(frozen=True)
class CallbackExpectation:
    """How to verify callbacks: the edge's public key and the pinned ``jku``/``kid``."""

    key: Ed25519PublicKey
    pin: Pin

    @classmethod
    def for_key(cls, signing_key: SigningKey, jku: str) -> CallbackExpectation:
        return cls(key=signing_key.private_key.public_key(), pin=Pin(jku=jku, kid=signing_key.kid))


@dataclass(frozen=True)
class ReceivedPush:
    """One request as the receiver saw it."""

    method: str
    path: str
    url: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    answered: int
    error: str | None  # why a check failed (answered 401), else None
    jwt_header: dict[str, Any] | None
    claims: dict[str, Any] | None
    received_at: float

    @property
    def json(self) -> dict[str, Any]:
        doc = json.loads(self.body)
        assert isinstance(doc, dict)
        return doc

    @property
    def task(self) -> dict[str, Any]:
        task = self.json.get("task")
        return task if isinstance(task, dict) else {}

    @property
    def task_id(self) -> str | None:
        value = self.task.get("id")
        return value if isinstance(value, str) else None

    @property
    def state(self) -> str | None:
        value = self.task.get("status", {}).get("state")
        return value if isinstance(value, str) else None

    @property
    def message_id(self) -> str | None:
        value = self.task.get("status", {}).get("message", {}).get("messageId")
        return value if isinstance(value, str) else None

    @property
    def text(self) -> str:
        parts = self.task.get("status", {}).get("message", {}).get("parts", [])
        return "".join(p.get("text", "") for p in parts if isinstance(p, dict))

    @property
    def delivered(self) -> bool:
        return 200 <= self.answered <= 299


@dataclass
class PushReceiver:
    host: str
    port: int
    expect: CallbackExpectation | None
    kit: GatewayKit | None = None
    fault: Fault | None = None
    requests: list[ReceivedPush] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)
    # Refuse (401) pushes to paths without a registered token (a real gateway knows its urls).
    strict_paths: bool = False
    # Paths currently inside a request (the ordering tests check there is never two at once).
    active: dict[str, int] = field(default_factory=dict)
    max_concurrent_per_path: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def deliveries(self) -> list[ReceivedPush]:
        return [r for r in self.requests if r.delivered]

    def endpoint(self, name: str | None = None, *, token: str | None = None) -> tuple[str, str]:
        """A push URL on this receiver and the notification token it expects there."""
        path = f"/push/{name or secrets.token_hex(8)}"
        value = token if token is not None else secrets.token_urlsafe(24)
        self.tokens[path] = value
        return self.base_url + path, value

    async def wait_for(
        self, predicate: Callable[[ReceivedPush], bool], *, within: float = 10.0
    ) -> ReceivedPush:
        """The first delivered push matching ``predicate`` (waits for it)."""
        async with asyncio.timeout(within), self._changed:
            while True:
                for push in self.deliveries:
                    if predicate(push):
                        return push
                await self._changed.wait()

    async def next_request(self, index: int, *, within: float = 10.0) -> ReceivedPush:
        """``requests[index]``, waiting for it to arrive (``TimeoutError`` after ``within``)."""
        async with asyncio.timeout(within), self._changed:
            while len(self.requests) <= index:
                await self._changed.wait()
            return self.requests[index]

    async def wait_count(self, n: int, *, within: float = 10.0, delivered: bool = True) -> None:
        async with asyncio.timeout(within), self._changed:
            while len(self.deliveries if delivered else self.requests) < n:
                await self._changed.wait()

    # --- serving -------------------------------------------------------------------------------

    async def listen(self) -> None:
        self._server = await asyncio.start_server(self._on_connect, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.kit is not None:
            self.kit.origin = self.base_url

    async def go_down(self) -> None:
        """Stop listening: new connections are refused until ``come_back``."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def come_back(self) -> None:
        if self._server is None:
            await self.listen()

    async def close(self) -> None:
        await self.go_down()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except ValueError:
            with contextlib.suppress(ConnectionError):
                await _respond(writer, 400, b"bad request")
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if length > MAX_BODY_BYTES:
            raise ValueError("body too large")
        body = await reader.readexactly(length) if length else b""
        path = urlsplit(target).path
        if method == "GET" and path == JWKS_PATH and self.kit is not None:
            await _respond(writer, 200, json.dumps(self.kit.jwks()).encode(), "application/json")
            return
        if method != "POST" or not path.startswith("/push/"):
            await _respond(writer, 404, b"not found")
            return
        self.active[path] = self.active.get(path, 0) + 1
        self.max_concurrent_per_path = max(self.max_concurrent_per_path, self.active[path])
        try:
            await self._push(writer, method, target, path, headers, body)
        finally:
            self.active[path] -= 1

    async def _push(
        self,
        writer: asyncio.StreamWriter,
        method: str,
        target: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
    ) -> None:
        fault = self.fault
        if fault is not None and fault.applies():
            if fault.broken_body is not None:
                await self._record(method, target, path, headers, body, fault.status, None)
                await _respond_broken(writer, fault.status, fault.broken_body)
                return
            if fault.hang_seconds:
                await asyncio.sleep(fault.hang_seconds)
            if fault.status != 200 or fault.hang_seconds == 0:
                extra: dict[str, str] = {}
                if fault.retry_after is not None:
                    extra["Retry-After"] = fault.retry_after
                if fault.location is not None:
                    extra["Location"] = fault.location
                await self._record(method, target, path, headers, body, fault.status, None)
                await _respond(writer, fault.status, b"fault", extra=extra)
                return
        error, jwt_header, claims = self._check(target, headers)
        status = 401 if error else 200
        await self._record(method, target, path, headers, body, status, error, jwt_header, claims)
        await _respond(writer, status, b"ok" if status == 200 else b"unauthorized")

    def _check(
        self, target: str, headers: Mapping[str, str]
    ) -> tuple[str | None, dict[str, Any] | None, dict[str, Any] | None]:
        expected_token = self.tokens.get(urlsplit(target).path)
        if expected_token is None and self.strict_paths:
            return "unknown push endpoint", None, None
        if expected_token is not None and headers.get(TOKEN_HEADER) != expected_token:
            return "notification token mismatch", None, None
        if headers.get("content-type") != "application/a2a+json":
            return "content-type is not application/a2a+json", None, None
        if self.expect is None:
            return None, None, None
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return "no bearer token", None, None
        try:
            verified = verify_callback(
                token, key=self.expect.key, pin=self.expect.pin, audience=self.base_url + target
            )
        except VerificationError as exc:
            return str(exc), None, None
        return None, verified.header, verified.claims

    async def _record(
        self,
        method: str,
        target: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        status: int,
        error: str | None,
        jwt_header: dict[str, Any] | None = None,
        claims: dict[str, Any] | None = None,
    ) -> None:
        push = ReceivedPush(
            method=method,
            path=path,
            url=self.base_url + target,
            headers=headers,
            body=body,
            answered=status,
            error=error,
            jwt_header=jwt_header,
            claims=claims,
            received_at=time.time(),
        )
        async with self._changed:
            self.requests.append(push)
            self._changed.notify_all()


async def _respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    content_type: str = "text/plain",
    *,
    extra: Mapping[str, str] | None = None,
) -> None:
    head = f"HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\n"
    for name, value in (extra or {}).items():
        head += f"{name}: {value}\r\n"
    writer.write(head.encode("latin-1") + b"\r\n" + body)
    await writer.drain()


async def _respond_broken(writer: asyncio.StreamWriter, status: int, kind: str) -> None:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n"
    writer.write(head.encode("latin-1") + b"abc")
    await writer.drain()
    if kind == "drip":
        for _ in range(97):
            await asyncio.sleep(1.0)
            writer.write(b"x")
            await writer.drain()
    # "cut": return now; the caller closes the socket with 97 bytes still owed.


@contextlib.asynccontextmanager
async def push_receiver(
    *,
    expect: CallbackExpectation | None = None,
    kit: GatewayKit | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> AsyncIterator[PushReceiver]:
    """Run a receiver on ``host``:``port`` (0 = a free port) for the block's duration."""
    receiver = PushReceiver(host=host, port=port, expect=expect, kit=kit)
    await receiver.listen()
    try:
        yield receiver
    finally:
        await receiver.close()
