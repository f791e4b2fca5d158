"""The guarded writes a running turn makes (CONTRACT §6; the TASKS/WORKER shared contract).

The state machine's half of the turn writes: which states each write may leave, and the
documents it writes (status, agent message, artifacts, push payload). The writes themselves
are the turn-writes store's (``app.db.turns.TurnWriteStore``): each is one unit of work whose
state change is a single compare-and-set under the turn's fence, and the return value says
whether it applied ("the cancellation verdict is read, not probed"). A refused write means: no
agent call (``mark_working``), no push (``record_progress``, ``finish``). The outbox row of a
push is written in the same unit of work as the change it reports (CONTRACT §7).

Rules enforced in the stores' SQL, not in Python: nothing overwrites ``CANCELED`` (it is
terminal and every guard requires a non-terminal state); a terminal state is never replaced by
another (``finish`` requires ``WORKING``). ``finish`` with the state the task already holds is
a no-op success so a replayed turn is safe (REFERENCE-CASES 77-80, 85).
"""

from __future__ import annotations

from typing import Any

from a2a.types import Artifact

from app.db.engine import Database
from app.db.fence import Fence
from app.db.turns import (
    Finished,
    KnownTask,
    OutcomeRule,
    OutcomeWrite,
    Progress,
    SettleTurn,
    TaskSnapshot,
)
from app.errors import TaskNotFound
from app.security.caller import CallerScope
from app.settings import Settings
from app.tasks import states
from app.tasks.outcome import TurnOutcome, outcome_message_key
from app.tasks.wire import agent_message, normalise, status_doc, utcnow
from app.text import shown
from app.tracing.spans import carrier


class TurnWrites:
    def __init__(self, db: Database, settings: Settings) -> None:
        self._store = db.storage.turn_writes
        self._settings = settings

    async def mark_working(self, scope: CallerScope, task_id: str, fence: Fence) -> bool:
        """SUBMITTED / INPUT_REQUIRED / AUTH_REQUIRED / WORKING → WORKING.

        False: canceled, terminal, or the fence was lost — make no agent call.
        """
        state, status, at = working_values()
        return await self._store.mark_working(
            scope, task_id, fence, allowed=states.RUNNABLE, state=state, status=status, at=at
        )

    async def record_progress(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        *,
        step_key: str,
        text: str,
        context_id: str | None = None,
    ) -> bool:
        """WORKING only: the agent's progress message in ``status.message`` (message id
        ``<taskId>:<step key>``, stable across retries) and its push, one unit of work.
        ``context_id``: the task's, when the caller knows it (saves the store a read)."""

        def compose(context_id: str) -> Progress:
            now = utcnow()
            message = agent_message(task_id=task_id, context_id=context_id, key=step_key, text=text)
            status = status_doc(states.WORKING, now, message)
            push = {"task": {"id": task_id, "contextId": context_id, "status": status}}
            return Progress(status=status, at=now, key=step_key, push=push, trace=carrier())

        return await self._store.record_progress(
            scope,
            task_id,
            fence,
            allowed=states.WORKING_ONLY,
            compose=compose,
            context_id=context_id,
        )

    async def finish(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        outcome: TurnOutcome,
        known: KnownTask | None = None,
    ) -> bool:
        """WORKING → ``outcome.state`` with its message, artifacts and final push, one unit of
        work (FAILED also from SUBMITTED/interrupted). Same terminal state again → True
        (replay); anything else refused. ``known``: the caller's view of the task, which a
        store may write on directly when it is still true (``KnownTask``)."""
        done = await self.finish_and_settle(scope, task_id, fence, outcome, known)
        return done.applied

    async def finish_and_settle(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        outcome: TurnOutcome,
        known: KnownTask | None = None,
        settle: SettleTurn | None = None,
        *,
        seen_history: int | None = None,
    ) -> Finished:
        """``finish``; where the store can, the same unit of work also settles the worker's
        turn and reads the identity's next one when ``settle`` is given
        (``Finished.settled``). Otherwise, and for a replay, the caller settles the turn.
        ``seen_history``: how many history messages the agent read; a task whose history
        holds more is refused with ``Finished.unseen`` (``OutcomeRule.seen_history``)."""
        if outcome.state not in states.OUTCOMES:
            raise ValueError(f"not a turn outcome state: {outcome.state}")
        # The host's final failure must land even for a turn that never reached WORKING
        # (it failed before mark_working); every other outcome comes from a working turn.
        allowed = states.RUNNABLE if outcome.state == states.FAILED else states.WORKING_ONLY
        rule = OutcomeRule(
            outcome.state,
            allowed,
            replay=states.is_terminal(outcome.state),
            seen_history=seen_history,
        )

        def compose(basis: KnownTask) -> OutcomeWrite:
            return compose_outcome(task_id, outcome, basis)

        return await self._store.finish(scope, task_id, fence, rule, compose, known, settle)

    async def load_turn_context(self, scope: CallerScope, task_id: str) -> TaskSnapshot:
        found = await self._store.snapshot(scope, task_id)
        if found is None:
            raise TaskNotFound(f"task '{shown(task_id)}' not found")
        return found


def working_values() -> tuple[str, dict[str, Any], Any]:
    """``mark_working``'s new state, status and time, for the writes that mark a task working
    (also ``app.worker.turn_start``)."""
    now = utcnow()
    return states.WORKING, status_doc(states.WORKING, now), now


def compose_outcome(task_id: str, outcome: TurnOutcome, basis: KnownTask) -> OutcomeWrite:
    """What ``finish`` writes on the task as ``basis`` says it is: the agent's message at
    history position ``basis.next_seq``, the status, the artifacts and the final push.
    ``ValueError`` for an invalid agent part or artifact, before anything is written."""
    now = utcnow()
    key = outcome.message_key or outcome_message_key(outcome.state, basis.next_seq)
    message = agent_message(
        task_id=task_id,
        context_id=basis.context_id,
        key=key,
        text=outcome.text,
        parts=outcome.parts,
        required=True,
    )
    status = status_doc(outcome.state, now, message)
    artifacts = list(basis.artifacts) + normalise(outcome.artifacts, Artifact, "artifact")
    task: dict[str, Any] = {"id": task_id, "contextId": basis.context_id, "status": status}
    if artifacts:
        task["artifacts"] = artifacts
    return OutcomeWrite(
        state=outcome.state,
        status=status,
        at=now,
        artifacts=artifacts,
        message=message,
        key=key,
        push={"task": task},
        trace=carrier(),
    )
