"""The ``llm`` agent kind: a language-model loop with tools, one continuous session per
caller, questions to the human, and durable steps.

Each step sends the system prompt, the caller's session and the new turn to the model, then
runs the tool calls it asked for (``batch``). Every model response and every tool result is
saved to the session as it arrives (``task:<taskId>:step:<n>``), so a turn taken over after a
crash resumes from the last saved step: an answered model step is not asked again and a saved
tool result is not run again. The turn ends when the model answers without tool calls, when it
calls ``ask_user`` (task ``INPUT_REQUIRED``; the answer becomes that call's result), or when
``max_steps`` is spent (then one last call with no tools).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.tools import ToolDefinition

from app.agents.contract import (
    AgentFailure,
    AgentQuestion,
    AgentReply,
    AgentResult,
    TurnContext,
    first_text,
)
from app.agents.envelope import parse_envelope
from app.agents.llm import compaction, history, hitl
from app.agents.llm.attachments import user_prompt
from app.agents.llm.batch import Batch, CallResult, arguments, bad_arguments
from app.agents.llm.config import LlmConfig, parse_llm_config
from app.agents.llm.delegation.rounds import DelegatingTurn
from app.agents.llm.events import (
    EventBus,
    LoopEvent,
    ModelResponded,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from app.agents.llm.model_calls import ModelCaller, ModelUnavailable
from app.agents.llm.plugins import maybe_await
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.session import SessionEntry, Transcript, entry_of, message_of
from app.agents.llm.tools import Tool, ToolContext, schema_problem

log = logging.getLogger("looping.agent")

ONE_QUESTION = "error: one question at a time; ask again once this one is answered"


class LlmAgent:
    def __init__(self, config: LlmConfig, runtime: LlmRuntime) -> None:
        self.config = config
        self.runtime = runtime

    @classmethod
    def from_config(cls, config: Mapping[str, Any], runtime: LlmRuntime) -> LlmAgent:
        return cls(parse_llm_config(config), runtime)

    async def run(self, ctx: TurnContext) -> AgentResult:
        extension = self.runtime.extension
        if extension is not None:
            taken = await extension.take_turn(self.config, ctx)
            if taken is not None:
                return taken
        if self.config.delegation is not None:
            return await DelegatingTurn(self.config, self.runtime, ctx).run()
        return await _Turn(self.config, self.runtime, ctx).run()


class _Turn:
    def __init__(self, config: LlmConfig, runtime: LlmRuntime, ctx: TurnContext) -> None:
        self.config = config
        self.runtime = runtime
        self.ctx = ctx
        self.prefix = f"task:{ctx.task_id}:"
        subscribers = [self._progress]
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
        self.tools: dict[str, Tool] = {hitl.ASK_USER: hitl.ASK_USER_TOOL}
        for name in config.tools:
            tool = runtime.plugins.tools.get(name)
            if tool is None:
                log.warning("agent.tool_not_installed", extra={"tool": name})
            else:
                self.tools[name] = tool
        if runtime.extension is not None:
            for tool in runtime.extension.tools(config):
                self.tools.setdefault(tool.name, tool)
        sessions = ctx.sessions if ctx.sessions is not None else runtime.sessions
        self.transcript: Transcript = sessions.transcript(ctx.tenant, ctx.identity_key)
        self.entries: list[SessionEntry] = []
        self.loaded: list[history.Loaded] = []
        self.next_step = 1
        self.looked = False  # whether the loop has looked for steering yet
        self.pushing: asyncio.Task[None] | None = None  # the progress write in flight
        self.saving: list[asyncio.Task[bool]] = []  # tool results being written
        self.instructions: str | None = None  # the extension's part of the system prompt

    # --- the turn -------------------------------------------------------------------------

    async def run(self) -> AgentResult:
        if not await self._gates_pass():
            await self.events.emit(TurnEnded(self.ctx.task_id, "gated"))
            return AgentReply()
        await self._reload()
        if self.runtime.extension is not None:
            self.instructions = await self.runtime.extension.instructions(self.config, self.ctx)
        await self.events.emit(TurnStarted(self.ctx.task_id, resumed=bool(self._own())))
        try:
            async with asyncio.timeout(self.config.turn_timeout_seconds):
                result = await self._loop()
                await self._saves_written()
                await self._progress_written()
        except TimeoutError:
            log.warning("agent.turn_timeout", extra={"task_id": self.ctx.task_id})
            await self.events.emit(TurnEnded(self.ctx.task_id, "failed"))
            return AgentFailure(self.runtime.failure_text)
        except ModelUnavailable:
            await self._saves_written()  # what the turn took in stays in the session
            await self.events.emit(TurnEnded(self.ctx.task_id, "failed"))
            return AgentFailure(self.runtime.failure_text)
        finally:
            for pending in [self.pushing, *self.saving]:
                if pending is not None and not pending.done():
                    pending.cancel()
            await self.caller.aclose()
        outcome = "question" if isinstance(result, AgentQuestion) else "completed"
        await self.events.emit(TurnEnded(self.ctx.task_id, outcome))
        return result

    async def _loop(self) -> AgentResult:
        answered = self._answered()
        if answered is not None and not await self._steering_waits():
            return self._reply(answered)
        await self._take_message()
        while True:
            self._progress_refused()
            pending, step = self._pending_calls()
            if pending:
                question = await self._run_calls(pending, step)
                if question is not None:
                    return question
                continue
            if self._model_steps() >= self.config.max_steps:
                await self._take_steering()
                return await self._answer(await self._ask_model(tools=False))
            await self._take_steering()
            await self._compact()
            response = await self._ask_model(tools=True)
            calls = history.calls_of(response)
            if not calls:
                # A steering message that came meanwhile is not looked for here: the
                # completion's guard refuses the outcome while the history holds one this
                # loop has not read, and the turn runs again from here (``_answered``).
                return await self._answer(response)
            step = self._take_step()
            await self._save(f"step:{step}", response)
            await self.events.emit(
                ModelResponded(
                    self.ctx.task_id,
                    step,
                    tuple(c.tool_name for c in calls),
                    compaction.response_text(response) or None,
                )
            )

    async def _ask_model(self, *, tools: bool) -> ModelResponse:
        messages = history.for_model(self._system_prompt(), self.loaded)
        return await self.caller.request(messages, self._tool_definitions() if tools else None)

    async def _answer(self, response: ModelResponse) -> AgentReply:
        """Save the answer: ``reply:final``, or ``step:<n>`` for a later one (the loop went on
        after its answer because a steering message came after its last look)."""
        first = self._entry("reply:final") is None
        await self._save("reply:final" if first else f"step:{self._take_step()}", response)
        return self._reply(response)

    def _answered(self) -> ModelResponse | None:
        """The task's answer when its turn already ended (a run again of a finished turn):
        the last saved answer, if nothing followed it."""
        if self._entry("reply:final") is None:
            return None
        last = self._own()[-1].message
        return last if isinstance(last, ModelResponse) and not history.calls_of(last) else None

    def _reply(self, message: Any) -> AgentReply:
        text = compaction.response_text(message) if isinstance(message, ModelResponse) else ""
        return AgentReply(text=text, artifacts=self._artifacts())

    # --- the incoming message -------------------------------------------------------------

    async def _take_message(self) -> None:
        """The turn's message joins the session once: as the pending question's answer, or
        as a user message (``task:<taskId>:user:<messageId>``)."""
        message_id = str(self.ctx.message.get("messageId") or f"turn-{self.ctx.attempt}")
        if self._applied(message_id):
            return
        ask = next((c for c in self._pending_calls()[0] if c.tool_name == hitl.ASK_USER), None)
        if ask is not None:
            options = _options(ask)
            answer = hitl.answer_of(self.ctx.message, self.ctx.turn.text, options)
            await self._save_result(
                CallResult(ask, answer.result, "ok"), extra={"answer": message_id}
            )
            return
        part = user_prompt(self.ctx.turn.for_model(), self.ctx.message, self.config.attachments)
        await self._save(f"user:{message_id}", ModelRequest(parts=[part]), behind=True)

    async def _steering(self, *, fresh: bool = True) -> list[dict[str, Any]]:
        """Plain user messages that joined the task while it runs and are not in the session
        yet (steering: accepted with the task's ``taskId`` while it was working). Not
        ``fresh``: the run's first look may take the history the turn started on, read
        moments before; a message accepted since is found by a later look or, at the latest,
        by the completion's guard (``app.worker.runner``: it is refused while the history
        holds a message the loop has not read, and the loop runs again)."""
        if self.ctx.read_history is None:
            return []
        first_look = not self.looked and not fresh
        self.looked = True
        found = []
        history = self.ctx.history if first_look else await self.ctx.read_history()
        for message in history:
            message_id = message.get("messageId")
            if message.get("role") not in ("ROLE_USER", "user") or not isinstance(message_id, str):
                continue
            if message_id != self.ctx.message.get("messageId") and not self._applied(message_id):
                found.append(message)
        return found

    async def _steering_waits(self) -> bool:
        """Whether steering arrived after the turn's answer (the turn goes on with it)."""
        return bool(await self._steering())

    async def _take_steering(self) -> None:
        """Steering joins the session before the next model call, in arrival order."""
        for message in await self._steering(fresh=False):
            envelope = parse_envelope(first_text(message))
            part = user_prompt(envelope.for_model(), message, self.config.attachments)
            await self._save(f"user:{message['messageId']}", ModelRequest(parts=[part]))

    def _applied(self, message_id: str) -> bool:
        if self._entry(f"user:{message_id}") is not None:
            return True
        for item in self._own():
            if isinstance(item.message, ModelRequest):
                for part in item.message.parts:
                    meta = part.metadata if isinstance(part, ToolReturnPart) else None
                    if isinstance(meta, dict) and meta.get("answer") == message_id:
                        return True
        return False

    # --- tool calls -----------------------------------------------------------------------

    async def _run_calls(self, calls: Sequence[ToolCallPart], step: int) -> AgentQuestion | None:
        asks = [c for c in calls if c.tool_name == hitl.ASK_USER]
        others = [c for c in calls if c.tool_name != hitl.ASK_USER]
        for extra in asks[1:]:
            await self._save_result(CallResult(extra, ONE_QUESTION, "error"))
        if others:
            batch = Batch(
                tools={k: v for k, v in self.tools.items() if k != hitl.ASK_USER},
                plugins=self.runtime.plugins,
                timeout_seconds=self.config.tool_timeout_seconds,
                max_output_bytes=self.config.max_tool_output_bytes,
                context_for=self._tool_context,
                started=self._tool_started,
                record=self._save_result,
            )
            await batch.run(others)
        if not asks:
            return None
        ask = asks[0]
        try:
            args = hitl.ASK_USER_TOOL.validate(_json_args(ask))
        except (ValidationError, ValueError) as exc:
            text = (
                bad_arguments(schema_problem(exc)) if isinstance(exc, ValidationError) else str(exc)
            )
            await self._save_result(CallResult(ask, text, "bad_arguments"))
            return None
        question, options = str(args["question"]), args.get("options")
        rid = hitl.request_id(self.ctx.task_id, step)
        return AgentQuestion(text=question, parts=(hitl.question_part(rid, question, options),))

    def _tool_context(self, call: ToolCallPart, tool: Tool) -> ToolContext:
        key = f"{self.ctx.task_id}:{call.tool_call_id}"
        return self.runtime.plugins.tool_context(self.ctx, call.tool_call_id, tool, key)

    async def _tool_started(self, call: ToolCallPart) -> None:
        await self.events.emit(ToolStarted(self.ctx.task_id, call.tool_call_id, call.tool_name))

    async def _save_result(
        self, result: CallResult, extra: Mapping[str, Any] | None = None
    ) -> None:
        step = self._take_step()
        meta: dict[str, Any] = {"artifacts": list(result.artifacts), **(extra or {})}
        part = ToolReturnPart(
            result.call.tool_name, result.text, result.call.tool_call_id, metadata=meta
        )
        await self._save(f"step:{step}", ModelRequest(parts=[part]), behind=True)
        await self.events.emit(
            ToolEnded(
                self.ctx.task_id,
                result.call.tool_call_id,
                result.call.tool_name,
                step,
                result.outcome,
                result.text,
            )
        )

    def _tool_definitions(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.schema)
            for t in self.tools.values()
        ]

    # --- the session ----------------------------------------------------------------------

    async def _reload(self) -> None:
        self.entries = await self.transcript.entries()
        self.loaded = history.load(self.entries)
        steps = [_step_number(e.id, self.prefix) for e in self.entries]
        self.next_step = max([s for s in steps if s is not None], default=0) + 1

    def _own(self) -> list[history.Loaded]:
        return [item for item in self.loaded if item.entry_id.startswith(self.prefix)]

    def _entry(self, suffix: str) -> SessionEntry | None:
        return next((e for e in self.entries if e.id == self.prefix + suffix), None)

    def _take_step(self) -> int:
        step, self.next_step = self.next_step, self.next_step + 1
        return step

    async def _save(
        self, suffix: str, message: ModelRequest | ModelResponse, *, behind: bool = False
    ) -> None:
        """Append to the session. ``behind``: a tool result or the turn's message, whose write
        may run beside the next model call (lost with a crash, the tool runs again or the
        retried turn takes its message again); every other save first waits for those, so
        the stored order is the loop's."""
        entry = entry_of(self.prefix + suffix, message)
        self.entries.append(entry)
        self.loaded.append(history.Loaded(entry.id, message))
        if behind:
            self.saving.append(asyncio.create_task(self.transcript.append(entry)))
            return
        await self._saves_written()
        await self.transcript.append(entry)

    async def _saves_written(self) -> None:
        saving, self.saving = self.saving, []
        if saving:
            await asyncio.gather(*saving)

    def _pending_calls(self) -> tuple[list[ToolCallPart], int]:
        """The calls of this task's last model response that have no saved result yet, and
        that response's step number."""
        own = self._own()
        returns = history.tool_returns(own)
        for item in reversed(own):
            if isinstance(item.message, ModelResponse):
                calls = history.calls_of(item.message)
                pending = [c for c in calls if c.tool_call_id not in returns]
                return pending, _step_number(item.entry_id, self.prefix) or 0
        return [], 0

    def _model_steps(self) -> int:
        return sum(1 for item in self._own() if isinstance(item.message, ModelResponse))

    def _artifacts(self) -> tuple[dict[str, Any], ...]:
        out: list[dict[str, Any]] = []
        for item in self._own():
            if isinstance(item.message, ModelRequest):
                for part in item.message.parts:
                    if isinstance(part, ToolReturnPart) and isinstance(part.metadata, dict):
                        out.extend(part.metadata.get("artifacts") or ())
        return tuple(out)

    async def _compact(self) -> None:
        running = self.prefix.rstrip(":")
        gone = compaction.displaced(self.entries, running, self.config.session_max_tokens)
        if not gone:
            return
        await self._saves_written()  # the re-read below must find every entry
        messages = [message_of(e) for e in gone]
        summary = None
        try:
            response = await self.caller.request(compaction.summary_request(messages), None)
            text = compaction.response_text(response)
            if text:
                summary = compaction.summary_entry(text, int(self.ctx.clock() * 1000))
        except ModelUnavailable:
            log.warning("agent.compaction_dropped", extra={"task_id": self.ctx.task_id})
        await self.transcript.replace([e.id for e in gone], summary)
        for plugin, hook in self.runtime.plugins.hooks("on_messages_displaced"):
            try:
                await maybe_await(hook(self.ctx, messages))
            except Exception as exc:
                log.warning(
                    "agent.plugin_hook_failed",
                    extra={"plugin": plugin.key, "outcome": type(exc).__name__},
                )
        await self._reload()

    # --- prompt, gates, progress ----------------------------------------------------------

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

    async def _progress(self, event: LoopEvent) -> None:
        """WORKING progress per saved step, message id ``<taskId>:step-<n>``. The write runs
        beside the loop's next move (a tool, the next model call) instead of before it: the
        step itself is already saved, and the writes stay in order, one in flight at a time.
        A refused write (canceled, lease lost) raises ``TurnStopped`` at the next step."""
        if isinstance(event, ModelResponded) and event.tool_names:
            text = f"calling {', '.join(event.tool_names)}"
        elif isinstance(event, ToolEnded) and event.tool != hitl.ASK_USER:
            text = f"{event.tool}: {event.outcome}"
        else:
            return
        self._progress_refused()
        before = self.pushing

        async def write() -> None:
            if before is not None:
                await before  # in order; an earlier refusal stops the later writes
            await self.ctx.progress(f"step-{event.step}", text)

        self.pushing = asyncio.create_task(write())

    def _progress_refused(self) -> None:
        """Raise ``TurnStopped`` (or what the write raised) once a progress write failed."""
        pushing = self.pushing
        if pushing is not None and pushing.done() and not pushing.cancelled():
            error = pushing.exception()
            if error is not None:
                raise error

    async def _progress_written(self) -> None:
        """Wait for the progress writes in flight (a refusal raises here)."""
        pushing, self.pushing = self.pushing, None
        if pushing is not None:
            await pushing


def _step_number(entry_id: str, prefix: str) -> int | None:
    head = prefix + "step:"
    if entry_id.startswith(head) and entry_id[len(head) :].isdigit():
        return int(entry_id[len(head) :])
    return None


def _json_args(call: ToolCallPart) -> dict[str, Any]:
    args = arguments(call)
    if isinstance(args, str):
        raise ValueError(args)
    return args


def _options(call: ToolCallPart) -> list[str] | None:
    try:
        options = _json_args(call).get("options")
    except ValueError:
        return None
    return [str(o) for o in options] if isinstance(options, list) else None
