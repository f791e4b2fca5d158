"""``SendMessage`` params: validated into one immutable request before anything is written.

CONTRACT §5: the push config is checked first (REFERENCE-CASES 44-48: a gateway that forgot it
learns so whatever else is wrong), then the message. Every refusal is ``-32602`` naming the
field and happens before any task exists.

The ``looping.`` metadata namespace of a message and its parts is the edge's own: it writes
``looping.attachment`` (an attachment's description, ``app.attachments.descriptions``) and
``looping.peer`` (a peer's turn, from its verified token). A client's keys in that namespace
are dropped here, before the content hash and before anything is stored, so no agent can take
a client's part for an attachment's description nor a message for a peer's (as
``looping.peer`` in a message was always ignored, it is not refused either: a client may send
back a message it read from a task's history).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import Message, Role, SendMessageConfiguration, SendMessageRequest
from google.protobuf import json_format

from app.attachments.images import check_attachments
from app.attachments.policy import policy_of
from app.attachments.stored import Incoming
from app.errors import InvalidParams, PayloadTooLarge, TaskNotFound
from app.push_targets import PushTargets
from app.tasks.push_configs import PushConfigInput, validate_push_config
from app.tasks.wire import parse_params, to_json
from app.tenants.registry import TenantRecord

PUSH_PREFIX = "params.configuration.taskPushNotificationConfig"
# Bounds in UTF-8 bytes, not characters: the ids are index keys beside the tenant and the
# identity key, and PostgreSQL refuses a B-tree entry past a fixed byte size.
MAX_MESSAGE_ID = 512
MAX_CONTEXT_ID = 1024
MAX_TASK_ID = 64  # server-generated UUIDs: anything longer names no task of ours
EDGE_NAMESPACE = "looping."  # metadata keys only the edge writes


@dataclass(frozen=True)
class SendRequest:
    # protobuf-JSON Message as received (normalised); an attachment's part without its bytes
    # (they are in ``attachments``, and the history keeps the part's description)
    message: dict[str, Any]
    message_id: str
    task_id: str | None
    context_id: str | None
    push: PushConfigInput | None
    return_immediately: bool
    history_length: int | None
    accepted_output_modes: tuple[str, ...]
    content_hash: str
    # The message's checked inline attachments (tenants that opted in, issue 55): accepted
    # with the turn, described in the history (``app.attachments.descriptions``).
    attachments: tuple[Incoming, ...] = ()


def _object(value: object, field: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidParams(f"params.{field} must be an object")
    return value


def content_hash(message: dict[str, Any], push: PushConfigInput | None) -> str:
    """sha256 of the canonical message and push config: same messageId + other content is a
    conflict, never a second task (CONTRACT §5)."""
    doc = {"message": message, "push": push.canonical() if push else None}
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_message(request: SendMessageRequest, raw: Mapping[str, Any] | None) -> None:
    if raw is None or not request.HasField("message"):
        raise InvalidParams("params.message is required", reason="message_required")
    message = request.message
    if not message.message_id:
        raise InvalidParams("params.message.messageId is required", reason="message_id_required")
    if len(message.message_id.encode()) > MAX_MESSAGE_ID:
        raise InvalidParams(f"params.message.messageId is longer than {MAX_MESSAGE_ID} bytes")
    if "role" not in raw:
        raise InvalidParams("params.message.role is required")
    if message.role != Role.ROLE_USER:
        raise InvalidParams("params.message.role must be ROLE_USER")
    if not message.parts:
        raise InvalidParams("params.message.parts must hold at least one part")
    for index, part in enumerate(message.parts):
        if part.WhichOneof("content") is None:
            raise InvalidParams(f"params.message.parts[{index}] has no content")
    if len(message.context_id.encode()) > MAX_CONTEXT_ID:
        raise InvalidParams(f"params.message.contextId is longer than {MAX_CONTEXT_ID} bytes")
    if len(message.task_id) > MAX_TASK_ID:
        raise TaskNotFound("task not found")


def _without_bytes(message: Message, attachments: list[Incoming]) -> Message:
    """``message`` without its attachments' bytes: they are kept apart (``Incoming.data``),
    never normalised to base64 again nor held twice."""
    if not attachments:
        return message
    bare = Message()
    bare.CopyFrom(message)
    for item in attachments:
        bare.parts[item.index].ClearField("raw")
    return bare


def _hashed(message: dict[str, Any], attachments: list[Incoming]) -> dict[str, Any]:
    """The message the content hash covers: each attachment's part with its bytes' sha256."""
    if not attachments:
        return message
    parts = list(message["parts"])
    for item in attachments:
        parts[item.index] = {
            **parts[item.index],
            "rawSha256": hashlib.sha256(item.data).hexdigest(),
        }
    return {**message, "parts": parts}


def _without_edge_keys(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a message or a part) without client metadata keys in the edge's namespace."""
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or not any(k.startswith(EDGE_NAMESPACE) for k in metadata):
        return doc
    kept = {k: v for k, v in metadata.items() if not k.startswith(EDGE_NAMESPACE)}
    out = {k: v for k, v in doc.items() if k != "metadata"}
    return {**out, "metadata": kept} if kept else out


