"""One trace from the gateway's ``traceparent`` to the push attempt, across the process
boundary (the edge here, the worker a ``looping-edge worker`` child posting to an in-process
OTLP/HTTP receiver), and still one after the worker is killed mid-turn and another takes
over (issue 53). The worker's log lines of the turn carry its trace id."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from app.tasks import states
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit
from tests.polling import poll_until
from tests.tracing.receiver import Receiver, otlp_receiver
from tests.worker.helpers import identity, reached, status_text, task_row
from tests.worker.processes import LOOPBACK_PUSH_ORIGIN, WorkerProcess, worker_process

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
GATEWAY_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{GATEWAY_SPAN}-01"
PUSH_URL = LOOPBACK_PUSH_ORIGIN + "/push"  # nothing listens: the attempt fails, a retry


def _otel(endpoint: str) -> dict[str, str]:
    # The SDK's own variable, read once at the worker's start: export within a moment.
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}


async def _send(edge: EdgeHarness, text: str) -> str:
    params = {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {
            "returnImmediately": True,
            "taskPushNotificationConfig": {"url": PUSH_URL, "token": "push-token"},
        },
    }
    response = await edge.rpc(
        "SendMessage",
        params,
        identity=identity("user-1"),
        headers={"traceparent": TRACEPARENT, "tracestate": "gw=1"},
    )
    doc = response.json()
    assert "result" in doc, doc
    return str(doc["result"]["task"]["id"])


def _edge_spans_ok(edge: EdgeHarness, receiver: Receiver) -> str:
    """The edge's own spans: the server span continues the gateway's; accept is its child.
    Returns the accept span's id."""
    assert edge.services.tracing.provider is not None
    edge.services.tracing.provider.force_flush()
    (server,) = receiver.named("POST /a2a")
    assert (server.trace_id, server.parent_id) == (TRACE_ID, GATEWAY_SPAN)
    assert server.attributes["rpc.method"] == "SendMessage"
    assert server.attributes["looping_edge.tenant"] == "demo"
    assert server.attributes["http.response.status_code"] == 200
    assert not any("token" in key for key in server.attributes)
    (accept,) = receiver.named("accept")
    assert (accept.trace_id, accept.parent_id) == (TRACE_ID, server.span_id)
    return accept.span_id


def _turn_logs(worker: WorkerProcess, task_id: str) -> list[dict[str, object]]:
    lines = []
    for line in worker.logs().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("task_id") == task_id:
            lines.append(doc)
    return lines


async def test_one_trace_from_traceparent_to_the_push_across_processes(
    pg_url: str, tmp_path: Path
) -> None:
    kit = GatewayKit()
    with otlp_receiver() as (receiver, endpoint):
        async with edge_harness(
            pg_url,
            gateway=kit,
            gateway_origins=[kit.origin, LOOPBACK_PUSH_ORIGIN],
            otel_endpoint=endpoint,
        ) as edge:
            await edge.add_tenant("demo", agent="scripted")
            task_id = await _send(edge, "reply traced")
            accept_id = _edge_spans_ok(edge, receiver)
            with worker_process(pg_url, tmp_path, "w", extra_env=_otel(endpoint)) as worker:
                await poll_until(
                    lambda: receiver.named("push.attempt"), 25, check=worker.check_alive
                )
                await poll_until(lambda: receiver.named("turn.run"), 10)
            row = await task_row(edge.services.db, task_id)
            assert row.state == states.COMPLETED
        (run,) = receiver.named("turn.run")
        assert run.pid != _pid_of(receiver, "accept")  # another process
        assert (run.trace_id, run.parent_id) == (TRACE_ID, accept_id)
        assert run.links == ((TRACE_ID, accept_id),)
        push = receiver.named("push.attempt")[0]
        assert push.trace_id == TRACE_ID
        assert push.attributes["looping_edge.push.outcome"] in ("retry", "dead")
        assert {s.trace_id for s in receiver.spans} == {TRACE_ID}
        logs = _turn_logs(worker, task_id)
        assert logs and all(line.get("trace_id") == TRACE_ID for line in logs), logs


async def test_still_one_trace_after_kill_9_and_takeover(pg_url: str, tmp_path: Path) -> None:
    kit = GatewayKit()
    with otlp_receiver() as (receiver, endpoint):
        async with edge_harness(
            pg_url,
            gateway=kit,
            gateway_origins=[kit.origin, LOOPBACK_PUSH_ORIGIN],
            otel_endpoint=endpoint,
        ) as edge:
            await edge.add_tenant("demo", agent="scripted")
            db = edge.services.db
            task_id = await _send(
                edge, "progress begin {attempt}\nsleep 3\nreply done by attempt {attempt}"
            )
            accept_id = _edge_spans_ok(edge, receiver)
            with worker_process(pg_url, tmp_path, "victim", extra_env=_otel(endpoint)) as victim:

                async def begun() -> bool:
                    return status_text(await task_row(db, task_id)) == "begin 1"

                await poll_until(begun, 25, check=victim.check_alive)
                victim.signal(signal.SIGKILL)
                victim.proc.wait(timeout=10)
            with worker_process(pg_url, tmp_path, "rescuer", extra_env=_otel(endpoint)) as rescuer:
                row = await poll_until(
                    lambda: reached(db, task_id, *states.TERMINAL), 30, check=rescuer.check_alive
                )
                assert status_text(row) == "done by attempt 2"
                await poll_until(lambda: receiver.named("turn.run"), 10)
                await poll_until(lambda: receiver.named("push.attempt"), 25)
        runs = receiver.named("turn.run")
        # The victim's span died with it (never exported); the rescuer's continues the trace.
        assert [r.attributes["looping_edge.turn.attempt"] for r in runs] == [2]
        assert (runs[0].trace_id, runs[0].parent_id) == (TRACE_ID, accept_id)
        assert {s.trace_id for s in receiver.spans} == {TRACE_ID}
        logs = _turn_logs(rescuer, task_id)
        assert logs and all(line.get("trace_id") == TRACE_ID for line in logs), logs


def _pid_of(receiver: Receiver, name: str) -> int | None:
    return receiver.named(name)[0].pid
