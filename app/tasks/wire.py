"""Task rows to protobuf-JSON and incoming params to ``a2a.types`` messages.

The SDK's generated classes are the wire schema (ARCHITECTURE, Wire types): stored documents
are protobuf-JSON (camelCase, enum names), produced through ``a2a.types`` when written, so a
read serves them as stored and a protobuf client reads back exactly what was validated. Parse errors
become ``InvalidParams`` naming the field, never echoing the offending value (it may carry a
token or a credential).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from a2a.types import Part
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

from app.db.documents import as_utc as as_utc
from app.db.documents import status_doc as status_doc
from app.db.documents import task_doc as task_doc
from app.db.documents import timestamp_json as timestamp_json
from app.db.documents import utcnow as utcnow
from app.db.models import TaskRow
from app.errors import InvalidParams

M = TypeVar("M", bound=ProtoMessage)

_FIELD_RE = re.compile(r"Failed to parse (\w+) field")
_AT_RE = re.compile(r'at "[A-Za-z]+\.([\w.\[\]]+)"')
_NAME_RE = re.compile(r'no field named "(\w+)"')


def _field_path(error: json_format.ParseError) -> str:
    text = str(error)
    names = _FIELD_RE.findall(text)
    at = _AT_RE.search(text)
    if at is not None:
        path = at.group(1)
        missing = _NAME_RE.search(text)
        return f"{path}.{missing.group(1)}" if missing else path
    return ".".join(names) if names else "params"


def parse_params(
    params: Mapping[str, Any],
    message_type: type[M],
    *,
    lenient_nested: bool = False,
) -> M:
    """Parse ``params`` into ``message_type``.

    Top-level members that are not fields of the request are dropped (``tenant`` aside, a
    client may send extensions we do not know); nested unknown members are refused unless
    ``lenient_nested`` (used for ``SendMessage``, whose nested Message and configuration must
    tolerate additive fields of later protocol versions).
    """
    descriptor = message_type.DESCRIPTOR
    known = {f.json_name for f in descriptor.fields} | {f.name for f in descriptor.fields}
    doc = {k: v for k, v in params.items() if k in known}
    target: M = message_type()
    try:
        json_format.ParseDict(doc, target, ignore_unknown_fields=lenient_nested)
    except json_format.ParseError as exc:
        raise InvalidParams(
            f"params.{_field_path(exc)} is not valid for {descriptor.name}",
            reason="invalid_params",
        ) from None
    except (ValueError, TypeError, OverflowError, SystemError):
        # protobuf's parser raises these too on some values it cannot convert (upb raised
        # SystemError and OverflowError in fuzzing); the client's params, never our fault.
        raise InvalidParams(
            f"params are not valid for {descriptor.name}", reason="invalid_params"
        ) from None
    return target


def to_json(message: ProtoMessage) -> dict[str, Any]:
    """protobuf-JSON: camelCase member names, enum names, RFC 3339 timestamps."""
    doc: dict[str, Any] = json_format.MessageToDict(message)
    return doc


def agent_message(
    *,
    task_id: str,
    context_id: str,
    key: str,
    text: str | None = None,
    parts: Iterable[Mapping[str, Any]] = (),
    required: bool = False,
) -> dict[str, Any] | None:
    """The agent's message; its id ``<taskId>:<key>`` is stable across retries (CONTRACT §7).

    ``required``: terminal and interrupted outcomes always carry a message, even when the agent
    said nothing, because the push that tells the gateway the turn ended is identified by its
    message id (an empty text part then stands for "no words").
    """
    all_parts = normalise(parts, Part, "part")
    if text is not None and text != "":
        all_parts.insert(0, {"text": text})
    if not all_parts:
        if not required:
            return None
        all_parts = [{"text": ""}]
    return {
        "messageId": f"{task_id}:{key}",
        "contextId": context_id,
        "taskId": task_id,
        "role": "ROLE_AGENT",
        "parts": all_parts,
    }


def normalise(
    docs: Iterable[Mapping[str, Any]], message_type: type[M], what: str
) -> list[dict[str, Any]]:
    """Agent-produced parts/artifacts as protobuf-JSON; ``ValueError`` (no data) if invalid,
    raised before anything is written so a bad agent result never poisons stored tasks."""
    out: list[dict[str, Any]] = []
    for doc in docs:
        try:
            out.append(to_json(json_format.ParseDict(dict(doc), message_type())))
        except (json_format.Error, TypeError, ValueError):
            raise ValueError(f"agent produced an invalid {what}") from None
    return out


def accept_answer(row: TaskRow) -> dict[str, Any]:
    """CONTRACT §5 SendMessage: the Task wrapped under ``task``; id, contextId, status."""
    return {"task": task_doc(row, include_artifacts=False, include_metadata=False)}
