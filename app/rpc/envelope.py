"""The JSON-RPC 2.0 envelope (JSON-RPC 2.0 §4, A2A §9.1): parse strictly, keep the id."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app import text
from app.errors import InvalidParams, InvalidRequest, ParseError

RequestId = str | int | None


@dataclass(frozen=True)
class JsonRpcRequest:
    id: RequestId
    method: str
    params: dict[str, Any]


class EnvelopeError(Exception):
    """A refusal of the envelope, carrying the id to echo (``null`` when unknown)."""

    def __init__(
        self, error: ParseError | InvalidRequest | InvalidParams, request_id: RequestId = None
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


def _valid_id(value: object) -> bool:
    # JSON-RPC 2.0 §4: String, Number or Null; booleans and fractions are not ids.
    if isinstance(value, bool):
        return False
    return value is None or isinstance(value, str | int)


# RFC 8259 §6: NaN and Infinity are not JSON numbers (Python's parser accepts them by default;
# they reached protobuf as an OverflowError, a -32603), and 1e999 is not read as infinity.
# Built once: ``json.loads`` with any keyword builds a new decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=text.refuse_constant, parse_float=text.finite_float)


def parse_request(body: bytes) -> JsonRpcRequest:
    try:
        # RFC 8259 §8.1: JSON exchanged between systems is UTF-8.
        doc = _DECODER.decode(body.decode("utf-8"))
    except (ValueError, RecursionError):
        raise EnvelopeError(ParseError("invalid JSON")) from None
    if not isinstance(doc, dict):
        # Batches are not part of A2A 1.0's binding: one request object per call.
        raise EnvelopeError(InvalidRequest("request must be a single JSON-RPC 2.0 object"))
    raw_id = doc.get("id")
    request_id: RequestId = raw_id if _valid_id(raw_id) else None
    if "id" in doc and not _valid_id(raw_id):
        raise EnvelopeError(InvalidRequest("id must be a string, an integer or null"))
    if doc.get("jsonrpc") != "2.0":
        raise EnvelopeError(InvalidRequest('jsonrpc must be "2.0"'), request_id)
    method = doc.get("method")
    if not isinstance(method, str) or not method:
        raise EnvelopeError(InvalidRequest("method must be a non-empty string"), request_id)
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise EnvelopeError(InvalidRequest("params must be an object"), request_id)
    if text.may_hold_bad_text(body):
        _check_text(request_id, method, params)
    return JsonRpcRequest(id=request_id, method=method, params=params)


def _check_text(request_id: RequestId, method: str, params: dict[str, Any]) -> None:
    """Refuse text that is not valid Unicode or holds U+0000 (``app.text``)."""
    rule = "must be valid Unicode text without U+0000"
    if isinstance(request_id, str) and not text.is_clean(request_id):
        raise EnvelopeError(InvalidRequest(f"id {rule}"))
    if not text.is_clean(method):
        raise EnvelopeError(InvalidRequest(f"method {rule}"), request_id)
    where = text.first_bad_text(params, "params")
    if where is not None:
        raise EnvelopeError(
            InvalidParams(f"{text.shown(where, 120)} {rule}", reason="invalid_text"), request_id
        )
