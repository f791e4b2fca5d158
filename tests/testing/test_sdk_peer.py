"""The a2a-sdk peer kit (app.testing.sdk_peer): an official-SDK A2A server that refuses a
request without its bearer token, answers with the scripted text and records each message it
ran, over both of its bindings."""

from __future__ import annotations

import httpx

from app.testing.sdk_peer import SdkPeer

HEADERS = {"A2A-Version": "1.0"}


def _message(message_id: str) -> dict[str, object]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hi"}]}


async def test_the_token_is_required_and_the_answer_scripted() -> None:
    with SdkPeer("s3cret", answer=lambda text: f"<{text}>") as peer:
        async with httpx.AsyncClient(base_url=peer.base_url, trust_env=False) as client:
            card = (await client.get("/.well-known/agent-card.json")).json()
            urls = [i["url"] for i in card["supportedInterfaces"]]
            assert urls == [peer.base_url + "/a2a", peer.base_url + "/rest"]
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
            body["params"] = {"message": _message("m1")}
            for token in (None, "wrong"):
                auth = {} if token is None else {"Authorization": f"Bearer {token}"}
                refused = await client.post("/a2a", json=body, headers={**HEADERS, **auth})
                assert refused.status_code == 401
            auth = {**HEADERS, "Authorization": "Bearer s3cret"}
            task = (await client.post("/a2a", json=body, headers=auth)).json()["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert task["status"]["message"]["parts"] == [{"text": "<hi>"}]
            assert task["artifacts"][0]["parts"] == [{"text": "<hi>"}]
            wrong = {**HEADERS, "Authorization": "Bearer wrong"}
            refused = await client.post(
                "/rest/message:send", json={"message": _message("m0")}, headers=wrong
            )
            assert refused.status_code == 401  # on HTTP+JSON too, not the SDK's 500
            rest = await client.post(
                "/rest/message:send", json={"message": _message("m2")}, headers=auth
            )
            assert rest.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [(r.message_id, r.text) for r in peer.received] == [("m1", "hi"), ("m2", "hi")]
    assert peer.refused == 3


async def test_ack_delay_holds_the_answer_after_the_message_is_received() -> None:
    with SdkPeer("s3cret", ack_delay=60) as peer:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
        body["params"] = {"message": _message("m1")}
        auth = {**HEADERS, "Authorization": "Bearer s3cret"}
        async with httpx.AsyncClient(base_url=peer.base_url, trust_env=False) as client:
            try:
                await client.post("/a2a", json=body, headers=auth, timeout=0.3)
            except httpx.ReadTimeout:
                pass
            else:
                raise AssertionError("the acknowledgement was not held")
        assert [r.message_id for r in peer.received] == ["m1"]
