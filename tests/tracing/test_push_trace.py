"""A push joins the trace of the turn that queued it, not the task's latest turn's (issue 53):
the question of turn 1 (trace A) fails its first attempt; the answer starts turn 2 (trace B)
before the retry, and the retry's span is still in trace A. Both backends, in process."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit
from app.testing.push_faults import fail_first
from app.testing.push_receiver import CallbackExpectation, push_receiver
from tests.polling import poll_until

TRACE_A = "0af7651916cd43dd8448eb211c80319c"
TRACE_B = "4bf92f3577b34da6a3ce929d0e0e4736"


async def _send(edge: EdgeHarness, message: dict[str, Any], push: dict, trace: str) -> dict:
    response = await edge.rpc(
        "SendMessage",
        {"message": message, "configuration": {**push, "returnImmediately": True}},
        headers={"traceparent": f"00-{trace}-b7ad6b7169203331-01"},
    )
    doc = response.json()
    assert "result" in doc, doc
    return dict(doc["result"])


def _trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


async def test_a_retried_push_keeps_the_trace_of_its_own_turn(db_url: str) -> None:
    kit = GatewayKit()
    exporter = InMemorySpanExporter()
    async with push_receiver() as rx:
        rx.fault = fail_first(1)
        async with edge_harness(
            db_url,
            gateway=kit,
            background=True,
            gateway_origins=[kit.origin, rx.base_url],
            otel_endpoint="http://127.0.0.1:9",
            poll_seconds=0.05,
            push_retry_base_seconds=2.0,
        ) as edge:
            assert edge.services.tracing.provider is not None
            edge.services.tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="scripted")
            url, token = rx.endpoint("cfg")
            push = {"taskPushNotificationConfig": {"url": url, "token": token}}
            first = {
                "messageId": "m-1",
                "role": "ROLE_USER",
                "parts": [{"text": "ask colour?\nreply painted {answer}"}],
            }
            task_id = (await _send(edge, first, push, TRACE_A))["task"]["id"]
            failed = await rx.next_request(0, within=20)  # the question's first attempt: 503
            assert failed.state == "TASK_STATE_INPUT_REQUIRED"
            answer = {
                "messageId": "m-2",
                "role": "ROLE_USER",
                "taskId": task_id,
                "parts": [{"text": "green"}],
            }
            await _send(edge, answer, push, TRACE_B)
            await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)

            def attempts() -> list[ReadableSpan] | None:
                found = [s for s in exporter.get_finished_spans() if s.name == "push.attempt"]
                return found if len(found) >= 3 else None

            pushes = await poll_until(attempts, 10)
            runs = [s for s in exporter.get_finished_spans() if s.name == "turn.run"]
    assert sorted(_trace(s) for s in runs) == sorted([TRACE_A, TRACE_B])
    retried = [s for s in pushes if s.attributes and s.attributes["looping_edge.push.attempt"] == 2]
    firsts = [s for s in pushes if s.attributes and s.attributes["looping_edge.push.attempt"] == 1]
    # The question's retry ran after turn 2 began, and still belongs to turn 1's trace.
    assert [_trace(s) for s in retried] == [TRACE_A]
    assert sorted(_trace(s) for s in firsts) == sorted([TRACE_A, TRACE_B])