def _edge_keys_dropped(message: dict[str, Any]) -> dict[str, Any]:
    parts = [_without_edge_keys(p) if isinstance(p, dict) else p for p in message["parts"]]
    return {**_without_edge_keys(message), "parts": parts}


def _check_rest(message: dict[str, Any], attachments: list[Incoming], limit: int) -> None:
    """413 when the message without its attachments passes ``limit`` bytes."""
    at = {a.index for a in attachments}
    rest = {**message, "parts": [p for i, p in enumerate(message["parts"]) if i not in at]}
    size = len(json.dumps(rest, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limit:
        raise PayloadTooLarge(
            f"params.message holds more than {limit} bytes besides its attachments",
            reason="message_too_large",
        )


def _push_config(
    configuration: SendMessageConfiguration, tenant: TenantRecord, targets: PushTargets
) -> PushConfigInput | None:
    """The task's push config, when given or when the tenant requires one."""
    if not (configuration.HasField("task_push_notification_config") or tenant.require_push_config):
        return None
    return validate_push_config(
        configuration.task_push_notification_config,
        prefix=PUSH_PREFIX,
        targets=targets,
        require_token=tenant.require_push_config,
        open_tenant=tenant.is_open,
    )


def _history_length(configuration: SendMessageConfiguration) -> int | None:
    if not configuration.HasField("history_length"):
        return None
    if configuration.history_length < 0:
        raise InvalidParams("params.configuration.historyLength must not be negative")
    return configuration.history_length


def parse_send_message(
    params: Mapping[str, Any],
    *,
    tenant: TenantRecord,
    targets: PushTargets,
    rest_limit: int | None = None,
) -> SendRequest:
    """``targets``: the deployment's push-target rules (``Settings.push_targets``), the same for
    SendMessage and its streaming form. ``rest_limit``: the most a message of a tenant that
    opted in to attachments may hold besides them (``EDGE_MAX_BODY_BYTES``): its raised body
    limit is for the attachments, which the history keeps only as bounded descriptions, so
    the history stays bounded."""
    raw_message = _object(params.get("message"), "message")
    raw_config = _object(params.get("configuration"), "configuration")
    if raw_config is not None:
        for name in ("taskPushNotificationConfig", "task_push_notification_config"):
            _object(raw_config.get(name), f"configuration.{name}")
    request = parse_params(params, SendMessageRequest, lenient_nested=True)
    configuration = request.configuration
    push = _push_config(configuration, tenant, targets)
    _check_message(request, raw_message)
    policy = policy_of(tenant.agent_config)
    attachments = check_attachments(request.message.parts, policy)
    history_length = _history_length(configuration)
    try:
        message = _edge_keys_dropped(to_json(_without_bytes(request.message, attachments)))
    except json_format.Error:
        # e.g. NaN or Infinity in a data part: not representable in protobuf-JSON.
        raise InvalidParams("params.message holds a value protobuf-JSON cannot carry") from None
    if policy.any and rest_limit is not None:
        # The raised limit of an opted-in tenant is for attachments, with or without them.
        _check_rest(message, attachments, rest_limit)
    return SendRequest(
        message=message,
        message_id=request.message.message_id,
        task_id=request.message.task_id or None,
        context_id=request.message.context_id or None,
        push=push,
        return_immediately=configuration.return_immediately,
        history_length=history_length,
        accepted_output_modes=tuple(configuration.accepted_output_modes),
        content_hash=content_hash(_hashed(message, attachments), push),
        attachments=tuple(attachments),
    )
