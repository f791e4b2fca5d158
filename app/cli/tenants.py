"""``looping-edge tenants …``: register, inspect and change the agents behind the endpoint."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.agents.entry_point import AgentEntryError, entry_of
from app.agents.kinds import AGENT_KINDS
from app.agents.llm.config import LlmConfigError, parse_llm_config
from app.cli.common import (
    DATABASE_ERRORS,
    database_failed,
    edge_command,
    fail,
    open_database,
    printable,
    settings_or_exit,
)
from app.tenants.manifest import TenantManifest, strict_json_object, validate_tenant_id
from app.tenants.profile import GATEWAY, OPEN, PROFILES
from app.tenants.registry import (
    TenantExists,
    TenantMissing,
    TenantRecord,
    TenantStore,
    check_agent_config,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tenants = sub.add_parser("tenants", help="manage tenants (agents behind the endpoint)")
    tsub = tenants.add_subparsers(dest="tenants_cmd", required=True)

    add = tsub.add_parser("add", help="register a tenant")
    add.add_argument("id")
    add.add_argument("--manifest", required=True, type=Path, help="JSON manifest file")
    _definition_args(add, default_kind="echo")
    add.set_defaults(func=lambda a: _run(_add, a))

    upd = tsub.add_parser("update", help="change a tenant's manifest or agent definition")
    upd.add_argument("id")
    upd.add_argument("--manifest", type=Path)
    _definition_args(upd, default_kind=None)
    upd.set_defaults(func=lambda a: _run(_update, a))

    lst = tsub.add_parser("list", help="list tenants")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=lambda a: _run(_list, a))

    for name, helptext in (
        ("show", "show one tenant as JSON"),
        ("disable", "stop serving a tenant (kept in the registry)"),
        ("enable", "serve a disabled tenant again"),
        ("remove", "delete a tenant from the registry"),
    ):
        p = tsub.add_parser(name, help=helptext)
        p.add_argument("id")
        p.set_defaults(func=lambda a, n=name: _run(_SIMPLE[n], a))


def _definition_args(p: argparse.ArgumentParser, *, default_kind: str | None) -> None:
    p.add_argument("--agent", choices=AGENT_KINDS, default=default_kind, help="agent kind")
    p.add_argument("--agent-config", type=Path, help="JSON file with the agent's configuration")
    p.add_argument(
        "--profile",
        choices=PROFILES,
        help="gateway (default: the Looping gateway's contract) or open (general A2A clients: "
        "pushes to any https URL past the SSRF rules, Message results; implies "
        "--require-push-config false)",
    )
    p.add_argument(
        "--require-push-config",
        choices=("true", "false"),
        help="SendMessage must carry a push config (default true, false for --profile open)",
    )
    p.add_argument(
        "--dedupe-message-ids",
        choices=("true", "false"),
        help="idempotency on messageId (default true)",
    )


class _Usage(Exception):
    pass


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise _Usage(f"cannot read {what} file {path}") from None
    except UnicodeDecodeError:
        raise _Usage(f"{what} file {path} is not UTF-8 text") from None


def _agent_config(path: Path) -> dict[str, Any]:
    what = "agent config"
    try:
        config = strict_json_object(_read_text(path, what), what)
        check_agent_config(config)
    except ValueError as exc:
        raise _Usage(f"invalid {what} {path}: {exc}") from None
    return config


def _manifest(path: Path) -> dict[str, Any]:
    text = _read_text(path, "manifest")
    try:
        return TenantManifest.from_json_text(text).model_dump(mode="json", exclude_none=True)
    except ValueError as exc:
        raise _Usage(f"invalid manifest {path}: {exc}") from None


def _flag(value: str | None) -> bool | None:
    return None if value is None else value == "true"


def _require_push(a: argparse.Namespace) -> bool | None:
    """``--require-push-config`` as given; ``--profile open`` alone implies ``false`` (general
    clients need not send one), and an explicit flag beside it wins."""
    given = _flag(a.require_push_config)
    if given is None and a.profile == OPEN:
        return False
    return given


def _show(record: TenantRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "enabled": record.enabled,
        "profile": record.profile,
        "agent": record.agent_kind,
        "agentConfig": dict(record.agent_config),
        "requirePushConfig": record.require_push_config,
        "dedupeMessageIds": record.dedupe_message_ids,
        "revision": record.revision,
        "manifest": dict(record.manifest),
    }


def _check_agent(kind: str, config: Mapping[str, Any]) -> None:
    # Checked for their shape only: the worker imports a python entry (and reads a model's
    # key) from its own environment, which the CLI's need not be.
    if kind == "llm":
        try:
            parse_llm_config(config)
        except LlmConfigError as exc:
            raise _Usage(f"invalid llm agent config: {exc}") from None
    if kind == "python":
        try:
            entry_of(config)
        except AgentEntryError as exc:
            raise _Usage(str(exc)) from None


async def _add(store: TenantStore, a: argparse.Namespace) -> int:
    try:
        tenant_id = validate_tenant_id(a.id)
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    record = TenantRecord(
        id=tenant_id,
        manifest=_manifest(a.manifest),
        agent_kind=a.agent,
        agent_config=_agent_config(a.agent_config) if a.agent_config else {},
        require_push_config=_require_push(a) is not False,
        dedupe_message_ids=_flag(a.dedupe_message_ids) is not False,
        profile=a.profile or GATEWAY,
    )
    _check_agent(record.agent_kind, record.agent_config)
    try:
        await store.add(record)
    except TenantExists:
        raise _Usage(f"tenant '{tenant_id}' already exists (use tenants update)") from None
    print(f"added tenant '{tenant_id}' (agent {record.agent_kind})")
    return 0


async def _update(store: TenantStore, a: argparse.Namespace) -> int:
    changes: dict[str, Any] = {
        "manifest": _manifest(a.manifest) if a.manifest else None,
        "agent_kind": a.agent,
        "agent_config": _agent_config(a.agent_config) if a.agent_config else None,
        "require_push_config": _require_push(a),
        "dedupe_message_ids": _flag(a.dedupe_message_ids),
        "profile": a.profile,
    }
    if all(v is None for v in changes.values()):
        raise _Usage("nothing to update: give --manifest, --agent, --agent-config or a flag")
    if changes["agent_kind"] is not None or changes["agent_config"] is not None:
        current = await store.get(a.id)
        if current is not None:
            _check_agent(
                changes["agent_kind"] or current.agent_kind,
                current.agent_config
                if changes["agent_config"] is None
                else changes["agent_config"],
            )
    record = await store.update(a.id, **changes)
    print(f"updated tenant '{record.id}' (revision {record.revision})")
    return 0


async def _list(store: TenantStore, a: argparse.Namespace) -> int:
    records = await store.list()
    if a.json:
        print(json.dumps([_show(r) for r in records], indent=2))
        return 0
    if not records:
        print(
            f"no tenants registered (add one with: {edge_command()} tenants add ID --manifest FILE)"
        )
    for r in records:
        state = "enabled" if r.enabled else "disabled"
        name = printable(str(r.manifest.get("name", "")))
        kind = printable(r.agent_kind)
        print(f"{r.id}\t{state}\t{kind}\t{r.profile}\trev {r.revision}\t{name}")
    return 0


async def _show_cmd(store: TenantStore, a: argparse.Namespace) -> int:
    record = await store.get(a.id)
    if record is None:
        raise TenantMissing(a.id)
    print(json.dumps(_show(record), indent=2))
    return 0


async def _enable(store: TenantStore, a: argparse.Namespace) -> int:
    await store.update(a.id, enabled=True)
    print(f"enabled tenant '{a.id}'")
    return 0


async def _disable(store: TenantStore, a: argparse.Namespace) -> int:
    await store.update(a.id, enabled=False)
    print(f"disabled tenant '{a.id}'")
    return 0


async def _remove(store: TenantStore, a: argparse.Namespace) -> int:
    await store.remove(a.id)
    print(f"removed tenant '{a.id}'")
    return 0


_SIMPLE = {"show": _show_cmd, "enable": _enable, "disable": _disable, "remove": _remove}


def _run(action: Any, args: argparse.Namespace) -> int:
    settings = settings_or_exit()
    db = open_database(settings)

    async def go() -> int:
        try:
            return int(await action(TenantStore(db), args))
        finally:
            await db.dispose()

    try:
        return asyncio.run(go())
    except _Usage as exc:
        return fail(str(exc))
    except TenantMissing:
        return fail(f"no tenant '{args.id}'")
    except DATABASE_ERRORS as exc:
        return database_failed(exc)
