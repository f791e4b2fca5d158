"""The delegating turn: rounds until the agent replies or its budget is spent.

Each round the model calls ``final_reply`` (the task completes with its text) or ``delegate``
(its ``reply`` is pushed as WORKING progress ``<taskId>:round-<r>:ack``, and the round's
subtasks run concurrently, each in its own subagent; their results come back to the model as
the ``delegate`` call's result in the next round). A failed answer is repaired on the same
model, then given to the fallback model, then the task fails with the policy's text
(``ladder``). When the rounds or the wall time are spent, the last round offers only
``final_reply``.

Durable order of a round (a turn taken over after a crash resumes where this one stopped):
the delegate call is saved to the session (``task:<id>:round:<r>:ack``), then the subtask rows
are written (idempotent on task and round), then the acknowledgement is pushed while every row
is still pending, then the subtasks run, then their results are saved
(``task:<id>:round:<r>:results``). A resumed round finds the rows and runs only the subtasks
without an outcome; the final reply is saved once (``task:<id>:reply:final``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from app.agents.contract import AgentFailure, AgentReply, AgentResult, TurnContext, TurnStopped
from app.agents.llm import compaction, history
from app.agents.llm.batch import cut
from app.agents.llm.config import LlmConfig
from app.agents.llm.delegation import control
from app.agents.llm.delegation.config import DelegationConfig, Recipe, recipe_tools
from app.agents.llm.delegation.fingerprint import fingerprint
from app.agents.llm.delegation.ladder import Ladder
from app.agents.llm.delegation.prompt import system_prompt
from app.agents.llm.delegation.subagent import Subagent
from app.agents.llm.events import EventBus, TurnEnded, TurnStarted
from app.agents.llm.model_calls import ModelCaller, ModelUnavailable
from app.agents.llm.plugins import maybe_await
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.session import SessionEntry, Transcript, entry_of, message_of
from app.agents.llm.tools import Tool, ToolContext
from app.db import subtasks as st
from app.db.subtasks import Subtask, SubtaskScope

log = logging.getLogger("looping.agent")

MISMATCH = "error: request fingerprint mismatch (a different request under this subtask id)"


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
        self.pair = self._caller(config)  # subagents: the host's model and fallback
        sessions = ctx.sessions if ctx.sessions is not None else runtime.sessions
        self.transcript: Transcript = sessions.transcript(ctx.tenant, ctx.identity_key)
        self.entries: dict[str, SessionEntry] = {}
        self.loaded: list[history.Loaded] = []
        self.begun = ctx.clock()
        self.pushes = asyncio.Lock()  # progress writes one at a time, in order
        self.pushing: asyncio.Task[None] | None = None  # the subtasks' writes, chained
        self.recipe_tools: dict[str, dict[str, Tool]] = {}

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
        await self._reload()
        resumed = any(key.startswith(self.prefix) for key in self.entries)
        await self.events.emit(TurnStarted(self.ctx.task_id, resumed=resumed))
        outcome = "failed"
        try:
            result = await self._rounds()
            outcome = "completed" if isinstance(result, AgentReply) else "failed"
            return result
        except (TurnStopped, asyncio.CancelledError):
            outcome = "stopped"
            raise
        finally:
            if self.pushing is not None and not self.pushing.done():
                self.pushing.cancel()
            for caller in self.callers:
                await caller.aclose()
            await self.events.emit(TurnEnded(self.ctx.task_id, outcome))

    # --- rounds ---------------------------------------------------------------------------

    async def _rounds(self) -> AgentResult:
        final = self._entry("reply:final")
        if final is not None:
            saved = message_of(final)
            text = compaction.response_text(saved) if isinstance(saved, ModelResponse) else ""
            return AgentReply(text=text)
        await self._take_message()
        for round_no in range(1, self.delegation.max_rounds + 1):
            self._stop_if_cancelled()
            if self._entry(f"round:{round_no}:results") is not None:
                continue
            started = await self._start_round(round_no)
            if not isinstance(started, tuple):
                return started
            call, rows = started
            rows = await self._execute(round_no, rows)
            results = ToolReturnPart(control.DELEGATE, self._results(rows), call.tool_call_id)
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
                await self._save("reply:final", ModelResponse(parts=[TextPart(decision.text)]))
                return AgentReply(text=decision.text)
            call, reply = decision.call, decision.reply
            await self._save(f"round:{round_no}:ack", ModelResponse(parts=[call]))
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
            await self._save(f"round:{round_no}:ack", ModelResponse(parts=[call]))
        if all(row.status == st.PENDING for row in rows):
            await self._push(f"round-{round_no}:ack", reply)
        return call, rows

    async def _decide(self, round_no: int) -> control.Decision | None:
        await self._compact()
        elapsed = self.ctx.clock() - self._started()
        final = (
            round_no >= self.delegation.max_rounds or elapsed >= self.delegation.max_wall_seconds
        )
        system = system_prompt(
            self.config, self.runtime.plugins.capabilities(), self.ctx.clock(), final=final
        )
        messages = history.for_model(system, self.loaded)
        return await self.ladder.decide(messages, final=final)

    # --- subtasks -------------------------------------------------------------------------

    async def _execute(self, round_no: int, rows: Sequence[Subtask]) -> list[Subtask]:
        open_rows = [row for row in rows if row.status in st.OPEN]
        if open_rows:
            try:
                async with asyncio.TaskGroup() as group:
                    for row in open_rows:
                        group.create_task(self._branch(row))
            except* TurnStopped:
                raise TurnStopped from None
        await self._pushed()
        return await self.store.round(self.scope, round_no)

    async def _branch(self, row: Subtask) -> None:
        """One subtask to its outcome; a failure is the subtask's, never the round's."""
        recipe = self.delegation.recipe(row.type)
        if recipe is None:  # the tenant's recipes changed under a running task
            await self.store.fail(self.scope, row.ordinal, f"error: no recipe '{row.type}'")
            return
        fp = fingerprint(self.ctx.task_id, row.ordinal, recipe, row.prompt, row.params)
        if row.status == st.PENDING:
            if not await self.store.start(self.scope, row.ordinal, fp):
                return
            self._push_soon(
                f"subtask-{row.ordinal}:start", f"subtask {row.ordinal} ({row.type}): running"
            )
        elif row.fingerprint != fp:
            log.warning(
                "delegation.fingerprint_mismatch",
                extra={"task_id": self.ctx.task_id, "subtask": row.ordinal},
            )
            await self.store.fail(self.scope, row.ordinal, MISMATCH)
            return
        saved = list(row.steps) if row.status == st.RUNNING else []

        async def save(steps: Sequence[dict[str, Any]]) -> None:
            await self.store.save_steps(self.scope, row.ordinal, steps)

        outcome = await self._subagent(recipe, row.ordinal).run(row.prompt, row.params, saved, save)
        if outcome.completed:
            done = await self.store.complete(self.scope, row.ordinal, outcome.text)
        else:
            done = await self.store.fail(self.scope, row.ordinal, outcome.text)
        if done:
            status = st.COMPLETED if outcome.completed else st.FAILED
            self._push_soon(
                f"subtask-{row.ordinal}:end", f"subtask {row.ordinal} ({row.type}): {status}"
            )

    def _subagent(self, recipe: Recipe, ordinal: int) -> Subagent:
        tools = self.recipe_tools.get(recipe.key)
        if tools is None:
            installed = self.runtime.plugins.tools
            names = recipe_tools(recipe, set(installed))
            tools = self.recipe_tools[recipe.key] = {n: installed[n] for n in names}

        def context_for(call: ToolCallPart, tool: Tool) -> ToolContext:
            key = f"{self.ctx.task_id}:subtask-{ordinal}:{call.tool_call_id}"
            return self.runtime.plugins.tool_context(self.ctx, call.tool_call_id, tool, key)

        return Subagent(
            recipe=recipe,
            limits=recipe.limits_over(self.delegation.subagent_limits),
            tools=tools,
            plugins=self.runtime.plugins,
            caller=self.pair,
            tool_timeout_seconds=self.config.tool_timeout_seconds,
            max_tool_output_bytes=self.config.max_tool_output_bytes,
            context_for=context_for,
            clock=self.ctx.clock,
        )

    def _results(self, rows: Sequence[Subtask]) -> str:
        """The round's outcomes for the model, in ordinal order, each cut to
        ``max_tool_output_bytes``; the policy's partial note when one did not complete."""
        items = []
        for row in rows:
            status, result = row.status, row.result
            recipe = self.delegation.recipe(row.type)
            if status == st.COMPLETED and (
                recipe is None
                or row.fingerprint
                != fingerprint(self.ctx.task_id, row.ordinal, recipe, row.prompt, row.params)
            ):
                status, result = st.FAILED, MISMATCH
            items.append(
                {
                    "subtask": row.ordinal,
                    "type": row.type,
                    "status": status,
                    "result": cut(result or "", self.config.max_tool_output_bytes),
                }
            )
        text = json.dumps(items, ensure_ascii=False)
        if any(item["status"] != st.COMPLETED for item in items):
            text = f"{text}\n\n{self.policy.partial_note}"
        return text

    # --- session, progress ----------------------------------------------------------------

    async def _reload(self) -> None:
        entries = await self.transcript.entries()
        self.entries = {e.id: e for e in entries}
        self.loaded = history.load(entries)

    async def _compact(self) -> None:
        """The caller's session within ``session_max_tokens``, as the plain loop keeps it
        (``compaction``): older tasks summarised into one entry, never this task's own."""
        entries = list(self.entries.values())
        gone = compaction.displaced(
            entries, self.prefix.rstrip(":"), self.config.session_max_tokens
        )
        if not gone:
            return
        messages = [message_of(e) for e in gone]
        summary = None
        try:
            response = await self.pair.request(compaction.summary_request(messages), None)
            text = compaction.response_text(response)
            if text:
                summary = compaction.summary_entry(text, int(self.ctx.clock() * 1000))
        except ModelUnavailable:
            log.warning("agent.compaction_dropped", extra={"task_id": self.ctx.task_id})
        await self.transcript.replace([e.id for e in gone], summary)
        await self._reload()

    def _entry(self, suffix: str) -> SessionEntry | None:
        return self.entries.get(self.prefix + suffix)

    async def _save(self, suffix: str, message: ModelRequest | ModelResponse) -> None:
        entry = entry_of(self.prefix + suffix, message)
        await self.transcript.append(entry)
        self.entries[entry.id] = entry
        self.loaded.append(history.Loaded(entry.id, message))

    async def _take_message(self) -> None:
        message_id = str(self.ctx.message.get("messageId") or f"turn-{self.ctx.attempt}")
        if self._entry(f"user:{message_id}") is None:
            part = UserPromptPart(self.ctx.turn.for_model())
            await self._save(f"user:{message_id}", ModelRequest(parts=[part]))

    def _started(self) -> float:
        """When the task's rounds began: the first round's acknowledgement, saved with its
        time (a turn taken over keeps counting from there), else this run's start."""
        first = self._entry("round:1:ack")
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

    def _push_soon(self, step_key: str, text: str) -> None:
        """A subtask's progress write, behind the ones before it, without holding the
        subagent up: the round waits for them all (``_pushed``); a refused one (canceled)
        stops the later ones and raises ``TurnStopped`` there."""
        before = self.pushing

        async def write() -> None:
            if before is not None:
                await before
            await self._push(step_key, text)

        self.pushing = asyncio.create_task(write())

    async def _pushed(self) -> None:
        pushing, self.pushing = self.pushing, None
        if pushing is not None:
            await pushing

    def _stop_if_cancelled(self) -> None:
        if self.ctx.cancelled.is_set():
            raise TurnStopped


def _recovered_call(round_no: int, rows: Sequence[Subtask], reply: str) -> ToolCallPart:
    """A round's delegate call rebuilt from its rows (its saved call was lost)."""
    subtasks = [{"type": r.type, "prompt": r.prompt, "params": dict(r.params)} for r in rows]
    args = {"reply": reply, "subtasks": subtasks}
    return ToolCallPart(control.DELEGATE, args, f"round-{round_no}")
