"""Task streams: SendStreamingMessage and SubscribeToTask (A2A 1.0 §3.1.2, §3.1.6, §3.2.3).

A stream's first event is the Task, then every status and artifact update in order, and it
ends after a terminal or interrupted state (INPUT_REQUIRED, AUTH_REQUIRED); a SubscribeToTask
stream goes on through interruptions to a terminal state (A2A §3.1.6). Events come from
the task's event log in the database (``app.db.task_events``), never from this process's
memory, so a stream on any process sees the work of a worker on any other; the log is read a
bounded batch at a time when its task changed (``TaskEventWakeups``) or a poll comes due, so a
slow reader holds one batch, whatever the backlog.

Bounds: open streams per caller and per process (``StreamSlots``), taken before anything is
read or accepted and given back when the stream ends for any reason (the client went away
included).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from app.db.documents import RawJson
from app.db.signals import TaskEventWakeups, Wakeup
from app.db.task_events import EventHead, TaskEventStore
from app.errors import TaskNotFound, TooManyStreams, UnsupportedOperation
from app.rpc.context import StreamResult
from app.security.caller import CallerScope
from app.tasks.states import INTERRUPTED, TERMINAL
from app.tasks.stream_wire import LoggedEvent, logged
from app.text import shown

# Events read per query: what one stream holds in memory at most.
BATCH = 64

Release = Callable[[], None]


class StreamSlots:
    """Open streams per caller ``(tenant, identity)`` and in this process."""

    def __init__(self, *, per_identity: int, per_process: int) -> None:
        self._per_identity = per_identity
        self._per_process = per_process
        self._open: Counter[tuple[str, str]] = Counter()
        self._total = 0

    @property
    def open_streams(self) -> int:
        return self._total

    def acquire(self, scope: CallerScope) -> Release:
        """Take a slot, or ``TooManyStreams``; the returned function gives it back (once)."""
        key = (scope.tenant, scope.identity)
        if self._total >= self._per_process:
            raise TooManyStreams(
                "too many open streams on this server; retry later or use push notifications",
                metadata={"limit": str(self._per_process), "scope": "process"},
            )
        if self._open[key] >= self._per_identity:
            raise TooManyStreams(
                f"too many open streams for this caller (at most {self._per_identity})",
                metadata={"limit": str(self._per_identity), "scope": "identity"},
            )
        self._open[key] += 1
        self._total += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._total -= 1
            self._open[key] -= 1
            if self._open[key] <= 0:
                del self._open[key]

        return release


_ReadKey = tuple[str, str, str]


class SharedReads:
    """One read of a task's log for all of this process's streams at the same position.

    Streams that follow one task wake together and ask for the same batch: the first asks the
    database, the others share its answer, as long as no notification for the task was heard
    since that read began (``TaskEventWakeups.generation``: a later commit may be missing from
    it). Where nothing is heard, every stream reads for itself. Only the newest read per task
    is kept, and dropped with the task's last stream. The streams sharing a read share its
    events' encoded updates too (``app.tasks.stream_wire``).
    """

    def __init__(self, store: TaskEventStore, wakeups: TaskEventWakeups) -> None:
        self._store = store
        self._wakeups = wakeups
        self._reads: dict[_ReadKey, tuple[Any, int, asyncio.Future[list[LoggedEvent]]]] = {}

    async def after(self, scope: CallerScope, task_id: str, seq: int) -> list[LoggedEvent]:
        generation = self._wakeups.generation(scope.tenant, task_id)
        if generation is None:
            return await self._read(scope, task_id, seq)
        key = (scope.tenant, scope.identity, task_id)
        kept = self._reads.get(key)
        if kept is not None and kept[0] == generation and kept[1] == seq:
            # Shielded: one stream going away must not cancel the read the others await.
            shared: list[LoggedEvent] = await asyncio.shield(kept[2])
            return shared
        read = asyncio.ensure_future(self._read(scope, task_id, seq))
        self._reads[key] = (generation, seq, read)
        try:
            own: list[LoggedEvent] = await asyncio.shield(read)
        except Exception:
            kept = self._reads.get(key)
            if kept is not None and kept[2] is read:
                del self._reads[key]
            raise
        return own

    async def _read(self, scope: CallerScope, task_id: str, seq: int) -> list[LoggedEvent]:
        return logged(await self._store.after(scope, task_id, seq, BATCH))

    def forget(self, scope: CallerScope, task_id: str) -> None:
        """Drop the kept read once no stream of this process follows the task."""
        if not self._wakeups.watching(scope.tenant, task_id):
            self._reads.pop((scope.tenant, scope.identity, task_id), None)


@dataclass(frozen=True)
class StreamTiming:
    poll_seconds: float


def ends_stream(status: dict[str, Any], *, at_interruption: bool = True) -> bool:
    state = status.get("state")
    return state in TERMINAL or (at_interruption and state in INTERRUPTED)


class TaskStreams:
    """Opens streams on the caller's tasks; every read takes ``scope`` (-32001 otherwise)."""

    def __init__(
        self,
        store: TaskEventStore,
        wakeups: TaskEventWakeups,
        slots: StreamSlots,
        timing: StreamTiming,
    ) -> None:
        self._store = store
        self._wakeups = wakeups
        self._reads = SharedReads(store, wakeups)
        self.slots = slots
        self._timing = timing

    async def open(
        self,
        scope: CallerScope,
        task_id: str,
        read_task: Callable[[], Any],
        *,
        release: Release,
        refuse_terminal: bool,
        from_creation: bool = False,
    ) -> StreamResult:
        """The stream of ``task_id``, its slot ``release`` given back when it ends; errors
        (-32001, and -32004 for a terminal task to subscribe to, A2A §3.1.6) are raised here,
        before the first event. ``read_task`` reads the full Task (with history). A stream
        that refuses a terminal task (SubscribeToTask) ends only at a terminal state, A2A
        §3.1.6; the others end at an interruption too. ``from_creation``: the stream of the
        call that created the task starts at its creation (first Task SUBMITTED, every later
        change replayed), however far a worker has taken it meanwhile."""
        wakeup, unwatch = self._wakeups.watch(scope.tenant, task_id)
        try:
            # Watching first: a change committed after this read wakes the stream.
            read_head = self._store.first if from_creation else self._store.head
            head = await read_head(scope, task_id)
            if head is None:
                raise TaskNotFound(f"task '{shown(task_id)}' not found")
            if refuse_terminal and head.status.get("state") in TERMINAL:
                raise UnsupportedOperation(
                    f"task '{shown(task_id)}' is in a terminal state; GetTask reads it",
                    reason="task_terminal",
                )
            task: dict[str, Any] = await read_task()
        except BaseException:
            unwatch()
            release()
            raise

        def done() -> None:
            unwatch()
            self._reads.forget(scope, task_id)
            release()

        follower = _Follower(self._reads, scope, task_id, head, self._timing.poll_seconds)
        follower.at_interruption = not refuse_terminal
        return StreamResult(follower.events(_first_task(task, head), wakeup), done)


