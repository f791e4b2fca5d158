"""The transport-neutral ``CallDispatcher`` (``app.rpc.calls``): the tenant rules, the version,
the method lookup and the fault rule every binding shares, called directly as a binding does."""

from __future__ import annotations

from typing import Any

import pytest

from app.db.tenants import TenantRecord
from app.errors import (
    InternalError,
    InvalidParams,
    MethodNotFound,
    RpcError,
    TaskNotFound,
    Unauthorized,
    VersionNotSupported,
)
from app.rpc.calls import CallDispatcher
from app.rpc.context import MethodTable, RpcCall
from app.security.caller import VerifiedCaller


class _Tenants:
    def __init__(self, *records: TenantRecord) -> None:
        self._records = {r.id: r for r in records}

    async def get(self, tenant_id: str) -> TenantRecord | None:
        return self._records.get(tenant_id)


async def _echo(call: RpcCall) -> Any:
    return {"tenant": call.scope.tenant, "identity": call.scope.identity, "params": call.params}


async def _missing(call: RpcCall) -> Any:
    raise TaskNotFound("task not found")


async def _broken(call: RpcCall) -> Any:
    raise RuntimeError("secret detail")


def _dispatcher() -> CallDispatcher:
    methods: MethodTable = {"GetTask": _echo, "CancelTask": _missing, "ListTasks": _broken}
    tenants = _Tenants(
        TenantRecord(id="demo", manifest={}), TenantRecord(id="open", manifest={}, profile="open")
    )
    return CallDispatcher(tenants=tenants, methods=methods)


def _caller(tenant: str | None = "demo", *, peer: bool = False) -> VerifiedCaller:
    return VerifiedCaller(issuer="https://gw.test", identity_key="u1", tenant=tenant, peer=peer)


async def test_a_call_reaches_its_handler_scoped_to_tenant_and_identity() -> None:
    result = await _dispatcher().dispatch(_caller(), "demo", "GetTask", {"id": "t"}, version="1.0")
    assert result == {"tenant": "demo", "identity": "u1", "params": {"id": "t"}}


@pytest.mark.parametrize("tenant", [None, "", 7])
async def test_no_tenant_is_invalid_params(tenant: object) -> None:
    with pytest.raises(InvalidParams) as caught:
        await _dispatcher().dispatch(_caller(), tenant, "GetTask", {}, version="1.0")
    assert caught.value.reason == "tenant_required"


async def test_another_tenant_than_the_tokens_is_unauthorized() -> None:
    with pytest.raises(Unauthorized) as caught:
        await _dispatcher().dispatch(_caller("demo"), "open", "GetTask", {}, version="1.0")
    assert caught.value.reason == "tenant_mismatch"


async def test_a_token_without_tenant_claim_matches_nothing() -> None:
    with pytest.raises(Unauthorized):
        await _dispatcher().dispatch(_caller(None), "demo", "GetTask", {}, version="1.0")


async def test_an_unknown_tenant_is_invalid_params() -> None:
    with pytest.raises(InvalidParams) as caught:
        await _dispatcher().dispatch(_caller("ghost"), "ghost", "GetTask", {}, version="1.0")
    assert caught.value.reason == "unknown_tenant"


async def test_a_peer_on_a_gateway_tenant_is_unauthorized() -> None:
    with pytest.raises(Unauthorized):
        await _dispatcher().dispatch(_caller(peer=True), "demo", "GetTask", {}, version="1.0")


@pytest.mark.parametrize("version", [None, "", "0.3", "2.0"])
async def test_versions_other_than_1_0_are_refused(version: str | None) -> None:
    with pytest.raises(VersionNotSupported) as caught:
        await _dispatcher().dispatch(_caller(), "demo", "GetTask", {}, version=version)
    assert caught.value.metadata == {"supportedVersions": "1.0"}


async def test_an_unknown_method_is_method_not_found() -> None:
    calls = _dispatcher()
    assert not calls.knows("message/send")
    with pytest.raises(MethodNotFound):
        await calls.dispatch(_caller(), "demo", "message/send", {}, version="1.0")


async def test_a_peer_may_call_only_its_methods() -> None:
    with pytest.raises(MethodNotFound) as caught:
        await _dispatcher().dispatch(
            _caller("open", peer=True), "open", "ListTasks", {}, version="1.0"
        )
    assert caught.value.reason == "peer_method_not_allowed"


async def test_a_handlers_a2a_error_passes_through() -> None:
    with pytest.raises(TaskNotFound):
        await _dispatcher().dispatch(_caller(), "demo", "CancelTask", {"id": "x"}, version="1.0")


async def test_a_handlers_fault_is_an_internal_error_without_its_text() -> None:
    with pytest.raises(InternalError) as caught:
        await _dispatcher().dispatch(_caller(), "demo", "ListTasks", {}, version="1.0")
    assert "secret" not in caught.value.message


def test_every_a2a_error_maps_to_a_status_on_each_binding() -> None:
    """A2A §5.4: one error, three bindings (JSON-RPC code, HTTP status, gRPC status)."""

    def leaves(cls: type[RpcError]) -> list[type[RpcError]]:
        subclasses = cls.__subclasses__()
        return [cls] if not subclasses else [c for s in subclasses for c in leaves(s)]

    mapped = {c.a2a_reason: (c.code, c.http_status, c.grpc_status) for c in leaves(RpcError)}
    assert mapped["TASK_NOT_FOUND"] == (-32001, 404, "NOT_FOUND")
    assert mapped["TASK_NOT_CANCELABLE"] == (-32002, 400, "FAILED_PRECONDITION")
    assert mapped["VERSION_NOT_SUPPORTED"] == (-32009, 400, "UNIMPLEMENTED")
    assert mapped["INVALID_PARAMS"] == (-32602, 400, "INVALID_ARGUMENT")
    assert mapped["INTERNAL_ERROR"] == (-32603, 500, "INTERNAL")
    assert all(400 <= http < 600 for _, http, _ in mapped.values())
