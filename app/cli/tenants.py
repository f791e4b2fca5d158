"""``looping-edge tenants …``: register, inspect and change the agents behind the endpoint."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from app.agents.kinds import AGENT_KINDS
from app.cli.common import (
    DATABASE_ERRORS,
    database_failed,
    edge_command,
    fail,
    open_database,
    printable,
    settings_or_exit,
)
from app.tenants.manifest import MAX_MANIFEST_BYTES, strict_json_object
from app.tenants.profile import PROFILES
from app.tenants.registry import TenantStore
from app.tenants.service import (
    TenantDraft,
    TenantExists,
    TenantInvalid,
    TenantMissing,
    TenantService,
    tenant_json,
)

_show = tenant_json  # the name this module's tests know the shown form by


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
        p = tsub.add_parser(name, help=helptext, aliases=["delete"] if name == "remove" else [])
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


def _json_file(path: Path, what: str) -> dict[str, Any]:
    """The file's JSON object; its size and JSON are the file's, checked here (the service
    checks what it means)."""
    text = _read_text(path, what)
    try:
        if what == "manifest" and len(text.encode("utf-8", "surrogatepass")) > MAX_MANIFEST_BYTES:
            raise ValueError(f"manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        return strict_json_object(text, what)
    except ValueError as exc:
        raise _Usage(f"invalid {what} {path}: {exc}") from None


def _flag(value: str | None) -> bool | None:
    return None if value is None else value == "true"


def _draft(a: argparse.Namespace) -> TenantDraft:
    return TenantDraft(
        manifest=_json_file(a.manifest, "manifest") if a.manifest else None,
        agent=a.agent,
        agent_config=_json_file(a.agent_config, "agent config") if a.agent_config else None,
        require_push_config=_flag(a.require_push_config),
        dedupe_message_ids=_flag(a.dedupe_message_ids),
        profile=a.profile,
    )


def _refused(exc: TenantInvalid, a: argparse.Namespace) -> _Usage:
    """The service's message, prefixed with the file it is about (as this command always
    printed it)."""
    if exc.field == "manifest" and a.manifest:
        return _Usage(f"invalid manifest {a.manifest}: {exc.message}")
    if exc.field == "agent_config" and a.agent_config:
        return _Usage(f"invalid agent config {a.agent_config}: {exc.message}")
    return _Usage(exc.message)


async def _add(store: TenantStore, a: argparse.Namespace) -> int:
    try:
        record = await TenantService(store).add(a.id, _draft(a))
    except TenantInvalid as exc:
        raise _refused(exc, a) from None
    except TenantExists:
        raise _Usage(f"tenant '{a.id}' already exists (use tenants update)") from None
    print(f"added tenant '{record.id}' (agent {record.agent_kind})")
    return 0


async def _update(store: TenantStore, a: argparse.Namespace) -> int:
    draft = _draft(a)
    if draft.is_empty():
        raise _Usage("nothing to update: give --manifest, --agent, --agent-config or a flag")
    try:
        record = await TenantService(store).update(a.id, draft)
    except TenantInvalid as exc:
        raise _refused(exc, a) from None
    print(f"updated tenant '{record.id}' (revision {record.revision})")
    return 0


async def _list(store: TenantStore, a: argparse.Namespace) -> int:
    records = await TenantService(store).list()
    if a.json:
        print(json.dumps([tenant_json(r) for r in records], indent=2))
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
    print(json.dumps(tenant_json(await TenantService(store).get(a.id)), indent=2))
    return 0


async def _enable(store: TenantStore, a: argparse.Namespace) -> int:
    await TenantService(store).set_enabled(a.id, True)
    print(f"enabled tenant '{a.id}'")
    return 0


async def _disable(store: TenantStore, a: argparse.Namespace) -> int:
    await TenantService(store).set_enabled(a.id, False)
    print(f"disabled tenant '{a.id}'")
    return 0


async def _remove(store: TenantStore, a: argparse.Namespace) -> int:
    await TenantService(store).remove(a.id)
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