def _first_task(task: dict[str, Any], head: EventHead) -> dict[str, Any]:
    """The Task as of the log position the stream continues from: status and artifacts from
    the head (one snapshot with the position), the rest (history, metadata) as read."""
    first = {**task, "status": head.status}
    if head.artifacts:
        first["artifacts"] = head.artifacts
    else:
        first.pop("artifacts", None)
    return first


class _Follower:
    """Reads one task's log on from a head and turns it into StreamResponse results."""

    def __init__(
        self,
        reads: SharedReads,
        scope: CallerScope,
        task_id: str,
        head: EventHead,
        poll_seconds: float,
    ) -> None:
        self._reads = reads
        self._scope = scope
        self._task_id = task_id
        self._context_id = head.context_id
        self._seq = head.seq
        self._status = head.status
        self._artifacts = {_artifact_id(a): a for a in head.artifacts}
        self._poll = poll_seconds
        self.at_interruption = True  # SubscribeToTask: False, on to a terminal state

    async def events(
        self, first: dict[str, Any], wakeup: Wakeup
    ) -> AsyncGenerator[list[dict[str, Any] | RawJson], None]:
        """The Task, then the updates of each read together (a stream that fell behind sends
        what it read in one write), up to the one that ends the stream."""
        yield [{"task": first}]
        if ends_stream(self._status, at_interruption=self.at_interruption):
            return
        while True:
            batch = await self._reads.after(self._scope, self._task_id, self._seq)
            results: list[dict[str, Any] | RawJson] = []
            for event in batch:
                self._seq = event.event.seq
                results += self._changes(event)
                if ends_stream(self._status, at_interruption=self.at_interruption):
                    if results:
                        yield results
                    return
            if results:
                yield results
            if len(batch) < BATCH:
                await wakeup.wait(self._poll)

    def _changes(self, item: LoggedEvent) -> list[RawJson]:
        """Artifact updates first (a final status ends the stream), then the status update;
        which ones this stream sends is its own view (what it has sent), their text shared."""
        event, task_id, context_id = item.event, self._task_id, self._context_id
        results = []
        for index, artifact in enumerate(event.artifacts or ()):
            key = _artifact_id(artifact)
            if self._artifacts.get(key) != artifact:
                self._artifacts[key] = artifact
                results.append(item.artifact_update(index, task_id, context_id))
        if event.status != self._status:
            self._status = event.status
            results.append(item.status_update(task_id, context_id))
        return results


def _artifact_id(artifact: Any) -> str:
    return str(artifact.get("artifactId", "")) if isinstance(artifact, dict) else ""
