"""The delegating turn: rounds until the agent replies or its budget is spent.

Each round the model calls ``final_reply`` (the task completes with its text), ``delegate``
(its ``reply`` is pushed as WORKING progress ``<taskId>:round-<r>:ack``, and the round's
subtasks run concurrently, each in its own subagent; their results come back to the model as
the ``delegate`` call's result in the next round) or ``ask_user`` (the task waits for its
human; the answer is the call's result in the next round, ``asking``). Steering messages that
joined the task meanwhile are taken before each round's model call (``Steering``, as in the
plain loop); one that comes after the final reply makes the worker run the turn again
(completion guarded on the history read), which goes on from the round that replied. A failed
answer is repaired on the same model, then given to the fallback model, then the task fails
with the policy's text (``ladder``). When the rounds or the wall time are spent, the last round
offers only ``final_reply``.

Durable order of a round (a turn taken over after a crash resumes where this one stopped):
the delegate call is saved to the session (``task:<id>:round:<r>:ack``), then the subtask rows
are written (idempotent on task and round), then the acknowledgement is pushed while every row
is still pending, then the subtasks run, then their results are saved
(``task:<id>:round:<r>:results``). A resumed round finds the rows and runs only the subtasks
without an outcome; the final reply is saved once (``task:<id>:reply:final``; a later one,
after steering, ``task:<id>:reply:<n>``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)

from app.agents.contract import (
    AgentFailure,
    AgentQuestion,
    AgentReply,
    AgentResult,
    TurnContext,
    TurnStopped,
)
from app.agents.llm import compaction, history
from app.agents.llm.attachments import user_part
from app.agents.llm.config import LlmConfig
from app.agents.llm.delegation import asking, control
from app.agents.llm.delegation.config import DelegationConfig
from app.agents.llm.delegation.ladder import Ladder
from app.agents.llm.delegation.prompt import system_prompt
from app.agents.llm.delegation.subtasks import RoundSubtasks
from app.agents.llm.events import EventBus, TurnEnded, TurnStarted
from app.agents.llm.model_calls import ModelCaller, ModelUnavailable
from app.agents.llm.plugins import maybe_await
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.session import SessionEntry, message_of
from app.agents.llm.steering import Steering
from app.agents.llm.turn_session import TurnSession
from app.db import subtasks as st
from app.db.subtasks import Subtask, SubtaskScope

log = logging.getLogger("looping.agent")


class DelegatingTurn:
    def __init__(self, config: LlmConfig, runtime: LlmRuntime, ctx: TurnContext) -> None:
        assert config.delegation is not None
        self.config = config
        self.delegation: DelegationConfig = config.delegation
        self.policy = config.delegation.policy
        self.runtime = runtime
        self.ctx = ctx
        self.prefix = f"task:{ctx.task_id}:"
        self.scope = SubtaskScope(ctx.tenant, ctx.identity_key, ctx.task_id)
        self.store = runtime.subtasks
        subscribers = [runtime.metrics.on_event] if runtime.metrics is not None else []
        self.events = EventBus(*subscribers, *runtime.subscribers)
        self.callers: list[ModelCaller] = []
        self.ladder = Ladder(config, self._caller)
        self.subtasks = RoundSubtasks(config, runtime, ctx, self._caller(config), self._push)
        sessions = ctx.sessions if ctx.sessions is not None else runtime.sessions
        self.session = TurnSession(sessions.transcript(ctx.tenant, ctx.identity_key), ctx.task_id)
        self.steering = Steering(config, ctx, self.session)
        self.begun = ctx.clock()
        self.pushes = asyncio.Lock()  # progress writes one at a time, in order

    def _caller(self, config: LlmConfig) -> ModelCaller:
        caller = ModelCaller(
            config,
            self.runtime.environ,
            self.events,
            sleep=self.runtime.sleep,
            cancelled=self.ctx.cancelled,
            http_client=self.runtime.http_client,
        )
        self.callers.append(caller)
        return caller

    async def run(self) -> AgentResult:
        if not await self._gates_pass():
            await self.events.emit(TurnEnded(self.ctx.task_id, "gated"))
            return AgentReply()
        await self.session.reload()
        await self.events.emit(TurnStarted(self.ctx.task_id, resumed=bool(self.session.own())))
        outcome = "failed"
        try:
            result = await self._rounds()
            outcome = _outcome(result)
            return result
        except (TurnStopped, asyncio.CancelledError):
            outcome = "stopped"
            raise
        finally:
            self.subtasks.stop()
            for caller in self.callers:
                await caller.aclose()
            await self.events.emit(TurnEnded(self.ctx.task_id, outcome))

    # --- rounds ---------------------------------------------------------------------------

    async def _rounds(self) -> AgentResult:
        answered = self._answered()
        if answered is not None and not await self.steering.waits():
            return AgentReply(text=answered)
        await self._take_message()
        for round_no in range(1, self.delegation.max_rounds + 1):
            self._stop_if_cancelled()
            if self._entry(f"round:{round_no}:results") is not None:
                continue
            asked = self._entry(asking.ask_suffix(round_no))
            if asked is not None:  # run again before the answer came: the same question
                return asking.question(asked, self.ctx.task_id, round_no)
            started = await self._start_round(round_no)
            if not isinstance(started, tuple):
                return started
            call, rows = started
            rows = await self.subtasks.run(round_no, rows)
            results = ToolReturnPart(
                control.DELEGATE, self.subtasks.results(rows), call.tool_call_id
            )
            await self._save(f"round:{round_no}:results", ModelRequest(parts=[results]))
        return AgentFailure(self.policy.task_failed)  # not reached: the last round only replies

    async def _start_round(self, round_no: int) -> AgentResult | tuple[ToolCallPart, list[Subtask]]:
        """The round's delegate call and rows: recovered when a run before this one got as far
        as saving them, else decided now (a final reply ends the turn here)."""
        ack = self._entry(f"round:{round_no}:ack")
        rows = await self.store.round(self.scope, round_no)
        if ack is None and not rows:
            decision = await self._decide(round_no)
            if decision is None:
                return AgentFailure(self.policy.task_failed)
            self._stop_if_cancelled()  # checked again before anything is saved
            if isinstance(decision, control.FinalReply):
                await self._save(
                    self._reply_suffix(), ModelResponse(parts=[TextPart(decision.text)])
                )
                return AgentReply(text=decision.text)
            if isinstance(decision, control.Ask):
                call_at = asking.at(self.ctx.clock())
                await self._save(
                    asking.ask_suffix(round_no),
                    ModelResponse(parts=[decision.call], timestamp=call_at),
                )
                saved = self._entry(asking.ask_suffix(round_no))
                assert saved is not None
                return asking.question(saved, self.ctx.task_id, round_no)
            call, reply = decision.call, decision.reply
            at = asking.at(self.ctx.clock())
            await self._save(f"round:{round_no}:ack", ModelResponse(parts=[call], timestamp=at))
            rows = await self.store.create_round(self.scope, round_no, decision.subtasks)
        elif ack is not None:
            call = history.calls_of(message_of(ack))[0]
            reply = control.reply_of(call) or self.policy.recovered_reply
            if not rows:
                rows = await self.store.create_round(
                    self.scope, round_no, control.subtasks_of(call)
                )
        else:
            call = _recovered_call(round_no, rows, self.policy.recovered_reply)
            reply = self.policy.recovered_reply
            at = asking.at(self.ctx.clock())
            await self._save(f"round:{round_no}:ack", ModelResponse(parts=[call], timestamp=at))
        if all(row.status == st.PENDING for row in rows):
            await self._push(f"round-{round_no}:ack", reply)
        return call, rows

    async def _decide(self, round_no: int) -> control.Decision | None:
        await self.steering.take()
        await self._compact()
        elapsed = self.ctx.clock() - self._started() - self._waited()
        final = (
            round_no >= self.delegation.max_rounds or elapsed >= self.delegation.max_wall_seconds
        )
        system = system_prompt(
            self.config, self.runtime.plugins.capabilities(), self.ctx.clock(), final=final
        )
        messages = history.for_model(system, self.session.loaded)
        return await self.ladder.decide(messages, final=final)

    # --- session, progress ----------------------------------------------------------------

    async def _compact(self) -> None:
        """The caller's session within ``session_max_tokens``, as the plain loop keeps it
        (``compaction``): older tasks summarised into one entry, never this task's own."""
        entries = self.session.entries
        gone = compaction.displaced(
            entries, self.prefix.rstrip(":"), self.config.session_max_tokens
        )
        if not gone:
            return
        messages = [message_of(e) for e in gone]
        summary = None
        try:
            response = await self.subtasks.pair.request(compaction.summary_request(messages), None)
            text = compaction.response_text(response)
            if text:
                summary = compaction.summary_entry(text, int(self.ctx.clock() * 1000))
        except ModelUnavailable:
            log.warning("agent.compaction_dropped", extra={"task_id": self.ctx.task_id})
        await self.session.transcript.replace([e.id for e in gone], summary)
        await self.session.reload()

    def _entry(self, suffix: str) -> SessionEntry | None:
        return self.session.entry(suffix)

    async def _save(self, suffix: str, message: ModelRequest | ModelResponse) -> None:
        await self.session.save(suffix, message)

    async def _take_message(self) -> None:
        """The turn's message joins the session once: as the answer to the round that asked
        (``round:<r>:results``), or as a user message (``task:<id>:user:<messageId>``)."""
        message_id = str(self.ctx.message.get("messageId") or f"turn-{self.ctx.attempt}")
        if self.session.applied(message_id):
            return
        pending = self._pending_ask()
        if pending is not None:
            round_no, asked = pending
            answer = asking.answer(asked, self.ctx, message_id)
            await self._save(f"round:{round_no}:results", answer)
            return
        # The message's attachments reach the coordinator's model as in the plain loop
        # (images, or a note without vision; documents as framed text); subagents get only
        # the prompts the coordinator writes them, never the attachments (isolation).
        ctx = self.ctx
        turn = await user_part(ctx.turn.for_model(), ctx.message, ctx.read_attachments, self.config)
        live = None if turn.live is turn.kept else ModelRequest(parts=[turn.live])
        await self.session.save(f"user:{message_id}", ModelRequest(parts=[turn.kept]), live=live)

    def _pending_ask(self) -> tuple[int, SessionEntry] | None:
        """The round whose question has no answer yet (at most one: the rounds stop there)."""
        for round_no in range(1, self.delegation.max_rounds + 1):
            asked = self._entry(asking.ask_suffix(round_no))
            if asked is not None and self._entry(f"round:{round_no}:results") is None:
                return round_no, asked
        return None

    def _answered(self) -> str | None:
        """The task's reply when a run before this one gave it: the last one saved, if nothing
        followed it (a steering message taken since is followed by a later reply)."""
        if self._entry("reply:final") is None:
            return None
        last = self.session.own()[-1].message
        if isinstance(last, ModelResponse) and not history.calls_of(last):
            return compaction.response_text(last)
        return None

    def _reply_suffix(self) -> str:
        """``reply:final`` for the task's first reply; ``reply:<n>`` (n from 2) for a later
        one, given after a steering message that came after the first."""
        if self._entry("reply:final") is None:
            return "reply:final"
        replies = [e for e in self.session.own() if e.entry_id.startswith(self.prefix + "reply:")]
        return f"reply:{len(replies) + 1}"

    def _waited(self) -> float:
        """Seconds spent waiting for the human's answers (not the rounds' working time)."""
        total = 0.0
        for round_no in range(1, self.delegation.max_rounds + 1):
            asked = self._entry(asking.ask_suffix(round_no))
            answered = self._entry(f"round:{round_no}:results")
            if asked is not None and answered is not None:
                total += asking.waited(message_of(asked), message_of(answered))
        return total

    def _started(self) -> float:
        """When the task's rounds began: the first round's acknowledgement or question, saved
        with its time (a turn taken over keeps counting from there), else this run's start."""
        first = self._entry("round:1:ack") or self._entry(asking.ask_suffix(1))
        if first is None:
            return self.begun
        message = message_of(first)
        return message.timestamp.timestamp() if isinstance(message, ModelResponse) else self.begun

    async def _push(self, step_key: str, text: str) -> None:
        async with self.pushes:
            self._stop_if_cancelled()
            await self.ctx.progress(step_key, text)

    async def _gates_pass(self) -> bool:
        """The plugins' ``should_handle_turn`` gates, AND-ed; one that raises counts as yes."""
        for plugin, gate in self.runtime.plugins.hooks("should_handle_turn"):
            try:
                if await maybe_await(gate(self.ctx)) is False:
                    return False
            except Exception as exc:
                log.warning(
                    "agent.plugin_gate_failed",
                    extra={"plugin": plugin.key, "outcome": type(exc).__name__},
                )
        return True

    def _stop_if_cancelled(self) -> None:
        if self.ctx.cancelled.is_set():
            raise TurnStopped


def _outcome(result: AgentResult) -> str:
    if isinstance(result, AgentReply):
        return "completed"
    return "question" if isinstance(result, AgentQuestion) else "failed"


def _recovered_call(round_no: int, rows: Sequence[Subtask], reply: str) -> ToolCallPart:
    """A round's delegate call rebuilt from its rows (its saved call was lost)."""
    subtasks = [{"type": r.type, "prompt": r.prompt, "params": dict(r.params)} for r in rows]
    args = {"reply": reply, "subtasks": subtasks}
    return ToolCallPart(control.DELEGATE, args, f"round-{round_no}")
