"""Attachments that come with an answer to ``ask_user`` and with a delegating turn's message,
through the real edge and worker on both backends (issue 55): the model gets them as it gets
a first message's (image input, document framed text); a delegating turn's subagents get
none."""

from __future__ import annotations

import base64
from typing import Any

from app.agents.registry import default_registry
from app.db.engine import Database
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.fake_model import FakeModelServer, text, tool_call
from app.testing.pdfs import text_pdf
from tests.agents.llm.delegation.kit import delegate, delegation, final
from tests.attachments.kit import llm_runtime
from tests.polling import poll_until

FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
PDF = text_pdf(["Invoice total 42 EUR"])
OPTED_IN = {"attachments": {"images": True, "documents": True}}
IMAGE_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def _message(message_id: str, words: str, task_id: str | None = None) -> dict[str, Any]:
    image = {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png", "filename": "a.png"}
    pdf = {"raw": base64.b64encode(PDF).decode(), "mediaType": "application/pdf"}
    message: dict[str, Any] = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"text": words}, image, pdf],
    }
    if task_id is not None:
        message["taskId"] = task_id
    return {"message": message, "configuration": {"returnImmediately": True}}


async def _state(edge: EdgeHarness, task_id: str, state: str) -> None:
    async def reached() -> bool | None:
        task = await edge.result("GetTask", {"id": task_id}, tenant="t")
        return True if task["status"]["state"] == f"TASK_STATE_{state}" else None

    await poll_until(reached, what=state)


def _has_attachments(content: Any) -> bool:
    """Whether a user message's content carries the image and the framed PDF text."""
    if not isinstance(content, list):
        return False
    urls = [c["image_url"]["url"] for c in content if c.get("type") == "image_url"]
    texts = "".join(c.get("text", "") for c in content if c.get("type") == "text")
    return urls == [IMAGE_URL] and "[page 1]\nInvoice total 42 EUR" in texts


async def test_an_answers_attachments_reach_the_model(db_url: str) -> None:
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(tool_call("ask_user", {"question": "Which one?"}, call_id="q1"), text("ok"))
        config = {
            "model": {"base_url": fake.base_url, "name": "fake"},
            "system_prompt": "Ask.",
            **OPTED_IN,
        }
        async with edge_harness(
            db_url, background=True, agents=default_registry(llm_runtime(db)), **FAST
        ) as edge:
            await edge.add_tenant("t", agent="llm", agent_config=config, require_push_config=False)
            start = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "pick"}]}
            sent = await edge.result("SendMessage", {"message": start}, tenant="t")
            task_id = sent["task"]["id"]
            await _state(edge, task_id, "INPUT_REQUIRED")
            await edge.result("SendMessage", _message("m-2", "this one", task_id), tenant="t")
            await _state(edge, task_id, "COMPLETED")
    await db.dispose()
    messages = fake.requests[-1].messages
    tool = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    assert messages[tool]["content"] == "this one"  # the answer's text is the call's result
    after = messages[tool + 1]
    assert after["role"] == "user" and _has_attachments(after["content"])
    assert after["content"][0] == {
        "type": "text",
        "text": "The person attached this to their answer:",
    }


async def test_a_delegating_coordinator_gets_the_attachments_its_subagents_none(
    db_url: str,
) -> None:
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(delegate("read it"), text("subagent result"), final("done"))
        config = {
            "model": {"base_url": fake.base_url, "name": "fake"},
            "system_prompt": "You coordinate.",
            "delegation": delegation(),
            **OPTED_IN,
        }
        async with edge_harness(
            db_url, background=True, agents=default_registry(llm_runtime(db)), **FAST
        ) as edge:
            await edge.add_tenant("t", agent="llm", agent_config=config, require_push_config=False)
            sent = await edge.result("SendMessage", _message("m-1", "what is this?"), tenant="t")
            await _state(edge, sent["task"]["id"], "COMPLETED")
    await db.dispose()
    first, subagent, second = fake.requests
    users = [m["content"] for m in first.messages if m["role"] == "user"]
    assert len(users) == 1 and _has_attachments(users[0])
    assert users[0][0] == {"type": "text", "text": "what is this?"}
    assert "image_url" not in str(subagent.messages) and "Invoice" not in str(subagent.messages)
    assert any(_has_attachments(m["content"]) for m in second.messages if m["role"] == "user")
