"""A turn that ends without any reply text must still tell the gateway it ended (CONTRACT §7:
the terminal push carries ``<taskId>:final``; REFERENCE-CASES 83 is where the reference refuses
such a reply outright)."""

from __future__ import annotations

from sqlalchemy import select

from app.db.models import PushOutboxRow
from app.testing.edge import edge_harness
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import CallbackExpectation, push_receiver
from tests.polling import poll_until

FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01, "push_retry_base_seconds": 0.01}


async def test_a_reply_without_text_still_reaches_the_gateway(db_url: str) -> None:
    kit = GatewayKit()
    async with push_receiver() as rx:
        origins = [kit.origin, rx.base_url]
        async with edge_harness(
            db_url, gateway=kit, background=True, gateway_origins=origins, **FAST
        ) as edge:
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="echo")
            url, token = rx.endpoint()
            params = {
                "message": {
                    "messageId": "m-data",
                    "role": "ROLE_USER",
                    "parts": [{"data": {"k": 1}}],
                },
                "configuration": {"taskPushNotificationConfig": {"url": url, "token": token}},
            }
            task_id = (await edge.result("SendMessage", params))["task"]["id"]

            async def settled() -> list[PushOutboxRow] | None:
                async with edge.services.db.transaction() as s:
                    rows = list((await s.execute(select(PushOutboxRow))).scalars())
                done = rows and all(r.status in ("delivered", "dead") for r in rows)
                return rows if done else None

            rows = await poll_until(settled, 10, what="every push delivered or dead")
            task = await edge.result("GetTask", {"id": task_id})
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert [(r.status, r.last_error) for r in rows] == [("delivered", None)]
            assert [p.message_id for p in rx.requests] == [f"{task_id}:final"]
