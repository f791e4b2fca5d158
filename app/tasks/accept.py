"""The accept path of ``SendMessage`` (CONTRACT §5, ARCHITECTURE "Durable execution: Accept").

One unit of work of the accept store (``app.db.accepts.AcceptStore``) writes the turn (the
idempotency key and the identity's mailbox), the task, its first history message, the push
config and the actor row, so an answer means the turn is durable. Idempotency rests on
``UNIQUE (tenant, identity, message_id)`` of ``turns``: the turn is inserted first with
``ON CONFLICT DO NOTHING RETURNING``; no row back means a retry (or a concurrent twin)
already won, and we answer with *its* task — never check-then-insert.

Continuation (``message.taskId``): only an interrupted task (``INPUT_REQUIRED`` /
``AUTH_REQUIRED``) takes a new message, and an answer carrying the gateway's HITL response or
timeout part must name the request the task waits on (-32004 otherwise). For ``llm`` tenants a
plain message for a task still ``SUBMITTED``/``WORKING`` is a steering message: written to the
task's history with a ``done`` turn row (its idempotency key), read by the running loop before
its next model call. The task is moved back to ``SUBMITTED`` by a
compare-and-set in the same unit of work that queues the ``resume`` turn, so two answers racing
for one question cannot both resume it, and the accept answer is ``SUBMITTED`` as for a new task.

A new task is refused with HTTP 429 and ``Retry-After`` (``TooManyRequests``: a transport-level
"later" the gateway retries, where a JSON-RPC error would be final for it) while its identity
already has ``EDGE_MAX_QUEUED_TURNS_PER_IDENTITY`` unfinished new-task turns (issue 47, row 3):
one identity cannot queue without bound while the workers serve everyone in turn. The store
counts after the idempotency decision, so a retry of an accepted message still gets its task;
continuations are never counted nor refused (a question's answer must always get through).

A peer agent's turn (CONTRACT §10) carries its sender, from the verified token only: the
turn's payload holds it for the agent and a new task records it in its metadata as
``looping.peer`` (issue 54, provenance); nothing in the message can claim it.

A message with a document (issue 55) is looked up by its key first: a retry is answered
with its task before any document is read again. Then its documents are read (a failure is
``-32005`` and nothing is written) and the turn is stored with the attachments, the history
and the turn's message carrying their bounded descriptions
(``app.attachments.descriptions``). A message without attachments takes none of these steps.

With the tenant setting ``dedupe_message_ids`` off, the turn's key is the message id plus a
random suffix: every message starts a new turn (some test clients reuse message ids).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.agents.hitl_wire import answer_part, pending_request_id
from app.attachments.descriptions import described_message
from app.attachments.reading import DocumentReader, TextDocuments, read_attachments
from app.attachments.stored import DOCUMENT, Attachment
from app.db.accepts import Accepted, NewTurn, QueueFull, Submission
from app.db.documents import RawJson
from app.db.engine import Database
from app.db.push_configs import SealedPush
from app.errors import TooManyRequests, UnsupportedOperation
from app.security.caller import PEER_METADATA_KEY, CallerScope, PeerSender
from app.settings import Settings
from app.tasks import states
from app.tasks.push_configs import PushConfigInput, seal
from app.tasks.push_secrets import PushSecrets
from app.tasks.send_params import SendRequest
from app.tasks.wire import status_doc, utcnow
from app.text import shown
from app.tracing.spans import TENANT, carrier, span

STEERABLE = frozenset({states.SUBMITTED, states.WORKING})

__all__ = ["Accepted", "Acceptor"]


@dataclass(frozen=True)
class QueueBound:
    """At most ``turns`` unfinished new-task turns per identity (None: no bound); a refusal
    asks the client to come back after ``retry_after_seconds``."""

    turns: int | None
    retry_after_seconds: int

    @classmethod
    def from_settings(cls, settings: Settings) -> QueueBound:
        limit = settings.max_queued_turns_per_identity
        return cls(limit or None, settings.queue_full_retry_after_seconds)


UNBOUNDED = QueueBound(None, 1)


@dataclass(frozen=True)
class _TurnSpec:
    dedupe: bool
    identity: dict[str, Any]
    sender: PeerSender | None
    attachments: tuple[Attachment, ...] = ()


class Acceptor:
    def __init__(
        self,
        db: Database,
        secrets: PushSecrets,
        bound: QueueBound = UNBOUNDED,
        documents: DocumentReader | None = None,
    ) -> None:
        self._store = db.storage.accepts
        self._reads = db.storage.task_reads
        self._secrets = secrets
        self._bound = bound
        self._documents = documents or TextDocuments()

    async def accept(
        self,
        scope: CallerScope,
        request: SendRequest,
        *,
        dedupe: bool = True,
        identity: Mapping[str, Any] | None = None,
        sender: PeerSender | None = None,
        steerable: bool = False,
    ) -> Accepted:
        """``identity`` (the verified identity claim) travels in the turn payload for the
        agent; it is not part of the idempotency hash (the key already scopes by identity).
        ``sender``: a peer's turn, from its verified token (``VerifiedCaller.sender``).
        ``steerable``: the tenant's agent takes steering (a plain message for a task still
        running joins its loop instead of being refused)."""
        spec = _TurnSpec(dedupe=dedupe, identity=dict(identity or {}), sender=sender)
        with span("accept", attributes={TENANT: scope.tenant}):
            return await self._accept(scope, request, spec, steerable)

    async def _accept(
        self, scope: CallerScope, request: SendRequest, spec: _TurnSpec, steerable: bool
    ) -> Accepted:
        if request.attachments:
            # A retry is answered before its documents are read again (images need no
            # reading: the store's own idempotency answers their retry).
            if spec.dedupe and any(a.kind == DOCUMENT for a in request.attachments):
                twin = await self._store.twin(scope, request.message_id, request.content_hash)
                if twin is not None:
                    return twin
            attachments = await read_attachments(request.attachments, self._documents)
            spec = replace(spec, attachments=attachments)
        now = utcnow()
        # Continuation (``message.taskId``) and a new task are both SUBMITTED once accepted.
        submission = Submission(states.SUBMITTED, status_doc(states.SUBMITTED, now), now)
        if request.task_id is None:
            return await self._start(scope, request, spec, submission)
        answer = answer_part(request.message)
        if answer is not None:
            await self._check_pending(scope, request.task_id, answer)
        try:
            return await self._store.resume(
                scope,
                self._turn(request, request.task_id, spec),
                task_id=request.task_id,
                context_id=request.context_id,
                resumable=states.INTERRUPTED,
                submission=submission,
                refuse=_not_resumable,
            )
        except UnsupportedOperation as refused:
            if not steerable or answer is not None or refused.reason != "task_not_interrupted":
                raise
        # A plain message for a running llm task: it joins the running loop (steering).
        return await self._store.steer(
            scope,
            self._turn(request, request.task_id, spec),
            task_id=request.task_id,
            context_id=request.context_id,
            steerable=STEERABLE,
            submission=submission,
            refuse=_not_resumable,
        )

    async def _start(
        self, scope: CallerScope, request: SendRequest, spec: _TurnSpec, submission: Submission
    ) -> Accepted:
        task_id = str(uuid.uuid4())
        try:
            return await self._store.start(
                scope,
                self._turn(request, task_id, spec),
                task_id=task_id,
                context_id=request.context_id or str(uuid.uuid4()),
                submission=submission,
                queued_limit=self._bound.turns,
            )
        except QueueFull as full:
            raise TooManyRequests(
                f"{full.limit} turns of this caller are still waiting; retry later",
                retry_after_seconds=self._bound.retry_after_seconds,
                reason="identity_queue_full",
            ) from None

    async def _check_pending(
        self, scope: CallerScope, task_id: str, answer: Mapping[str, Any]
    ) -> None:
        """An answer (HITL response or timeout) must name the request the task waits on:
        anything else is refused (-32004) before it can resume the task. Two answers to one
        request race on the resume's compare-and-set; the loser is refused there."""
        found = await self._reads.get(scope, task_id, 0)
        if found is None:
            return  # the resume answers TaskNotFound
        task = json.loads(found.text) if isinstance(found, RawJson) else found
        pending = pending_request_id(task)
        if pending is None or answer.get("requestId") != pending:
            raise UnsupportedOperation(
                f"task '{shown(task_id)}' is not waiting for an answer to that request",
                reason="hitl_not_pending",
            )

    def _turn(self, request: SendRequest, task_id: str, spec: _TurnSpec) -> NewTurn:
        message = dict(request.message)
        if spec.attachments:
            message = described_message(message, spec.attachments)
        return NewTurn(
            key=_turn_key(request, spec),
            message_id=request.message_id,
            content_hash=request.content_hash,
            payload=_turn_payload(message, request, task_id, spec),
            message=message,
            push=None if request.push is None else self._seal(request.push),
            task_metadata=(
                {} if spec.sender is None else {PEER_METADATA_KEY: spec.sender.to_json()}
            ),
            attachments=spec.attachments,
        )

    def _seal(self, push: PushConfigInput) -> SealedPush:
        return seal(push, self._secrets)


def _turn_key(request: SendRequest, turn: _TurnSpec) -> str:
    return request.message_id if turn.dedupe else f"{request.message_id}#{uuid.uuid4().hex}"


def _turn_payload(
    message: dict[str, Any], request: SendRequest, task_id: str, turn: _TurnSpec
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "message": {**message, "taskId": task_id},
        "identity": turn.identity,
    }
    if turn.sender is not None:
        payload["peer"] = turn.sender.to_json()
    if request.accepted_output_modes:
        payload["acceptedOutputModes"] = list(request.accepted_output_modes)
    # The accept span's context (tracing on): the worker's run continues this trace, in
    # another process or after a takeover (issue 53).
    trace_context = carrier()
    if trace_context is not None:
        payload["traceContext"] = trace_context
    return payload


def _not_resumable(task_id: str, state: str) -> UnsupportedOperation:
    """Why a message for a task that is not waiting for input is refused (A2A §3.1.1)."""
    if states.is_terminal(state):
        return UnsupportedOperation(
            f"task '{task_id}' is in terminal state {state} and cannot be continued",
            reason="task_terminal",
        )
    return UnsupportedOperation(
        f"task '{task_id}' is not waiting for input (state {state})",
        reason="task_not_interrupted",
    )
