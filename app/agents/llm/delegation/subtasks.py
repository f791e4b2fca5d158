"""A round's subtasks, run concurrently, each in its own subagent (``Subagent``), and their
outcomes as the model reads them in the next round.

Each subtask's row moves by guarded writes (``app.db.subtasks``): a pending one starts under
its request's fingerprint, a running one resumes from its saved steps, and one whose request
changed since it started (the tenant's recipe changed) fails with ``MISMATCH``. A failure is
the subtask's, never the round's. Each start and end is pushed as progress, in order, without
holding the subagents up.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic_ai.messages import ToolCallPart

from app.agents.contract import TurnContext, TurnStopped
from app.agents.llm.batch import cut
from app.agents.llm.config import LlmConfig
from app.agents.llm.delegation.config import DelegationConfig, Recipe, recipe_tools
from app.agents.llm.delegation.fingerprint import fingerprint
from app.agents.llm.delegation.subagent import Subagent
from app.agents.llm.model_calls import ModelCaller
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.tools import Tool, ToolContext
from app.db import subtasks as st
from app.db.subtasks import Subtask, SubtaskScope

log = logging.getLogger("looping.agent")

MISMATCH = "error: request fingerprint mismatch (a different request under this subtask id)"


class RoundSubtasks:
    def __init__(
        self,
        config: LlmConfig,
        runtime: LlmRuntime,
        ctx: TurnContext,
        pair: ModelCaller,
        push: Callable[[str, str], Awaitable[None]],
    ) -> None:
        assert config.delegation is not None
        self.config = config
        self.delegation: DelegationConfig = config.delegation
        self.policy = config.delegation.policy
        self.runtime = runtime
        self.ctx = ctx
        self.pair = pair  # subagents: the host's model and fallback
        self._push = push
        self.scope = SubtaskScope(ctx.tenant, ctx.identity_key, ctx.task_id)
        self.store = runtime.subtasks
        self.pushing: asyncio.Task[None] | None = None  # the subtasks' writes, chained
        self.recipe_tools: dict[str, dict[str, Tool]] = {}

    def stop(self) -> None:
        """Drop the progress writes still queued (the turn ended)."""
        if self.pushing is not None and not self.pushing.done():
            self.pushing.cancel()

    async def run(self, round_no: int, rows: Sequence[Subtask]) -> list[Subtask]:
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

    def results(self, rows: Sequence[Subtask]) -> str:
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
