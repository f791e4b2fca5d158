"""What a method handler receives, and the handler role."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.rpc.envelope import RequestId
from app.security.caller import CallerScope, VerifiedCaller
from app.tenants.registry import TenantRecord


@dataclass(frozen=True)
class RpcCall:
    """One verified, tenant-checked JSON-RPC call.

    ``scope`` is the only key by which a handler may reach tenant data (ARCHITECTURE: every
    tenant-data query takes the caller scope).
    """

    caller: VerifiedCaller
    scope: CallerScope
    tenant: TenantRecord
    method: str
    params: dict[str, Any]
    request_id: RequestId


Handler = Callable[[RpcCall], Awaitable[Any]]
MethodTable = dict[str, Handler]


class StreamResult:
    """A handler's answer that is a stream of results (A2A 1.0 §9.4.2: SSE on JSON-RPC), each
    sent as one JSON-RPC response carrying the call's id.

    ``results`` yields the results in batches (non-empty lists): the results that were ready
    together, which a transport may send in one write (``next_batch``) or one at a time
    (``next``). ``aclose`` ends it and runs ``on_close`` (giving back what the stream holds)
    exactly once, whether or not it was ever iterated: whoever receives a ``StreamResult``
    must close it.
    """

    def __init__(
        self, results: AsyncGenerator[list[Any], None], on_close: Callable[[], None]
    ) -> None:
        self._results = results
        self._on_close: Callable[[], None] | None = on_close
        self._held: deque[Any] = deque()

    async def next(self) -> Any:
        """The next result; ``StopAsyncIteration`` at the end."""
        if not self._held:
            self._held.extend(await anext(self._results))
        return self._held.popleft()

    async def next_batch(self) -> list[Any]:
        """The next results that were ready together (at least one); ``StopAsyncIteration``
        at the end."""
        if self._held:
            held = list(self._held)
            self._held.clear()
            return held
        return await anext(self._results)

    async def aclose(self) -> None:
        self._held.clear()
        try:
            await self._results.aclose()
        finally:
            on_close, self._on_close = self._on_close, None
            if on_close is not None:
                on_close()
