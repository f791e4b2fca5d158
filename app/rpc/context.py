"""What a method handler receives, and the handler role."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
