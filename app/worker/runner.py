"""One turn, from the head of an identity's mailbox to exactly one outcome.

Order of a run (CONTRACT §6; ARCHITECTURE, Durable execution):

1. ``begin_attempt``: the turn is ``running`` and the attempt counted *before* any effect, so a
   worker killed mid-turn leaves a counted attempt behind (the next holder re-runs it); the
   task snapshot is read with it (``turn_start``: one statement on PostgreSQL).
2. Skip what must not run: a task that is gone, terminal, canceled, or already answered by an
   earlier attempt of this turn (crash between ``finish`` and marking the turn ``done``).
3. ``mark_working`` (guarded): ``False`` means canceled, closed or fence lost — no agent call.
   A first attempt on PostgreSQL was marked by step 1's statement already (``turn_start``).
4. The agent runs in its own asyncio task with the turn timeout; the lease keeper may cancel
   it (task canceled, lease lost) and the shutdown path may interrupt it.
5. ``finish`` (guarded) with the agent's outcome; a crash or timeout is retried with backoff
   and, after ``turn_max_attempts``, fails the task with the operator's text (never the
   exception's) and marks the turn ``dead`` so it no longer holds the identity's later turns.

Every write is fenced; after a refused write the runner asks whether it still holds the lease
to tell "task closed" (settle the turn, go on) from "lease lost" (touch nothing, stop). Settling
reads the identity's next due turn in the same statement (``mailbox.settle_and_head``), which
the drain runs next.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanKind

from app.agents.contract import TurnContext, TurnStopped, first_text
from app.agents.envelope import turn_envelope
from app.agents.registry import AgentBuildFailed, AgentRegistry, UnknownAgentKind
from app.attachments.stored import Attachment
from app.db.engine import Database
from app.db.mailbox import ERROR_REFUSED, Lease, QueuedTurn
from app.db.turns import SettleTurn
from app.errors import TaskNotFound
from app.ops.metrics import Metrics
from app.settings import Settings
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.tenants.registry import TenantRecord
from app.tracing.spans import TENANT, span, stored_carrier
from app.worker import turn_start
from app.worker.agent_call import AgentCrash, call_agent, identity_of, message_of, sender_of
from app.worker.roles import Snapshot, Tenants, Writes
from app.worker.step import STOP, Step, Verdict, result_label
from app.worker.watch import TurnWatch

log = logging.getLogger("looping.worker")


# Runs of an agent again in one attempt because a message joined its task after its last look
# (each run takes the new messages; a caller steering without end cannot hold the turn).
LATE_STEERING_RUNS = 8


class _Unseen(Exception):
    """The completion was refused: the task's history holds a message the agent never saw."""


def backoff_seconds(settings: Settings, attempt: int) -> float:
    """``base * 2**(attempt-1)`` with ±25 % jitter so retries of many turns do not align."""
    base = settings.turn_retry_base_seconds * 2 ** max(attempt - 1, 0)
    return float(base * random.uniform(0.75, 1.25))


@dataclass
class TurnRunner:
    db: Database
    settings: Settings
    writes: Writes
    agents: AgentRegistry
    tenants: Tenants
    metrics: Metrics
    clock: Callable[[], float] = time.time
    sessions: Any = None  # the llm agents' session store (app.agents.llm.session.SessionStore)

    async def run(self, lease: Lease, turn: QueuedTurn, watch: TurnWatch) -> Step:
        begun = await turn_start.begin(self.db, lease, turn)
        if not begun.applied:
            return STOP
        attempt = turn.attempts + 1
        run = _TurnRun(self, lease, turn, watch, attempt)
        # Continues the trace of the turn's accept (its context is stored with the turn), in
        # this process or after a takeover of a killed one (issue 53).
        with span(
            "turn.run",
            kind=SpanKind.CONSUMER,
            attributes={TENANT: lease.scope.tenant, "looping_edge.turn.attempt": attempt},
            parent=stored_carrier(turn.payload),
            link_parent=True,
        ):
            step = await run.execute(begun.snapshot, marked=begun.marked)
            # One line per attempt, inside its span: the turn's logs carry its trace id.
            log.info(
                "turn.ran",
                extra={"task_id": turn.task_id, "turn_id": turn.id, "outcome": step.verdict.value},
            )
            return step


