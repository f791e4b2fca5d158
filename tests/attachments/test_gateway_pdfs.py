"""PDFs through the real edge on both backends (issue 55): a tenant with documents on
advertises and accepts a PDF; every PDF bomb is refused with -32005 and its reason, leaving
no task; other tenants are served while a PDF is being read."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import pytest

from app.testing.edge import EdgeHarness, edge_harness
from app.testing.pdfs import flate_bomb_pdf, nested_pdf, slow_pdf, text_pdf

pytestmark = pytest.mark.slow  # each PDF starts a child process

MiB = 1024 * 1024
MODEL = {"model": {"base_url": "http://127.0.0.1:9/v1", "name": "fake"}}


def _send(message_id: str, pdf: bytes) -> dict[str, Any]:
    part = {"raw": base64.b64encode(pdf).decode(), "mediaType": "application/pdf"}
    return {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"text": "read this"}, {**part, "filename": "report.pdf"}],
        },
        "configuration": {"returnImmediately": True},
    }


async def _tasks(edge: EdgeHarness, tenant: str) -> list[Any]:
    return list((await edge.result("ListTasks", {}, tenant=tenant)).get("tasks", []))


async def _add_tenants(edge: EdgeHarness) -> None:
    await edge.add_tenant(
        "docs",
        agent="llm",
        agent_config={**MODEL, "attachments": {"documents": True}},
        require_push_config=False,
    )
    await edge.add_tenant(
        "pics",
        agent="llm",
        agent_config={**MODEL, "attachments": {"images": True}},
        require_push_config=False,
    )
    await edge.add_tenant("other", agent="scripted", require_push_config=False)


async def test_pdfs_accepted_and_bombs_refused(db_url: str) -> None:
    async with edge_harness(db_url, pdf_memory_bytes=96 * MiB) as edge:
        await _add_tenants(edge)
        card = await edge.result("GetExtendedAgentCard", {}, tenant="docs")
        assert "application/pdf" in card["defaultInputModes"]
        pics_card = await edge.result("GetExtendedAgentCard", {}, tenant="pics")
        assert "application/pdf" not in pics_card["defaultInputModes"]

        refused = {
            "document_too_many_pages": text_pdf(["page"] * 33),
            "document_unreadable": nested_pdf(50_000),
            "document_memory": flate_bomb_pdf(70 * MiB),
            "document_no_text": text_pdf([""]),
        }
        for reason, pdf in refused.items():
            response = await edge.rpc("SendMessage", _send(f"r-{reason}", pdf), tenant="docs")
            error = response.json()["error"]
            assert error["code"] == -32005, reason
            info = error["data"][0]
            assert info["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
            assert info["metadata"]["attachment"] == reason
            assert info["metadata"]["admission"] == "rejected"
        # The streaming form reads its PDF before acceptance too.
        response = await edge.rpc(
            "SendStreamingMessage", _send("st-1", nested_pdf(50_000)), tenant="docs"
        )
        assert response.json()["error"]["data"][0]["metadata"]["attachment"] == (
            "document_unreadable"
        )
        # Not opted into documents: a PDF is a type the tenant does not take.
        response = await edge.rpc("SendMessage", _send("p-1", text_pdf(["x"])), tenant="pics")
        assert response.json()["error"]["data"][0]["metadata"]["attachment"] == (
            "attachment_type_unsupported"
        )
        assert await _tasks(edge, "docs") == []
        assert await _tasks(edge, "pics") == []

        accepted = await edge.result(
            "SendMessage", _send("ok-1", text_pdf(["One page"])), tenant="docs"
        )
        assert accepted["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert len(await _tasks(edge, "docs")) == 1


async def test_a_decompression_bomb_is_refused(db_url: str) -> None:
    async with edge_harness(db_url) as edge:
        await _add_tenants(edge)
        bomb = flate_bomb_pdf(200 * MiB)
        response = await edge.rpc("SendMessage", _send("b-1", bomb), tenant="docs")
        assert response.json()["error"]["data"][0]["metadata"]["attachment"] == (
            "document_stream_too_large"
        )
        assert await _tasks(edge, "docs") == []


async def test_other_tenants_are_served_while_a_pdf_is_read(db_url: str) -> None:
    async with edge_harness(db_url, pdf_deadline_seconds=2.0) as edge:
        await _add_tenants(edge)
        started = time.monotonic()
        slow = asyncio.create_task(
            edge.rpc("SendMessage", _send("s-1", slow_pdf(32, 20_000)), tenant="docs")
        )
        await asyncio.sleep(0.2)
        served = []
        for n in range(5):
            await edge.result(
                "SendMessage",
                {
                    "message": {
                        "messageId": f"o-{n}",
                        "role": "ROLE_USER",
                        "parts": [{"text": "reply done"}],
                    },
                    "configuration": {"returnImmediately": True},
                },
                tenant="other",
            )
            served.append(time.monotonic() - started)
        assert not slow.done()
        response = await slow
        elapsed = time.monotonic() - started
        assert response.json()["error"]["data"][0]["metadata"]["attachment"] == (
            "document_deadline"
        )
        assert served[-1] < elapsed and elapsed < 10
        assert await _tasks(edge, "docs") == []
        assert len(await _tasks(edge, "other")) == 5
