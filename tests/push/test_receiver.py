"""The test push receiver checks callbacks like a gateway and records every request."""

from __future__ import annotations

import json

import httpx

from app.security.keys import SigningKey, generate_private_jwk
from app.testing.push_faults import always
from app.testing.push_receiver import CallbackExpectation, push_receiver

JKU = "https://edge.test/.well-known/jwks.json"
KEY = SigningKey.from_jwk_json(json.dumps(generate_private_jwk("edge-1")))


def _headers(url: str, token: str, **extra: str) -> dict[str, str]:
    return {
        "Content-Type": "application/a2a+json",
        "Authorization": f"Bearer {KEY.callback_jwt(jku=JKU, audience=url)}",
        "X-A2A-Notification-Token": token,
        **extra,
    }


async def test_checks_token_content_type_and_jwt() -> None:
    async with push_receiver(expect=CallbackExpectation.for_key(KEY, JKU)) as rx:
        url, token = rx.endpoint("a")
        body = b'{"task":{"id":"t"}}'
        async with httpx.AsyncClient() as client:
            ok = await client.post(url, content=body, headers=_headers(url, token))
            wrong_token = await client.post(url, content=body, headers=_headers(url, "nope"))
            wrong_type = await client.post(
                url, content=body, headers=_headers(url, token, **{"Content-Type": "text/plain"})
            )
            other_aud = await client.post(url, content=body, headers=_headers(url + "x", token))
            no_bearer = await client.post(
                url, content=body, headers={**_headers(url, token), "Authorization": "Basic x"}
            )
        assert [r.status_code for r in (ok, wrong_token, wrong_type, other_aud, no_bearer)] == [
            200,
            401,
            401,
            401,
            401,
        ]
        errors = [r.error for r in rx.requests]
        assert errors[0] is None
        assert errors[1:] == [
            "notification token mismatch",
            "content-type is not application/a2a+json",
            "callback aud is not this push url",
            "no bearer token",
        ]
        assert len(rx.deliveries) == 1 and rx.deliveries[0].task_id == "t"


async def test_strict_paths_and_faults() -> None:
    async with push_receiver() as rx:
        rx.strict_paths = True
        url, token = rx.endpoint("a")
        async with httpx.AsyncClient() as client:
            unknown = await client.post(
                rx.base_url + "/push/other", content=b"{}", headers=_headers(url, token)
            )
            rx.fault = always(503, retry_after="7")
            faulty = await client.post(url, content=b"{}", headers=_headers(url, token))
            missing = await client.get(rx.base_url + "/elsewhere")
        assert unknown.status_code == 401 and rx.requests[0].error == "unknown push endpoint"
        assert faulty.status_code == 503 and faulty.headers["retry-after"] == "7"
        assert missing.status_code == 404
