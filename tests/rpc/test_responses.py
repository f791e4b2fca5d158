"""Response documents (app/rpc/responses.py): the spliced success body is the same JSON as
the plain one, whatever the request id."""

from __future__ import annotations

import json

import pytest

from app.rpc.responses import RawJson, encode, success, success_body


@pytest.mark.parametrize("request_id", [1, 0, -7, 2**63, "a", 'q"uo\\te', "ünï ✓", "", None])
def test_spliced_body_equals_the_encoded_document(request_id: str | int | None) -> None:
    task = {"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}, "note": "é"}
    spliced = success_body(request_id, RawJson(encode(task).decode()))
    plain = success_body(request_id, task)
    assert json.loads(spliced) == json.loads(plain) == success(request_id, task)
    assert spliced == plain  # same member order, same separators, UTF-8 kept as is


def test_encode_is_compact_utf8() -> None:
    assert encode({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()


def test_an_unpaired_surrogate_in_an_answer_is_escaped_not_a_crash() -> None:
    # Requests carrying one are refused, but an agent's own text may hold one.
    body = encode({"text": "a\ud800b"})
    assert body == b'{"text":"a\\ud800b"}'
    assert success_body(1, RawJson('{"text":"a\ud800b"}')) == (
        b'{"jsonrpc":"2.0","id":1,"result":{"text":"a\\ud800b"}}'
    )
    assert encode({"text": "\u00e9"}) == '{"text":"\u00e9"}'.encode()  # UTF-8 when it can be
