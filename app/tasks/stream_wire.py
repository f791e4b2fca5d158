"""The wire form of a task's logged events: ``StreamResponse`` status and artifact updates
(A2A 1.0 §3.2.3, §4.2), encoded once for every stream of this process that reads the event.

The streams of one process that follow a task share their reads of its log (``SharedReads``),
so they hold the same ``LoggedEvent`` objects; the first stream to send an update builds its
JSON text, and the others reuse it: N streams of a task cost one conversion per update, not N.
The text goes out as ``RawJson``, spliced into each stream's own response (its JSON-RPC id,
the bare ``StreamResponse`` on HTTP+JSON, a protobuf message on gRPC).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import StreamResponse, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from google.protobuf import json_format

from app.db.documents import RawJson
from app.db.task_events import TaskEvent


class LoggedEvent:
    """One event of a task's log and, made on first use, its updates as JSON text."""

    __slots__ = ("_artifacts", "_status", "event")

    def __init__(self, event: TaskEvent) -> None:
        self.event = event
        self._status: RawJson | None = None
        self._artifacts: dict[int, RawJson] = {}

    def status_update(self, task_id: str, context_id: str) -> RawJson:
        """The event's status as a ``statusUpdate`` of the task (the same task for every
        stream that holds this event)."""
        if self._status is None:
            update = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id)
            json_format.ParseDict(self.event.status, update.status, ignore_unknown_fields=True)
            self._status = _text(StreamResponse(status_update=update))
        return self._status

    def artifact_update(self, index: int, task_id: str, context_id: str) -> RawJson:
        """The event's ``index``-th artifact, whole (append false: a replacement, A2A §4.2.2),
        as an ``artifactUpdate``."""
        done = self._artifacts.get(index)
        if done is None:
            artifact = (self.event.artifacts or ())[index]
            update = TaskArtifactUpdateEvent(
                task_id=task_id, context_id=context_id, last_chunk=True
            )
            json_format.ParseDict(artifact, update.artifact, ignore_unknown_fields=True)
            done = self._artifacts[index] = _text(StreamResponse(artifact_update=update))
        return done


def logged(events: list[TaskEvent]) -> list[LoggedEvent]:
    return [LoggedEvent(event) for event in events]


def _text(message: StreamResponse) -> RawJson:
    doc: dict[str, Any] = json_format.MessageToDict(message)
    return RawJson(json.dumps(doc, separators=(",", ":"), ensure_ascii=False))
