"""A fake OpenAI-compatible chat-completions server on a real loopback port, scripted step by
step by a test (the agent author's test kit).

::

    with FakeModelServer() as fake:
        fake.script(
            tool_call("lookup", {"q": "x"}),
            error(429, retry_after=0),
            text("the answer"),
        )
        config = {"model": {"base_url": fake.base_url, "name": "fake"}, ...}
        ...
        assert len(fake.requests) == 3

Each ``POST /v1/chat/completions`` takes the next scripted step (or ``fake.default`` once the
script is spent; without one the server answers 500 and records the request as unscripted).
Every request is recorded with its JSON body and headers (``fake.requests``). Steps: ``text``,
``tool_call``/``tool_calls`` (one response asking for several calls), ``error`` (a status, an
optional ``Retry-After``), ``malformed`` (200 with a body that is not a completion),
``empty_choices``, and any step's ``delay`` (seconds before answering: a slow or hanging model).

The server runs in a thread of its own, so a test's event loop never blocks on it and the
client speaks real HTTP to it (keep-alive, timeouts, closed connections).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Step:
    """One scripted answer. ``kind``: text | tools | error | malformed | empty."""

    kind: str
    content: str | None = None
    calls: tuple[tuple[str, str, str], ...] = ()  # (call id, tool name, arguments text)
    status: int = 200
    retry_after: str | None = None
    delay: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 5
    # ``dynamic``: the answer is computed from the request body (a negotiator that must copy
    # an offer id the edge minted, say).
    compute: Any = None


def text(content: str, *, delay: float = 0.0, prompt_tokens: int = 10) -> Step:
    return Step("text", content=content, delay=delay, prompt_tokens=prompt_tokens)


def dynamic(compute: Any) -> Step:
    """A step whose answer ``compute(body) -> Step`` builds from the recorded request body."""
    return Step("dynamic", compute=compute)


def tool_call(
    name: str, arguments: Any = None, *, call_id: str | None = None, delay: float = 0.0
) -> Step:
    """One call; ``arguments`` is JSON-encoded unless it is already a string (so a test can
    send arguments that are not JSON)."""
    return tool_calls((name, arguments, call_id), delay=delay)


def tool_calls(*calls: tuple[str, Any, str | None], delay: float = 0.0) -> Step:
    out = []
    for index, (name, arguments, call_id) in enumerate(calls):
        args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        out.append((call_id or f"call_{index}_{name}", name, args))
    return Step("tools", calls=tuple(out), delay=delay)


def error(status: int, *, retry_after: float | str | None = None, delay: float = 0.0) -> Step:
    after = None if retry_after is None else str(retry_after)
    return Step("error", status=status, retry_after=after, delay=delay)


def malformed(*, delay: float = 0.0) -> Step:
    return Step("malformed", delay=delay)


def empty_choices() -> Step:
    return Step("empty")


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools") or []]


@dataclass
class FakeModelServer:
    """Use as a context manager (``with``) or ``start()``/``stop()``."""

    model_name: str = "fake-model"
    default: Step | None = None
    requests: list[Recorded] = field(default_factory=list)
    unscripted: int = 0
    _steps: deque[Step] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _url: str | None = None

    def script(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._steps)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (kept after ``stop``: a server that is down)."""
        assert self._url is not None, "start the server first"
        return self._url

    def start(self) -> FakeModelServer:
        server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server = server
        host, port = server.server_address[:2]
        self._url = f"http://{host!s}:{port}/v1"
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _next(self, recorded: Recorded) -> Step | None:
        with self._lock:
            self.requests.append(recorded)
            if self._steps:
                return self._steps.popleft()
            if self.default is None:
                self.unscripted += 1
            return self.default


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the stdlib's 5 refuses connections when callers come at once


def completion(model: str, step: Step, serial: int) -> dict[str, Any]:
    """The chat-completions body for a ``text`` or ``tools`` step."""
    message: dict[str, Any] = {"role": "assistant", "content": step.content}
    finish = "stop"
    if step.kind == "tools":
        finish = "tool_calls"
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in step.calls
        ]
    return {
        "id": f"chatcmpl-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": step.prompt_tokens,
            "completion_tokens": step.completion_tokens,
            "total_tokens": step.prompt_tokens + step.completion_tokens,
        },
    }


class _FakeModelHandler(BaseHTTPRequestHandler):
    """Answers each request with the next scripted step of ``fake`` (set per server)."""

    protocol_version = "HTTP/1.1"
    fake: ClassVar[FakeModelServer]

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes: without this, the client's delayed ACK
        # holds the second for tens of milliseconds on every answer.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *_args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = Recorded(self.path, headers, body, time.time())
        step = self.fake._next(recorded)
        if self.path != COMPLETIONS_PATH or step is None:
            self._send(404 if self.path != COMPLETIONS_PATH else 500, {"error": "unscripted"})
            return
        if step.kind == "dynamic":
            step = step.compute(body)
        if step.delay:
            time.sleep(step.delay)
        if step.kind == "error":
            extra = {} if step.retry_after is None else {"Retry-After": step.retry_after}
            self._send(step.status, {"error": {"message": "scripted error"}}, extra)
        elif step.kind == "malformed":
            self._send_raw(200, b'{"id": "x", "choices": [{"message": ', "application/json")
        elif step.kind == "empty":
            doc = completion(self.fake.model_name, text(""), len(self.fake.requests))
            doc["choices"] = []
            self._send(200, doc)
        else:
            self._send(200, completion(self.fake.model_name, step, len(self.fake.requests)))

    def _send(self, status: int, doc: Any, extra: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(doc).encode(), "application/json", extra)

    def _send_raw(
        self, status: int, data: bytes, ctype: str, extra: dict[str, str] | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (timeout or cancellation)


def _handler_for(fake: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_FakeModelHandler):
        pass

    Handler.fake = fake
    return Handler
