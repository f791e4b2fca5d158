"""What a method handler receives, and the handler role."""

from __future__ import annotations

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

    ``aclose`` ends it and runs ``on_close`` (giving back what the stream holds) exactly once,
    whether or not it was ever iterated: whoever receives a ``StreamResult`` must close it.
    """

    def __init__(self, results: AsyncGenerator[Any, None], on_close: Callable[[], None]) -> None:
        self._results = results
        self._on_close: Callable[[], None] | None = on_close

    async def next(self) -> Any:
        """The next result; ``StopAsyncIteration`` at the end."""
        return await anext(self._results)

    async def aclose(self) -> None:
        try:
            await self._results.aclose()
        finally:
            on_close, self._on_close = self._on_close, None
            if on_close is not None:
                on_close()
