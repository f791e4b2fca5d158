"""Open tenants' push targets through the real app, on both backends (issue 49): any https
URL past the SSRF form rules is stored, a refused one is -32602 naming the rule (never the
URL or its credentials), a gateway tenant keeps GATEWAY_ORIGINS, and with
EDGE_PUSH_ALLOW_PRIVATE_TARGETS a loopback receiver outside GATEWAY_ORIGINS gets the pushes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from app.db.push_outbox import DeadLetter
from app.push.dead_letters import list_dead
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit
from app.testing.push_faults import redirect
from app.testing.push_receiver import CallbackExpectation, PushReceiver, push_receiver
from tests.polling import poll_until
from tests.push.conftest import FAST


@asynccontextmanager
async def open_edge(
    db_url: str, **overrides: Any
) -> AsyncIterator[tuple[EdgeHarness, PushReceiver]]:
    """The real app with workers and delivery; ``open-t`` (open) and ``gw`` (gateway) on the
    scripted agent; the receiver is NOT on GATEWAY_ORIGINS."""
    kit = GatewayKit()
    async with (
        push_receiver() as rx,
        edge_harness(db_url, gateway=kit, background=True, **{**FAST, **overrides}) as edge,
    ):
        services = edge.services
        rx.expect = CallbackExpectation.for_key(services.key, services.cards.jku)
        await edge.add_tenant("open-t", agent="scripted", profile="open", require_push_config=False)
        await edge.add_tenant("gw", agent="scripted")
        yield edge, rx


async def _dead_letter(edge: EdgeHarness) -> DeadLetter:
    async def dead() -> list[DeadLetter] | None:
        letters = await list_dead(edge.services.db)
        return letters or None

    (letter,) = await poll_until(dead, 20, what="the dead letter")
    return letter


def _send(text: str, url: str | None = None, token: str = "tok-1", n: int = 1) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": text}]}
    }
    if url is not None:
        params["configuration"] = {"taskPushNotificationConfig": {"url": url, "token": token}}
    return params


async def test_a_loopback_receiver_gets_the_pushes_with_the_development_switch(db_url: str) -> None:
    async with open_edge(db_url, push_allow_private_targets=True) as (edge, rx):
        url, token = rx.endpoint()
        answer = await edge.result("SendMessage", _send("reply hi", url, token), tenant="open-t")
        task_id = answer["task"]["id"]
        final = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
        assert final.state == "TASK_STATE_COMPLETED" and final.text == "hi"
        assert final.error is None and final.claims is not None and final.claims["aud"] == url


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("https://127.0.0.1/hook", "loopback"),
        ("https://169.254.169.254/latest/meta-data/", "metadata"),
        ("https://[fd00:ec2::254]/", "metadata"),
        ("https://intranet/hook", "single-label"),
        ("http://hooks.example.com/hook", "https"),
        ("https://admin:hunter2@hooks.example.com/hook", "userinfo"),
    ],
)
async def test_an_open_tenant_refuses_a_target_by_its_form(
    db_url: str, url: str, rule: str
) -> None:
    async with open_edge(db_url) as (edge, _rx):
        response = await edge.rpc("SendMessage", _send("reply hi", url), tenant="open-t")
        error = response.json()["error"]
        assert error["code"] == -32602 and rule in error["message"]
        assert "hunter2" not in response.text and "meta-data" not in response.text
        tasks = await edge.result("ListTasks", {}, tenant="open-t")
        assert tasks["tasks"] == []  # refused before any task exists


async def test_an_open_tenant_stores_a_public_https_target(db_url: str) -> None:
    async with open_edge(db_url) as (edge, _rx):
        url = "https://hooks.example.com/a2a?client=1"
        answer = await edge.result("SendMessage", _send("reply ok", url), tenant="open-t")
        task_id = answer["task"]["id"]
        created = await edge.result(
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "second", "url": "https://other.example.org/cb"},
            tenant="open-t",
        )
        assert created["url"] == "https://other.example.org/cb"
        refused = await edge.rpc(
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "third", "url": "https://10.0.0.7/cb"},
            tenant="open-t",
        )
        assert refused.json()["error"]["code"] == -32602


async def test_a_gateway_tenant_keeps_gateway_origins(db_url: str) -> None:
    async with open_edge(db_url, push_allow_private_targets=True) as (edge, rx):
        url, _token = rx.endpoint()
        for target in (url, "https://hooks.example.com/a2a"):
            response = await edge.rpc("SendMessage", _send("reply hi", target), tenant="gw")
            error = response.json()["error"]
            assert error["code"] == -32602 and "GATEWAY_ORIGINS" in error["message"]


async def test_the_development_switch_is_a_warning_at_start(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="looping.edge"):
        async with edge_harness(db_url, push_allow_private_targets=True):
            pass
    assert any("EDGE_PUSH_ALLOW_PRIVATE_TARGETS" in r.getMessage() for r in caplog.records)
    caplog.clear()
    async with edge_harness(db_url):
        pass
    assert not any("EDGE_PUSH_ALLOW_PRIVATE_TARGETS" in r.getMessage() for r in caplog.records)


async def test_a_message_result_is_pushed_with_its_own_id(db_url: str) -> None:
    async with open_edge(db_url, push_allow_private_targets=True) as (edge, rx):
        url, token = rx.endpoint()
        params = _send("message hi", url, token)
        params["configuration"]["returnImmediately"] = True
        answer = await edge.result("SendMessage", params, tenant="open-t")
        task_id = answer["task"]["id"]
        pushed = await rx.wait_for(lambda p: p.task_id == task_id, within=20)
        assert pushed.message_id == f"{task_id}:message" and pushed.text == "hi"
        assert pushed.state == "TASK_STATE_COMPLETED" and pushed.error is None


async def test_a_tenant_switched_back_to_gateway_stops_reaching_its_targets(db_url: str) -> None:
    # Asked at every attempt: pushes queued while the tenant was open are not sent after it
    # became a gateway tenant again (fail closed: a dead letter, nothing on the wire).
    async with open_edge(db_url, push_allow_private_targets=True) as (edge, rx):
        url, token = rx.endpoint()
        params = _send("sleep 0.5\nreply hi", url, token)
        params["configuration"]["returnImmediately"] = True
        await edge.result("SendMessage", params, tenant="open-t")
        await edge.services.tenant_store.update("open-t", profile="gateway")
        edge.services.tenants.invalidate()
        letter = await _dead_letter(edge)
        assert letter.last_error == "push url is not an allowed gateway"
        assert rx.requests == []


async def test_a_redirect_to_the_metadata_address_is_not_followed(db_url: str) -> None:
    async with open_edge(db_url, push_allow_private_targets=True) as (edge, rx):
        url, token = rx.endpoint()
        rx.fault = redirect("http://169.254.169.254/latest/meta-data/")
        params = _send("reply hi", url, token)
        params["configuration"]["returnImmediately"] = True
        await edge.result("SendMessage", params, tenant="open-t")
        letter = await _dead_letter(edge)
        assert letter.last_status == 307 and len(rx.requests) == 1
        assert letter.last_error == "HTTP 307 (redirects are not followed)"
