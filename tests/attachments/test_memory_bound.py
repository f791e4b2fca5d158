"""Many large bodies at once (issue 55), on both backends: the edge's memory stays bounded
(``EDGE_MAX_LARGE_BODIES`` bodies are read and handled at a time, the rest wait for a slot)
and another tenant's requests are answered meanwhile, never waiting for a slot even while
every slot is held."""

from __future__ import annotations

import asyncio
import base64
import json
import tracemalloc
from typing import Any

from app.testing.edge import EdgeHarness, edge_harness

MiB = 1024 * 1024
IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(MiB - 64)  # just under the per-image limit
FLOOD = 16
SLOTS = 2
# What one body in flight may cost the edge, in bodies: the bytes read, the parsed JSON, the
# protobuf message, the normalised message and the stored rows (measured about five). Without
# the slots all sixteen are in flight at once, several times this bound.
COPIES = 6


def _body(message_id: str) -> bytes:
    part = {"raw": base64.b64encode(IMAGE).decode(), "mediaType": "image/png"}
    params = {
        "tenant": "pics",
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [part] * 4},
        "configuration": {"returnImmediately": True},
    }
    doc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    return json.dumps(doc).encode()


async def _flood_one(edge: EdgeHarness, body: bytes) -> None:
    headers = edge.headers(edge.token(tenant="pics"))
    response = await edge.client.post(edge.settings.rpc_path, content=body, headers=headers)
    assert response.status_code == 200 and "result" in response.json(), response.text[:200]


async def _other_tenant(edge: EdgeHarness, prefix: str = "t") -> None:
    """Text turns of another tenant, each accepted and read back."""
    for n in range(3):
        parts = [{"text": "hi"}]
        params: dict[str, Any] = {
            "message": {"messageId": f"{prefix}-{n}", "role": "ROLE_USER", "parts": parts},
            "configuration": {"returnImmediately": True},
        }
        task = await edge.result("SendMessage", params, tenant="plain")
        await edge.result("GetTask", {"id": task["task"]["id"]}, tenant="plain")


async def test_memory_stays_bounded_and_others_are_served(db_url: str) -> None:
    async with edge_harness(
        db_url,
        max_large_bodies=SLOTS,
        max_large_bodies_per_tenant=SLOTS,
        large_body_wait_seconds=120,
    ) as edge:
        config = {"attachments": {"images": True}}
        await edge.add_tenant("pics", agent="echo", agent_config=config, require_push_config=False)
        await edge.add_tenant("plain", agent="echo", require_push_config=False)
        bodies = [_body(f"m-{n}") for n in range(FLOOD)]
        tracemalloc.start()
        try:
            base, _ = tracemalloc.get_traced_memory()
            flood = asyncio.gather(*(_flood_one(edge, b) for b in bodies))
            await asyncio.sleep(0)  # the flood's requests are in
            await _other_tenant(edge)  # answered meanwhile (each call checks its answer)
            await flood
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        listed = await edge.result("ListTasks", {}, tenant="pics")
        # Every slot held (large bodies in flight): another tenant's requests never wait.
        slots = edge.services.large_bodies
        async with slots.admitted("pics"), slots.admitted("pics"):
            assert slots.in_flight == SLOTS
            await asyncio.wait_for(_other_tenant(edge, "u"), 10)
    assert len(listed["tasks"]) == FLOOD
    bound = (SLOTS + 1) * COPIES * len(bodies[0])
    assert peak - base < bound, f"grew {peak - base} bytes, bound {bound}"
