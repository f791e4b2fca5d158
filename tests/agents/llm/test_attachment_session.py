"""The caller's session keeps an image as its description, never its bytes (issue 55), on
both backends: the image's turn gives the model the image, a run again of that turn after its
worker died reads it from the turn store and gives it again, a later turn gets the description
only. The turn is accepted through the edge (its attachment kept in ``turn_attachments``);
the agent runs as the worker runs it, once killed during its model call and once again. A
steering message's image is given again in its turn's run again too."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from app.agents.contract import AgentQuestion, TurnContext
from app.agents.llm.attachments import EARLIER
from app.attachments.descriptions import described_message
from app.attachments.stored import Attachment
from app.db.storage import Storage
from app.security.caller import CallerScope
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.fake_model import FakeModelServer, text, tool_call
from tests.agents.llm.kit import llm_config, run_turn, runtime, turn
from tests.polling import poll_until

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400
ENCODED = base64.b64encode(PNG).decode()
DESCRIPTION = f"[image: cat.png, image/png, {len(PNG)} bytes] ({EARLIER})"
IMAGES = {"attachments": {"images": True}}


def _send(message_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": list(parts)}
    return {"message": message, "configuration": {"returnImmediately": True}}  # no worker


async def _accepted(edge: EdgeHarness, storage: Storage, params: dict[str, Any]) -> TurnContext:
    """The accepted turn's context as the worker builds it: the described message, and the
    attachments read from the turn store."""
    sent = await edge.result("SendMessage", params)
    task_id = sent["task"]["id"]
    task = await edge.result("GetTask", {"id": task_id})
    message = {**task["history"][0], "taskId": task_id}
    scope = CallerScope(edge.default_tenant, "user-1")

    async def read(message_id: str) -> Sequence[Attachment]:
        return await storage.attachments.of_message(scope, task_id, message_id)

    ctx = turn("", task_id=task_id, message=message)
    return replace(ctx, tenant=edge.default_tenant, read_attachments=read)


def _image_urls(messages: list[dict[str, Any]]) -> list[str]:
    return [
        item["image_url"]["url"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for item in m["content"]
        if item.get("type") == "image_url"
    ]


async def test_an_image_is_described_in_the_session_and_given_again_on_a_rerun(
    db_url: str,
) -> None:
    with FakeModelServer() as fake:
        fake.script(text("never answered", delay=3), text("A cat."), text("Still a cat."))
        async with edge_harness(db_url) as edge:
            config = llm_config(fake, **IMAGES)
            await edge.add_tenant(
                "demo", agent="llm", agent_config=config, require_push_config=False
            )
            storage = edge.services.db.storage
            rt = runtime(sessions=storage.sessions)
            transcript = storage.sessions.transcript("demo", "user-1")
            image = {"raw": ENCODED, "mediaType": "image/png", "filename": "cat.png"}
            ctx = await _accepted(edge, storage, _send("m-1", {"text": "what is it?"}, image))

            # The worker dies during the image turn's model call, its message saved.
            killed = asyncio.create_task(run_turn(fake, rt, ctx, **IMAGES))
            await poll_until(lambda: fake.requests, what="the image turn's model call")
            await poll_until(transcript.entries, what="the turn's message in the session")
            killed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await killed
            rerun = await run_turn(fake, rt, replace(ctx, attempt=2), **IMAGES)
            stored = await transcript.entries()

            later = await _accepted(edge, storage, _send("m-2", {"text": "and now?"}))
            again = await run_turn(fake, rt, later, **IMAGES)

    assert getattr(rerun, "text", None) == "A cat." and getattr(again, "text", None) == (
        "Still a cat."
    )
    url = f"data:image/png;base64,{ENCODED}"
    first, rerun_request, later_request = (r.messages for r in fake.requests)
    assert _image_urls(first) == [url]
    assert _image_urls(rerun_request) == [url]  # read from turn_attachments again
    assert first[-1] == rerun_request[-1]
    # The session holds the description, never the bytes.
    kept = "".join(json.dumps(e.message) for e in stored)
    assert ENCODED[:64] not in kept and len(kept) < 2048
    assert [e.id.rsplit(":", 2)[-2:] for e in stored] == [["user", "m-1"], ["reply", "final"]]
    # The next turn gets the description and no image.
    assert _image_urls(later_request) == []
    assert ENCODED[:64] not in json.dumps(later_request)
    users = [m["content"] for m in later_request if m["role"] == "user"]
    assert users == [f"what is it?\n\n{DESCRIPTION}", "and now?"]


async def test_a_steering_image_is_given_again_on_a_rerun_of_its_turn(
    fake: FakeModelServer,
) -> None:
    """A steering message's image joined the session before the worker died: the run again of
    that turn reads it from the turn store and gives it again."""
    image = Attachment(1, "image", "image/png", "cat.png", PNG)
    steer = described_message(
        {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "and this"}, {}]}, [image]
    )
    asked: list[str] = []

    async def read(message_id: str) -> Sequence[Attachment]:
        asked.append(message_id)
        return [image] if message_id == "m-2" else []

    first = turn("hi")
    history = [first.message, steer]

    async def read_history() -> Sequence[dict[str, Any]]:
        return history

    ctx = replace(first, history=history, read_history=read_history, read_attachments=read)
    fake.script(text("never answered", delay=3), text("A cat."))
    rt = runtime()
    killed = asyncio.create_task(run_turn(fake, rt, ctx, **IMAGES))
    await poll_until(lambda: fake.requests, what="the model call")
    killed.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await killed
    rerun = await run_turn(fake, rt, replace(ctx, attempt=2), **IMAGES)
    assert getattr(rerun, "text", None) == "A cat."
    url = f"data:image/png;base64,{ENCODED}"
    assert [_image_urls(r.messages) for r in fake.requests] == [[url], [url]]
    assert asked == ["m-2", "m-2"]
    stored = "".join(
        json.dumps(e.message) for e in await rt.sessions.transcript("demo", "user-1").entries()
    )
    assert ENCODED[:64] not in stored and DESCRIPTION in stored


async def test_an_answers_image_is_given_again_on_a_rerun_of_its_turn(
    fake: FakeModelServer,
) -> None:
    """An answer to ask_user with an image: its result and image joined the session before the
    worker died; the run again of that turn reads the image again and gives it after the
    result."""
    image = Attachment(1, "image", "image/png", "cat.png", PNG)
    answer = described_message(
        {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "this one"}, {}]}, [image]
    )
    asked: list[str] = []

    async def read(message_id: str) -> Sequence[Attachment]:
        asked.append(message_id)
        return [image] if message_id == "m-2" else []

    fake.script(
        tool_call("ask_user", {"question": "Which?"}, call_id="q1"),
        text("never answered", delay=3),
        text("That one."),
    )
    rt = runtime()
    question = await run_turn(fake, rt, turn("pick one"), **IMAGES)
    assert isinstance(question, AgentQuestion)
    ctx = replace(turn("", kind="resume", message=answer), read_attachments=read)
    killed = asyncio.create_task(run_turn(fake, rt, ctx, **IMAGES))
    await poll_until(lambda: len(fake.requests) == 2 or None, what="the answer's model call")
    killed.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await killed
    rerun = await run_turn(fake, rt, replace(ctx, attempt=2), **IMAGES)
    assert getattr(rerun, "text", None) == "That one."
    url = f"data:image/png;base64,{ENCODED}"
    assert [_image_urls(r.messages) for r in fake.requests[1:]] == [[url], [url]]
    assert fake.requests[1].messages[-2:] == fake.requests[2].messages[-2:]
    assert fake.requests[2].messages[-2]["content"] == "this one"  # the call's result
    assert asked == ["m-2", "m-2"]
    stored = "".join(
        json.dumps(e.message) for e in await rt.sessions.transcript("demo", "user-1").entries()
    )
    assert ENCODED[:64] not in stored and DESCRIPTION in stored
