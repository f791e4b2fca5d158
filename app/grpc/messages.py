"""Proto messages to the A2A JSON form and back (A2A §5.5: the 1.0 JSON is the proto JSON
mapping), so a gRPC call reaches the dispatcher as the JSON-RPC call with the same params would.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from app import text
from app.db.documents import RawJson
from app.errors import InvalidParams, InvalidRequest


def parse_request(raw: bytes, request_type: type[Message]) -> Message:
    """The request bytes as ``request_type``; anything that does not parse is the client's
    mistake (INVALID_ARGUMENT), never an internal fault."""
    try:
        return request_type.FromString(raw)
    except (DecodeError, ValueError, TypeError, RuntimeError, SystemError):
        raise InvalidRequest(
            f"the request is not a valid {request_type.DESCRIPTOR.name}",
            reason="invalid_request",
        ) from None


def params_of(request: Message) -> dict[str, Any]:
    """The request in protobuf-JSON (camelCase, enum names), as JSON-RPC ``params``.

    Text with U+0000 is refused as on JSON-RPC (``app.text``): protobuf checks UTF-8 but takes
    U+0000, which stored text cannot hold."""
    try:
        params: dict[str, Any] = json_format.MessageToDict(request)
    except (json_format.Error, ValueError, TypeError):
        raise InvalidParams("the request cannot be read as A2A JSON") from None
    where = text.first_bad_text(params, "request")
    if where is not None:
        raise InvalidParams(
            f"{text.shown(where, 120)} must be valid Unicode text without U+0000",
            reason="invalid_text",
        )
    return params


def response_of(result: Any, response_type: type[Message]) -> Message:
    """A handler's JSON answer as ``response_type`` (unknown members dropped: the proto is
    the schema of this binding). ``ValueError`` if it does not fit: an internal fault."""
    doc = json.loads(result.text) if isinstance(result, RawJson) else result
    message = response_type()
    if doc is None:
        return message
    try:
        json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(f"answer does not fit {response_type.DESCRIPTOR.name}") from exc
    return message
