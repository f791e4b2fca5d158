"""The callback JWT, checked by an independent verifier (PyJWT), field by field (CONTRACT §7)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jwt as pyjwt
import pytest
from jwt import PyJWK

from app.cards.service import CardService
from app.security import keys as keys_module
from app.security.keys import SigningKey
from app.testing.push_faults import fail_first
from tests.push.conftest import PushRig


def _verify(token: str, key: SigningKey, audience: str, *, times: bool = True) -> tuple[dict, dict]:
    """The token's header and claims, its signature and audience checked (and its times,
    unless not ``times``: a token signed at a fake clock's time)."""
    jwk = PyJWK.from_dict(key.public_jwk)
    claims = pyjwt.decode(
        token,
        jwk.key,
        algorithms=["EdDSA"],
        audience=audience,
        options={"require": ["aud", "iat", "exp"], "verify_iat": times, "verify_exp": times},
    )
    return pyjwt.get_unverified_header(token), claims


async def test_callback_jwt_fields(rig: PushRig, monkeypatch: pytest.MonkeyPatch) -> None:
    # The signer's clock only (not the process's): every call is 7 s later than the last.
    clock = iter(range(1_900_000_000, 1_900_001_000, 7))
    monkeypatch.setattr(keys_module, "time", SimpleNamespace(time=lambda: float(next(clock))))
    url, _ = await rig.add_config("t1")
    await rig.queue("t1", "final", kind="final")
    rig.rx.expect = None  # the fake clock is in the future; PyJWT checks below with leeway
    rig.rx.fault = fail_first(2)
    await rig.start()
    await rig.wait_rows(lambda rs: rs[0].status == "delivered")
    tokens = [r.headers["authorization"].removeprefix("Bearer ") for r in rig.rx.requests]
    assert len(tokens) == 3
    settings = rig.settings()
    card = CardService(settings, rig.key)
    iats = []
    for token in tokens:
        header, claims = _verify(token, rig.key, url, times=False)
        # kid and jku string-identical to the card's; alg EdDSA; nothing else in the header.
        assert header == {"alg": "EdDSA", "kid": card.kid, "jku": card.jku}
        assert card.jku == "https://edge.test/.well-known/jwks.json"
        assert claims["aud"] == url
        assert claims["exp"] == claims["iat"] + 300
        assert set(claims) == {"aud", "iat", "exp"}
        iats.append(claims["iat"])
    # Signed per attempt: every attempt carries its own, later, iat.
    assert iats == sorted(iats) and len(set(iats)) == 3 and len(set(tokens)) == 3


async def test_callback_jwt_verifies_now_and_refuses_another_audience(rig: PushRig) -> None:
    url, _ = await rig.add_config("t1")
    await rig.queue("t1", "final", kind="final")
    await rig.start()
    push = await rig.rx.wait_for(lambda p: True)
    token = push.headers["authorization"].removeprefix("Bearer ")
    header, claims = _verify(token, rig.key, url)
    assert header["kid"] == rig.key.kid and claims["aud"] == url
    with pytest.raises(pyjwt.InvalidAudienceError):
        _verify(token, rig.key, url + "x")
    other = SigningKey.from_jwk_json(json.dumps(keys_module.generate_private_jwk("edge-key-1")))
    with pytest.raises(pyjwt.InvalidSignatureError):
        _verify(token, other, url)
