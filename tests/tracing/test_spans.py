"""Tracing off costs no span object; on, the server span continues the gateway's context and
the turn keeps it; log lines inside a span carry its ids (issue 53)."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN

from app.ops.logging import JsonFormatter, PlainFormatter, TraceIds
from app.settings import load_settings
from app.testing.edge import EdgeHarness, edge_harness
from app.tracing import provider, spans
from app.tracing.asgi import TracedEndpoint
from tests.worker.helpers import turns

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def test_off_without_an_endpoint_no_tracer_and_one_shared_no_op() -> None:
    tracing = provider.install(load_settings())
    assert tracing is provider.OFF and not tracing.enabled
    assert not spans.enabled()
    first, second = spans.span("a"), spans.span("b", parent={"traceparent": "x"})
    assert first is second  # one shared context: nothing is made per call
    with first as current:
        assert current is INVALID_SPAN
    assert spans.carrier() is None


def test_sdk_disabled_wins_over_an_endpoint() -> None:
    settings = load_settings(otel_endpoint="http://collector:4318", otel_sdk_disabled=True)
    assert settings.traces_endpoint is None
    assert (
        load_settings(otel_endpoint="http://c:4318/").traces_endpoint == "http://c:4318/v1/traces"
    )
    assert (
        load_settings(otel_endpoint="http://c:4318", otel_traces_endpoint="http://t/x")
    ).traces_endpoint == "http://t/x"


async def _send_traced(edge: EdgeHarness) -> httpx.Response:
    """A SendMessage to a new echo tenant ``demo`` with the gateway's trace context."""
    await edge.add_tenant("demo", agent="echo", require_push_config=False)
    return await edge.rpc(
        "SendMessage",
        {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": True},
        },
        headers={"traceparent": f"00-{TRACE_ID}-{PARENT}-01"},
    )


async def test_off_the_endpoints_are_served_unwrapped_and_no_span_is_exported(
    db_url: str,
) -> None:
    async with edge_harness(db_url) as edge:
        assert not edge.services.tracing.enabled
        assert not isinstance(edge.app._rpc, TracedEndpoint)
        response = await _send_traced(edge)
        assert "result" in response.json()
        task_id = response.json()["result"]["task"]["id"]
        (turn,) = await turns(edge.services.db, task_id)
        assert "traceContext" not in turn.payload


async def test_on_the_turn_keeps_the_accept_span_context(db_url: str) -> None:
    exporter = InMemorySpanExporter()
    async with edge_harness(db_url, otel_endpoint="http://127.0.0.1:9") as edge:
        assert edge.services.tracing.provider is not None
        edge.services.tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
        response = await _send_traced(edge)
        task_id = response.json()["result"]["task"]["id"]
        (turn,) = await turns(edge.services.db, task_id)
        found = {s.name: s for s in exporter.get_finished_spans()}
        accept = found["accept"]
        assert format(accept.context.trace_id, "032x") == TRACE_ID
        stored = turn.payload["traceContext"]["traceparent"]
        assert stored == f"00-{TRACE_ID}-{format(accept.context.span_id, '016x')}-01"
        server = found["POST /a2a"]
        assert format(server.parent.span_id, "016x") == PARENT
        assert server.attributes["rpc.method"] == "SendMessage"
    assert not spans.enabled()  # shut down with the services


def test_a_gateway_without_traceparent_starts_a_new_trace() -> None:
    exporter = InMemorySpanExporter()
    tracing = provider.install(load_settings(), SimpleSpanProcessor(exporter))
    try:
        with spans.span("x", parent={}):
            pass
        with spans.span("y", parent={"traceparent": "garbage"}):
            pass
        x, y = exporter.get_finished_spans()
        assert x.parent is None and y.parent is None
        assert x.context.trace_id != y.context.trace_id
    finally:
        tracing.shutdown()


def _record(message: str) -> logging.LogRecord:
    record = logging.LogRecord("t", logging.INFO, __file__, 1, message, None, None)
    TraceIds().filter(record)
    return record


def test_log_lines_inside_a_span_carry_its_ids_in_both_formats() -> None:
    tracing = provider.install(load_settings(), SimpleSpanProcessor(InMemorySpanExporter()))
    try:
        outside = _record("before")
        with spans.span("turn", parent={"traceparent": f"00-{TRACE_ID}-{PARENT}-01"}) as span:
            inside = _record("inside")
            span_id = format(span.get_span_context().span_id, "016x")
    finally:
        tracing.shutdown()
    doc = json.loads(JsonFormatter().format(inside))
    assert (doc["trace_id"], doc["span_id"]) == (TRACE_ID, span_id)
    plain = PlainFormatter().format(inside)
    assert f"trace_id={TRACE_ID}" in plain and f"span_id={span_id}" in plain
    assert "trace_id" not in json.loads(JsonFormatter().format(outside))
    assert "trace_id" not in PlainFormatter().format(outside)


async def test_a_grpc_call_gets_a_server_span_continuing_the_callers_trace(
    db_url: str,
) -> None:
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    from app.interfaces import GRPC, interface_url
    from tests.grpc.conftest import USER, free_port, grpc_server

    exporter = InMemorySpanExporter()
    async with edge_harness(
        db_url, background=True, otel_endpoint="http://127.0.0.1:9", grpc_port=free_port()
    ) as edge:
        assert edge.services.tracing.provider is not None
        edge.services.tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
        await edge.add_tenant("open", agent="echo", require_push_config=False, profile="open")
        target = f"127.0.0.1:{grpc_server(edge).port}"
        token = edge.gateway.mint(
            tenant="open", identity=USER, audience=interface_url(edge.settings, GRPC)
        )
        async with grpc.aio.insecure_channel(target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.GetTask(
                    a2a_pb2.GetTaskRequest(tenant="open", id="missing"),
                    metadata=(
                        ("authorization", f"Bearer {token}"),
                        ("a2a-version", "1.0"),
                        ("traceparent", f"00-{TRACE_ID}-{PARENT}-01"),
                    ),
                )
        (server,) = [s for s in exporter.get_finished_spans() if s.name.endswith("/GetTask")]
        assert format(server.context.trace_id, "032x") == TRACE_ID
        assert format(server.parent.span_id, "016x") == PARENT
        assert server.attributes["rpc.system"] == "grpc"
        assert server.attributes["error.type"] == "TaskNotFound"
