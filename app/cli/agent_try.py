"""The body of ``looping-edge agents try TENANT "text"``: one turn of a tenant's configured
agent, run here and now, each step printed. Nothing is written: no task, no push, and an
``llm`` agent's session is kept in memory for this one turn (the caller's stored session is
not read). Nothing leaves for another agent either: the A2A tools are not offered."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from app.agents.contract import AgentFailure, AgentQuestion, AgentReply, AgentResult, TurnContext
from app.agents.llm.events import (
    LoopEvent,
    ModelCalled,
    ModelResponded,
    ToolEnded,
    ToolStarted,
)
from app.agents.llm.plugins import PluginError
from app.agents.llm.runtime import build_llm_runtime
from app.agents.llm.session import MemorySessions
from app.agents.registry import AgentUnavailable, default_registry
from app.cli.common import (
    DATABASE_ERRORS,
    EXIT_CONFIG,
    database_failed,
    fail,
    open_database,
    printable,
    settings_or_exit,
)
from app.db.tenants import TenantRecord
from app.tenants.registry import TenantStore

PREVIEW_CHARS = 200


def _line(text: str) -> str:
    flat = printable(text.replace("\n", " "))
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS] + "…"


async def _print_event(event: LoopEvent) -> None:
    if isinstance(event, ModelCalled):
        print(
            f"  model {event.model}: {event.outcome} (tokens {event.tokens_in}/{event.tokens_out})"
        )
    elif isinstance(event, ModelResponded):
        said = f" saying {_line(event.text)}" if event.text else ""
        print(f"step {event.step}: the model calls {', '.join(event.tool_names)}{said}")
    elif isinstance(event, ToolStarted):
        print(f"  {event.tool} ({event.call_id}) runs")
    elif isinstance(event, ToolEnded):
        print(f"step {event.step}: {event.tool} {event.outcome}: {_line(event.result)}")


def _print_result(result: AgentResult) -> int:
    if isinstance(result, AgentReply):
        print(f"COMPLETED: {printable(result.text or '')}")
        for artifact in result.artifacts:
            print(f"  artifact {json.dumps(artifact)[:PREVIEW_CHARS]}")
        return 0
    if isinstance(result, AgentQuestion):
        print(f"{'AUTH' if result.auth else 'INPUT'}_REQUIRED: {printable(result.text)}")
        return 0
    if isinstance(result, AgentFailure):
        print(f"FAILED: {printable(result.text)}")
        return 1
    return 1


async def _progress(step_key: str, text: str) -> None:
    print(f"  progress {step_key}: {_line(text)}")


def _peers_note(kind: str, config: dict[str, Any]) -> str | None:
    """Why an ``llm`` agent with an A2A directory gets no ``a2a_*`` tools here: a try writes
    nothing, and a send would really reach the peer (with no durable record of it)."""
    agents = config.get("agents") if kind == "llm" else None
    if not isinstance(agents, dict) or not agents:
        return None
    names = ", ".join(sorted(str(n)[:64] for n in agents))
    return (
        f"note: the A2A tools (a2a_*) are not offered in a try; they would really send to "
        f"{printable(names)}. The worker offers them."
    )


def _try_context(tenant: TenantRecord, args: argparse.Namespace) -> TurnContext:
    """The first turn of a new task whose one message is ``args.text``, as ``args.identity``."""
    message = {"messageId": "try-1", "role": "ROLE_USER", "parts": [{"text": args.text}]}
    return TurnContext(
        tenant=tenant.id,
        identity_key=args.identity,
        identity={"key": args.identity},
        task_id=f"try-{int(time.time())}",
        context_id="try",
        kind="start",
        message=message,
        history=[message],
        resume_answer=None,
        attempt=1,
        cancelled=asyncio.Event(),
        progress_fn=_progress,
        clock=time.time,
        agent_config=dict(tenant.agent_config),
    )


def run_try(args: argparse.Namespace) -> int:
    from app.ops.logging import configure_logging

    settings = settings_or_exit()
    db = open_database(settings)
    configure_logging(settings.log_level, json_logs=settings.log_json)
    environ = dict(os.environ)  # the process edge: model keys and plugin secrets

    async def go() -> int:
        try:
            tenant = await TenantStore(db).get(args.tenant)
        finally:
            await db.dispose()
        if tenant is None:
            return fail(f"no tenant '{args.tenant}'")
        try:
            runtime = build_llm_runtime(
                environ, failure_text=settings.failure_text, sessions=MemorySessions()
            )
        except PluginError as exc:
            return fail(f"plugins: {exc}", EXIT_CONFIG)
        runtime = runtime.with_subscribers(_print_event)
        try:
            agent = default_registry(runtime).build(tenant.agent_kind, tenant.agent_config)
            ctx = _try_context(tenant, args)
            print(f"tenant '{tenant.id}' (agent {tenant.agent_kind}): one turn")
            note = _peers_note(tenant.agent_kind, dict(tenant.agent_config))
            if note is not None:
                print(note)
            result: Any = await asyncio.wait_for(
                agent.run(ctx), timeout=settings.turn_timeout_seconds
            )
        except AgentUnavailable as exc:
            return fail(f"the tenant's agent cannot be built: {exc}")
        except TimeoutError:
            return fail("the turn ran past EDGE_TURN_TIMEOUT_SECONDS")
        finally:
            await runtime.aclose()
        return _print_result(result)

    try:
        return asyncio.run(go())
    except DATABASE_ERRORS as exc:
        return database_failed(exc)
