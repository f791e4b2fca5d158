"""Attachments through the real edge, worker and fake model on both backends (issue 55): a
PNG reaches the model as an image input and a Markdown file as framed text; each refusal
leaves no task; a tenant that did not opt in keeps the default body limit."""

from __future__ import annotations

import base64
from typing import Any

from app.agents.registry import default_registry
from app.db.engine import Database
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.fake_model import FakeModelServer, text
from tests.attachments.kit import llm_runtime
from tests.polling import poll_until

FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400  # past the default body limit once encoded


def _raw(data: bytes, media_type: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"raw": base64.b64encode(data).decode()}
    if media_type is not None:
        part["mediaType"] = media_type
    return part


def _send(message_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": list(parts)}}


def _config(fake: FakeModelServer, **attachments: bool) -> dict[str, Any]:
    return {
        "model": {"base_url": fake.base_url, "name": "fake"},
        "system_prompt": "You look at pictures.",
        "attachments": attachments,
    }


async def _tasks(edge: EdgeHarness, tenant: str) -> list[Any]:
    return list((await edge.result("ListTasks", {}, tenant=tenant)).get("tasks", []))


async def test_png_reaches_the_model_and_refusals_leave_nothing(db_url: str) -> None:
    db = Database(db_url)
    runtime = llm_runtime(db)
    with FakeModelServer() as fake:
        fake.script(text("A gradient."), text("Milk."))
        async with edge_harness(
            db_url, background=True, agents=default_registry(runtime), **FAST
        ) as edge:
            await edge.add_tenant(
                "pics",
                agent="llm",
                agent_config=_config(fake, images=True),
                require_push_config=False,
            )
            await edge.add_tenant(
                "plain", agent="llm", agent_config=_config(fake), require_push_config=False
            )
            card = await edge.result("GetExtendedAgentCard", {}, tenant="pics")
            assert {"image/png", "image/jpeg"} <= set(card["defaultInputModes"])
            plain_card = await edge.result("GetExtendedAgentCard", {}, tenant="plain")
            assert "image/png" not in plain_card["defaultInputModes"]

            refused = {
                "attachment_type_mismatch": [_raw(PNG, "image/jpeg")],
                "too_many_images": [_raw(PNG[:1000])] * 5,
                "image_too_large": [_raw(PNG[:8] + bytes(2 * 1024 * 1024))],
                "attachment_url_refused": [{"url": "https://example.com/a.png"}],
                "attachment_type_unsupported": [_raw(b"%PDF-1.7", "application/pdf")],
            }
            for reason, parts in refused.items():
                response = await edge.rpc(
                    "SendMessage", _send(f"r-{reason}", {"text": "see"}, *parts), tenant="pics"
                )
                error = response.json()["error"]
                assert error["code"] == -32005, reason
                assert error["data"][0]["metadata"]["attachment"] == reason
            assert await _tasks(edge, "pics") == []

            # Not opted in: today's body limit holds (413 before the body is parsed).
            response = await edge.rpc("SendMessage", _send("p-1", _raw(PNG)), tenant="plain")
            assert response.status_code == 413
            assert await _tasks(edge, "plain") == []

            await edge.result(
                "SendMessage",
                _send("m-1", {"text": "what is this?"}, _raw(PNG, "image/png")),
                tenant="pics",
            )
            await poll_until(lambda: fake.requests, what="the model call")

            # Documents only: a Markdown file reaches the model framed; a second is refused.
            await edge.add_tenant(
                "docs",
                agent="llm",
                agent_config=_config(fake, documents=True),
                require_push_config=False,
            )
            card = await edge.result("GetExtendedAgentCard", {}, tenant="docs")
            assert "text/markdown" in card["defaultInputModes"]
            note = _raw(b"# List\nbuy milk", "text/markdown")
            response = await edge.rpc(
                "SendMessage", _send("d-0", {"text": "read"}, note, note), tenant="docs"
            )
            assert response.json()["error"]["data"][0]["metadata"]["attachment"] == (
                "too_many_documents"
            )
            # Past EDGE_MAX_DOCUMENT_BODY_BYTES even an opted-in tenant gets 413.
            huge = _raw(b"x" * (13 * 1024 * 1024 * 3 // 4), "text/plain")
            response = await edge.rpc("SendMessage", _send("d-2", huge), tenant="docs")
            assert response.status_code == 413
            await edge.result("SendMessage", _send("d-1", {"text": "read"}, note), tenant="docs")
            await poll_until(lambda: len(fake.requests) > 1, what="the second model call")
    await db.dispose()
    framed = fake.requests[1].messages[-1]["content"]
    assert framed.startswith("read\n\nThe user attached a document.")
    assert framed.endswith('type="text/markdown">\n# List\nbuy milk\n</attachment>')
    content = fake.requests[0].messages[-1]["content"]
    assert content[0] == {"type": "text", "text": "what is this?"}
    url = content[1]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(PNG).decode()
