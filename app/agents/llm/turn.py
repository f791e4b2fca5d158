"""One turn of the ``llm`` agent: the loop of model steps and tool calls.

Each step sends the system prompt, the caller's session and the new turn to the model, then
runs the tool calls it asked for (``tool_calls``). Every model response and every tool result
is saved to the session as it arrives (``turn_session``), so a turn taken over after a crash
resumes from the last saved step: an answered model step is not asked again and a saved tool
result is not run again. The turn ends when the model answers without tool calls, when it
calls ``ask_user`` (task ``INPUT_REQUIRED``; the answer becomes that call's result), or when
``max_steps`` is spent (then one last call with no tools).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolReturnPart

from app.agents.contract import AgentFailure, AgentQuestion, AgentReply, AgentResult, TurnContext
from app.agents.llm import compaction, history, hitl
from app.agents.llm.attachments import UserTurn, has_images, user_part
from app.agents.llm.batch import CallResult
from app.agents.llm.config import LlmConfig
from app.agents.llm.events import EventBus, ModelResponded, TurnEnded, TurnStarted
from app.agents.llm.model_calls import ModelCaller, ModelUnavailable
from app.agents.llm.plugins import maybe_await
from app.agents.llm.progress import ProgressWriter
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.session import message_of
from app.agents.llm.steering import Steering
from app.agents.llm.tool_calls import ToolCalls, options_of
from app.agents.llm.turn_session import TurnSession
from app.attachments.descriptions import has_attachments

__all__ = ["Turn"]

log = logging.getLogger("looping.agent")


class Turn:
    def __init__(self, config: LlmConfig, runtime: LlmRuntime, ctx: TurnContext) -> None:
        self.config = config
        self.runtime = runtime
        self.ctx = ctx
        self.progress = ProgressWriter(ctx)
        subscribers = [self.progress.on_event]
        if runtime.metrics is not None:
            subscribers.append(runtime.metrics.on_event)
        self.events = EventBus(*subscribers, *runtime.subscribers)
        self.caller = ModelCaller(
            config,
            runtime.environ,
            self.events,
            sleep=runtime.sleep,
            cancelled=ctx.cancelled,
            http_client=runtime.http_client,
            clients=runtime.model_clients,
        )
        sessions = ctx.sessions if ctx.sessions is not None else runtime.sessions
        self.session = TurnSession(sessions.transcript(ctx.tenant, ctx.identity_key), ctx.task_id)
        self.calls = ToolCalls(config, runtime, ctx, self.session, self.events)
        self.steering = Steering(config, ctx, self.session)
        self.instructions: str | None = None  # the extension's part of the system prompt

    async def run(self) -> AgentResult:
        if not await self._gates_pass():
            await self.events.emit(TurnEnded(self.ctx.task_id, "gated"))
            return AgentReply()
        await self.session.reload()
        if self.runtime.extension is not None:
            self.instructions = await self.runtime.extension.instructions(self.config, self.ctx)
        await self.events.emit(TurnStarted(self.ctx.task_id, resumed=bool(self.session.own())))
        try:
            async with asyncio.timeout(self.config.turn_timeout_seconds):
                result = await self._loop()
                await self.session.written()
                await self.progress.written()
        except TimeoutError:
            log.warning("agent.turn_timeout", extra={"task_id": self.ctx.task_id})
            await self.events.emit(TurnEnded(self.ctx.task_id, "failed"))
            return AgentFailure(self.runtime.failure_text)
        except ModelUnavailable:
            await self.session.written()  # what the turn took in stays in the session
            await self.events.emit(TurnEnded(self.ctx.task_id, "failed"))
            return AgentFailure(self.runtime.failure_text)
        finally:
            for pending in [self.progress.pushing, *self.session.saving]:
                if pending is not None and not pending.done():
                    pending.cancel()
            await self.caller.aclose()
        outcome = "question" if isinstance(result, AgentQuestion) else "completed"
        await self.events.emit(TurnEnded(self.ctx.task_id, outcome))
        return result

    async def _loop(self) -> AgentResult:
        answered = self._answered()
        if answered is not None and not await self.steering.waits():
            return self._reply(answered)
        resumed = bool(self.session.own())
        await self._take_message()
        if resumed:
            await self._show_images_again()
        while True:
            self.progress.refused()
            pending, step = self.session.pending_calls()
            if pending:
                question = await self.calls.run(pending, step)
                if question is not None:
                    return question
                continue
            if self.session.model_steps() >= self.config.max_steps:
                await self.steering.take()
                return await self._answer(await self._ask_model(tools=False))
            await self.steering.take()
            await self._compact()
            response = await self._ask_model(tools=True)
            calls = history.calls_of(response)
            if not calls:
                # A steering message that came meanwhile is not looked for here: the
                # completion's guard refuses the outcome while the history holds one this
                # loop has not read, and the turn runs again from here (``_answered``).
                return await self._answer(response)
            step = self.session.take_step()
            await self.session.save(f"step:{step}", response)
            await self.events.emit(
                ModelResponded(
                    self.ctx.task_id,
                    step,
                    tuple(c.tool_name for c in calls),
                    compaction.response_text(response) or None,
                )
            )

    async def _ask_model(self, *, tools: bool) -> ModelResponse:
        messages = history.for_model(self._system_prompt(), self.session.loaded)
        return await self.caller.request(messages, self.calls.definitions() if tools else None)

    async def _answer(self, response: ModelResponse) -> AgentReply:
        """Save the answer: ``reply:final``, or ``step:<n>`` for a later one (the loop went on
        after its answer because a steering message came after its last look)."""
        first = self.session.entry("reply:final") is None
        suffix = "reply:final" if first else f"step:{self.session.take_step()}"
        await self.session.save(suffix, response)
        return self._reply(response)

    def _answered(self) -> ModelResponse | None:
        """The task's answer when its turn already ended (a run again of a finished turn):
        the last saved answer, if nothing followed it."""
        if self.session.entry("reply:final") is None:
            return None
        last = self.session.own()[-1].message
        return last if isinstance(last, ModelResponse) and not history.calls_of(last) else None

    def _reply(self, message: Any) -> AgentReply:
        text = compaction.response_text(message) if isinstance(message, ModelResponse) else ""
        return AgentReply(text=text, artifacts=self.session.artifacts())

    async def _take_message(self) -> None:
        """The turn's message joins the session once: as the pending question's answer, or
        as a user message (``task:<taskId>:user:<messageId>``)."""
        message_id = str(self.ctx.message.get("messageId") or f"turn-{self.ctx.attempt}")
        if self.session.applied(message_id):
            return
        pending = self.session.pending_calls()[0]
        ask = next((c for c in pending if c.tool_name == hitl.ASK_USER), None)
        if ask is not None:
            answer = hitl.answer_of(self.ctx.message, self.ctx.turn.text, options_of(ask))
            await self.calls.save_result(
                CallResult(ask, answer.result, "ok"),
                extra={"answer": message_id},
                user=await self._answer_attachments(),
            )
            return
        ctx = self.ctx
        turn = await user_part(ctx.turn.for_model(), ctx.message, ctx.read_attachments, self.config)
        live = None if turn.live is turn.kept else ModelRequest(parts=[turn.live])
        await self.session.save(
            f"user:{message_id}", ModelRequest(parts=[turn.kept]), behind=True, live=live
        )

    async def _answer_attachments(self) -> UserTurn | None:
        """An answer's attachments, for the model after the call's result (its text is the
        result): as a first message's are, images or a note, documents framed."""
        ctx = self.ctx
        if not has_attachments(ctx.message):
            return None
        turn = await user_part(hitl.ATTACHED, ctx.message, ctx.read_attachments, self.config)
        return None if turn.kept.content == hitl.ATTACHED else turn

    async def _show_images_again(self) -> None:
        """A run again of this turn (its worker died after its messages joined the session)
        gives the model their images again, read from the turn store: the session keeps only
        their descriptions, which later turns get."""
        ctx = self.ctx
        answered = self.session.answered_in(str(ctx.message.get("messageId")))
        if answered is not None and has_images(ctx.message):
            await self._show_answer_again(answered)
        for message in [ctx.message, *self.steering.taken()]:
            suffix = f"user:{message.get('messageId')}"
            if not has_images(message) or self.session.entry(suffix) is None:
                continue
            if message is ctx.message:
                read = ctx.read_attachments
                turn = await user_part(ctx.turn.for_model(), message, read, self.config)
            else:
                turn = await self.steering.user_turn(message)
            if turn.live is not turn.kept:
                self.session.show(suffix, ModelRequest(parts=[turn.live]))

    async def _show_answer_again(self, suffix: str) -> None:
        """The answer's images again, after the call's result saved with them (not when this
        run saved them: it shows them already)."""
        if self.session.prefix + suffix in self.session.live:
            return
        turn = await self._answer_attachments()
        entry = self.session.entry(suffix)
        if turn is None or turn.live is turn.kept or entry is None:
            return
        saved = message_of(entry)
        results = [p for p in saved.parts if isinstance(p, ToolReturnPart)]
        if results:
            self.session.show(suffix, ModelRequest(parts=[*results, turn.live]))

    async def _compact(self) -> None:
        session = self.session
        running = session.prefix.rstrip(":")
        gone = compaction.displaced(session.entries, running, self.config.session_max_tokens)
        if not gone:
            return
        await session.written()  # the re-read below must find every entry
        messages = [message_of(e) for e in gone]
        summary = None
        try:
            response = await self.caller.request(compaction.summary_request(messages), None)
            text = compaction.response_text(response)
            if text:
                summary = compaction.summary_entry(text, int(self.ctx.clock() * 1000))
        except ModelUnavailable:
            log.warning("agent.compaction_dropped", extra={"task_id": self.ctx.task_id})
        await session.transcript.replace([e.id for e in gone], summary)
        for plugin, hook in self.runtime.plugins.hooks("on_messages_displaced"):
            try:
                await maybe_await(hook(self.ctx, messages))
            except Exception as exc:
                log.warning(
                    "agent.plugin_hook_failed",
                    extra={"plugin": plugin.key, "outcome": type(exc).__name__},
                )
        await session.reload()

    def _system_prompt(self) -> str:
        parts = [self.config.system_prompt, *self.runtime.plugins.capabilities()]
        if self.instructions:
            parts.append(self.instructions)
        today = time.strftime("%Y-%m-%d", time.gmtime(self.ctx.clock()))
        parts.append(f"Current date (UTC): {today}")
        return "\n\n".join(parts)

    async def _gates_pass(self) -> bool:
        for plugin, gate in self.runtime.plugins.hooks("should_handle_turn"):
            try:
                if await maybe_await(gate(self.ctx)) is False:
                    return False
            except Exception as exc:  # a failing gate counts as yes
                log.warning(
                    "agent.plugin_gate_failed",
                    extra={"plugin": plugin.key, "outcome": type(exc).__name__},
                )
        return True