class _TurnRun:
    def __init__(
        self, runner: TurnRunner, lease: Lease, turn: QueuedTurn, watch: TurnWatch, attempt: int
    ) -> None:
        self.r = runner
        self.lease = lease
        self.scope = lease.scope
        self.fence = lease.fence
        self.turn = turn
        self.watch = watch
        self.attempt = attempt
        # The task as this run last knew it: the snapshot it started on and the version its
        # own applied writes moved it to (None once a write was refused: read it again).
        self.snapshot: Snapshot | None = None
        self.version: int | None = None
        self.marked = False  # the task is WORKING by this attempt's first statement
        self.seen_history: int | None = None  # history messages the agent has read

    async def execute(self, snapshot: Snapshot | None, *, marked: bool = False) -> Step:
        """``marked``: the statement that began the attempt also marked the task working
        (``turn_start.begin``); ``snapshot`` is from before that."""
        if snapshot is None:
            return await self._settle(states.TURN_DONE)
        self.snapshot, self.version = snapshot, snapshot.version + (1 if marked else 0)
        self.marked = marked
        if snapshot.state == states.CANCELED:
            return await self._settle(states.TURN_CANCELED, result="canceled")
        if snapshot.state in states.TERMINAL or turn_start.already_answered(snapshot, self.turn):
            return await self._settle(states.TURN_DONE)
        tenant = await self.r.tenants.get(self.scope.tenant)
        if self.attempt > self.r.settings.turn_max_attempts or tenant is None:
            # Out of attempts (the last one died with its worker) or the tenant is gone or
            # disabled: no agent call, the task fails with the operator's text.
            return await self._give_up(mark=True)
        try:
            agent = self.r.agents.build(tenant.agent_kind, tenant.agent_config)
        except UnknownAgentKind:
            log.error(
                "turn.unknown_agent_kind",
                extra={"tenant": self.scope.tenant, "agent_kind": tenant.agent_kind},
            )
            return await self._give_up(mark=True)
        except AgentBuildFailed as failed:
            # The tenant's definition is wrong (a python entry that does not import, say):
            # no retry would change that; the operator reads why in the log.
            log.error(
                "turn.agent_build_failed",
                extra={
                    "tenant": self.scope.tenant,
                    "agent_kind": tenant.agent_kind,
                    "reason": str(failed),
                },
            )
            return await self._give_up(mark=True)
        if not self.marked and not await self._mark_working():
            return await self._refused()
        return await self._run_agent(agent, snapshot, tenant)

    async def _run_agent(self, agent: Any, snapshot: Snapshot, tenant: TenantRecord) -> Step:
        """Run the agent and write its outcome. A completion refused because a message joined
        the task after the agent's last look at its history (a steering message, issue 48)
        runs the agent again at once: it resumes from its saved steps and takes the message.
        After ``LATE_STEERING_RUNS`` such runs the outcome is written as it stands."""
        if tenant.agent_kind == "llm":
            # The one kind that takes steering has seen at least the history it started on
            # (``TurnContext.history``), even before it reads the task again.
            self.seen_history = len(snapshot.history)
        runs = 0
        while True:
            try:
                outcome = await call_agent(
                    agent,
                    self._context(snapshot, tenant),
                    self.watch,
                    seconds=self.r.settings.turn_timeout_seconds,
                    message_results=tenant.is_open,
                )
            except AgentCrash as crash:
                return await self._crashed(crash.category)
            except TurnStopped:
                return await self._stopped()
            guarded = outcome.state == states.COMPLETED and runs < LATE_STEERING_RUNS
            try:
                return await self._finish(outcome, self.seen_history if guarded else None)
            except _Unseen:
                runs += 1
                log.info("turn.late_steering", extra={"task_id": self.turn.task_id})

    async def _snapshot(self) -> Snapshot | None:
        try:
            snap: Snapshot | None = await self.r.writes.load_turn_context(
                self.scope, self.turn.task_id
            )
        except TaskNotFound:
            return None  # purged by retention, or never committed: nothing to run
        return snap

    def _context(self, snapshot: Snapshot, tenant: TenantRecord) -> TurnContext:
        message = message_of(self.turn.payload)
        peer = sender_of(self.turn.payload)
        envelope = turn_envelope(first_text(message), peer)
        task_doc = snapshot.task
        return TurnContext(
            tenant=self.scope.tenant,
            identity_key=self.scope.identity,
            identity=identity_of(self.turn.payload),
            task_id=self.turn.task_id,
            context_id=str(task_doc.get("contextId") or message.get("contextId") or ""),
            kind=self.turn.kind,
            message=message,
            history=[dict(m) for m in snapshot.history],
            resume_answer=envelope.text if self.turn.kind == states.TURN_RESUME else None,
            attempt=self.attempt,
            cancelled=self.watch.stop,
            progress_fn=self._progress,
            clock=self.r.clock,
            agent_config=dict(tenant.agent_config),
            sessions=self.r.sessions,
            envelope=envelope,
            read_history=self._read_history,
            peer=peer,
            read_attachments=self._read_attachments,
        )

    async def _read_history(self) -> Sequence[dict[str, Any]]:
        """The task's history as stored now (steering messages accepted since the start).
        What it returns is what the agent has seen: the completion is written only if the
        history holds nothing more (``_run_agent``)."""
        snapshot = await self._snapshot()
        if snapshot is None:
            return []
        self.seen_history = len(snapshot.history)
        return [dict(m) for m in snapshot.history]

    async def _read_attachments(self, message_id: str) -> Sequence[Attachment]:
        """The attachments the task's message ``message_id`` carried (issue 55)."""
        return await self.r.db.storage.attachments.of_message(
            self.scope, self.turn.task_id, message_id
        )

    async def _progress(self, step_key: str, text: str) -> None:
        if self.watch.interrupted:
            raise TurnStopped
        context_id = None if self.snapshot is None else self.snapshot.context_id
        applied = await self.r.writes.record_progress(
            self.scope,
            self.turn.task_id,
            self.fence,
            step_key=step_key,
            text=text,
            context_id=context_id,
        )
        self._wrote(applied)
        if not applied:
            # Canceled or fenced out: the agent must not take another step (CONTRACT §5);
            # ``_refused`` then reads which of the two it was.
            self.watch.stop.set()
            raise TurnStopped

    async def _mark_working(self) -> bool:
        applied = await self.r.writes.mark_working(self.scope, self.turn.task_id, self.fence)
        self._wrote(applied)
        return applied

    def _wrote(self, applied: bool) -> None:
        """Each applied task write bumps ``tasks.version`` by one; after a refused one the
        version is unknown."""
        self.version = self.version + 1 if applied and self.version is not None else None

    async def _finish_and_settle(
        self,
        outcome: TurnOutcome,
        status: str,
        *,
        result: str,
        error: str | None = None,
        seen_history: int | None = None,
    ) -> Step | None:
        """Write the outcome and settle the turn (``status``): one statement on PostgreSQL
        (``TurnWrites.finish_and_settle``), else the write and then ``_settle``. None: the
        write was refused; ``_Unseen``: refused by ``seen_history``."""
        known = None
        if self.snapshot is not None and self.version is not None:
            known = self.snapshot.known(self.version)
        done = await self.r.writes.finish_and_settle(
            self.scope,
            self.turn.task_id,
            self.fence,
            outcome,
            known,
            SettleTurn(self.turn.id, status, error),
            seen_history=seen_history,
        )
        if done.unseen:
            raise _Unseen
        if not done.applied:
            return None
        if not done.settled:
            return await self._settle(status, result=result, error=error)
        self.r.metrics.turns.labels(result).inc()
        return Step(Verdict.NEXT, done.next_head)

    async def _finish(self, outcome: TurnOutcome, seen_history: int | None = None) -> Step:
        label = result_label(outcome.state)
        step = await self._finish_and_settle(
            outcome, states.TURN_DONE, result=label, seen_history=seen_history
        )
        return step if step is not None else await self._refused()

    async def _crashed(self, category: str) -> Step:
        if self.attempt >= self.r.settings.turn_max_attempts:
            return await self._give_up(mark=False, error=category)
        delay = backoff_seconds(self.r.settings, self.attempt)
        if not await self.r.db.storage.mailbox.retry_later(
            self.lease, self.turn.id, delay=delay, error=category
        ):
            return STOP
        self.r.metrics.turns.labels("retry").inc()
        log.info(
            "turn.retry",
            extra={"task_id": self.turn.task_id, "turn_id": self.turn.id, "outcome": "retry"},
        )
        # Release the identity: it is claimable again once the backoff has passed.
        return STOP

    async def _give_up(self, *, mark: bool, error: str | None = None) -> Step:
        """The final failure: task FAILED with the operator's text, turn ``dead`` (poison
        turns never block the identity's later turns)."""
        if mark and not self.marked and not await self._mark_working():
            return await self._refused()
        failed = TurnOutcome(state=states.FAILED, text=self.r.settings.failure_text)
        step = await self._finish_and_settle(failed, states.TURN_DEAD, result="failed", error=error)
        if step is None:
            return await self._refused()
        log.warning("turn.dead", extra={"task_id": self.turn.task_id, "turn_id": self.turn.id})
        return step

    async def _stopped(self) -> Step:
        if self.watch.lost:
            log.warning("turn.lease_lost", extra={"task_id": self.turn.task_id})
            return STOP
        if self.watch.shutdown and not self.watch.canceled:
            await self.r.db.storage.mailbox.give_back(self.lease, self.turn.id)
            return STOP
        return await self._refused()

    async def _refused(self) -> Step:
        """A guarded write did not apply (or the agent was stopped): the task was closed
        (canceled, terminal, waiting for input) or this worker no longer holds the identity.
        Only the former is ours to settle; anything else is retried like a crash."""
        if not await self.r.db.storage.mailbox.still_held(self.lease):
            log.warning("turn.lease_lost", extra={"task_id": self.turn.task_id})
            self.watch.lost = True
            return STOP
        snapshot = await self._snapshot()
        if snapshot is None:
            return await self._settle(states.TURN_DONE)
        if snapshot.state == states.CANCELED:
            return await self._settle(states.TURN_CANCELED, result="canceled")
        if snapshot.state in states.TERMINAL or snapshot.state in states.INTERRUPTED:
            return await self._settle(states.TURN_DONE)
        return await self._crashed(ERROR_REFUSED)

    async def _settle(
        self, status: str, *, result: str | None = None, error: str | None = None
    ) -> Step:
        settled = await self.r.db.storage.mailbox.settle_and_head(
            self.lease, self.turn.id, status, error=error
        )
        if not settled.applied:
            # Fenced out: another worker holds the identity now and owns this turn.
            log.warning("turn.lease_lost", extra={"task_id": self.turn.task_id})
            self.watch.lost = True
            return STOP
        if result is not None:
            self.r.metrics.turns.labels(result).inc()
        return Step(Verdict.NEXT, settled.next_turn)
