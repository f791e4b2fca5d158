"""The JSON-RPC 2.0 envelope (JSON-RPC 2.0 §4, A2A §9.1): parse strictly, keep the id."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidRequest, ParseError

RequestId = str | int | None


@dataclass(frozen=True)
class JsonRpcRequest:
    id: RequestId
    method: str
    params: dict[str, Any]


class EnvelopeError(Exception):
    """A refusal of the envelope, carrying the id to echo (``null`` when unknown)."""

    def __init__(self, error: ParseError | InvalidRequest, request_id: RequestId = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


def _valid_id(value: object) -> bool:
    # JSON-RPC 2.0 §4: String, Number or Null; booleans and fractions are not ids.
    if isinstance(value, bool):
        return False
    return value is None or isinstance(value, str | int)


def parse_request(body: bytes) -> JsonRpcRequest:
    try:
        doc = json.loads(body)
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
    return JsonRpcRequest(id=request_id, method=method, params=params)
