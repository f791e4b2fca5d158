from __future__ import annotations

import sys

import pytest

from app.errors import InvalidRequest, ParseError
from app.rpc.envelope import EnvelopeError, parse_request
from app.rpc.responses import failure, success
from app.text import first_bad_text


def test_valid_request_parses() -> None:
    req = parse_request(b'{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"tenant":"a"}}')
    assert (req.id, req.method, req.params) == (7, "GetTask", {"tenant": "a"})


@pytest.mark.parametrize("body", [b"{", b"not json", b"\xff\xfe", b""])
def test_invalid_json_is_parse_error(body: bytes) -> None:
    with pytest.raises(EnvelopeError) as exc:
        parse_request(body)
    assert isinstance(exc.value.error, ParseError)
    assert exc.value.error.code == -32700
    assert exc.value.request_id is None


def test_deeply_nested_json_is_parse_error_not_crash() -> None:
    with pytest.raises(EnvelopeError) as exc:
        parse_request(b"[" * 100_000 + b"]" * 100_000)
    assert exc.value.error.code in (-32700, -32600)


@pytest.mark.parametrize(
    ("body", "echo"),
    [
        (b"[]", None),  # batch: not a single request object
        (b'[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]', None),
        (b"null", None),
        (b'"x"', None),
        (b'{"jsonrpc":"1.0","id":3,"method":"GetTask"}', 3),
        (b'{"id":4,"method":"GetTask"}', 4),
        (b'{"jsonrpc":"2.0","id":true,"method":"GetTask"}', None),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}', None),
        (b'{"jsonrpc":"2.0","id":5,"method":""}', 5),
        (b'{"jsonrpc":"2.0","id":6,"method":1}', 6),
        (b'{"jsonrpc":"2.0","id":"x","method":"GetTask","params":[1]}', "x"),
    ],
)
def test_not_a_request_object_is_invalid_request(body: bytes, echo: object) -> None:
    with pytest.raises(EnvelopeError) as exc:
        parse_request(body)
    assert isinstance(exc.value.error, InvalidRequest)
    assert exc.value.error.code == -32600
    assert exc.value.request_id == echo


def test_error_document_carries_error_info() -> None:
    doc = failure(9, InvalidRequest("nope"))
    assert doc["id"] == 9 and doc["jsonrpc"] == "2.0"
    assert doc["error"]["code"] == -32600
    info = doc["error"]["data"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["reason"] == "INVALID_REQUEST"
    assert info["domain"] == "a2a-protocol.org"


def test_success_document() -> None:
    assert success("a", {"x": 1}) == {"jsonrpc": "2.0", "id": "a", "result": {"x": 1}}


def test_the_bad_text_walk_does_not_recurse() -> None:
    # It runs inside a request, deeper in the stack than the parser that built the value: a
    # recursive walk met RecursionError (a 500) on a body nested near the parser's limit.
    value: object = "\x00"
    for _ in range(5 * sys.getrecursionlimit()):
        value = [value]
    where = first_bad_text({"x": value}, "params")
    assert where is not None and where.startswith("params.x[0][0]")
