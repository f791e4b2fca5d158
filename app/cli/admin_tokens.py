"""``looping-edge admin-tokens create|list|revoke``: the admin API's bearer tokens (issue 52).

    looping-edge admin-tokens create --name NAME --scope SCOPE [--scope SCOPE ...]
                                     [--expires-in DAYS]
    looping-edge admin-tokens list
    looping-edge admin-tokens revoke NAME

``create`` prints the token once, alone on the last line of its output; only its hash is
stored, so a lost token is revoked and replaced, never shown again.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from app.admin.tokens import (
    SCOPES,
    AdminTokenExists,
    AdminTokenInvalid,
    AdminTokenMissing,
    AdminTokenRecord,
    AdminTokens,
)
from app.cli.common import DATABASE_ERRORS, database_failed, fail, open_database, settings_or_exit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tokens = sub.add_parser("admin-tokens", help="manage the admin API's bearer tokens")
    tsub = tokens.add_subparsers(dest="admin_tokens_cmd", required=True)

    create = tsub.add_parser("create", help="create a token (printed once, on the last line)")
    create.add_argument("--name", required=True, help="unique name, logged with each write")
    create.add_argument(
        "--scope", action="append", required=True, choices=SCOPES, help="repeat for several"
    )
    create.add_argument("--expires-in", type=float, metavar="DAYS", help="default: never")
    create.set_defaults(func=lambda a: _run(_create, a))

    lst = tsub.add_parser("list", help="one line per token, sorted by name")
    lst.set_defaults(func=lambda a: _run(_list, a))

    revoke = tsub.add_parser("revoke", help="revoke a token (at once, for good)")
    revoke.add_argument("name")
    revoke.set_defaults(func=lambda a: _run(_revoke, a))


def _when(value: datetime | None, never: str) -> str:
    return never if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _state(record: AdminTokenRecord, now: datetime) -> str:
    if record.revoked_at is not None:
        return "revoked"
    return "active" if record.usable_at(now) else "expired"


async def _create(tokens: AdminTokens, a: argparse.Namespace) -> int:
    issued = await tokens.create(a.name, a.scope, expires_in_days=a.expires_in)
    record = issued.record
    print(
        f"created admin token '{record.name}' (scopes {' '.join(record.scopes)}; "
        f"expires {_when(record.expires_at, 'never')})"
    )
    print("the token follows; it is shown only this once:")
    print(issued.token)
    return 0


async def _list(tokens: AdminTokens, _: argparse.Namespace) -> int:
    records = await tokens.list()
    if not records:
        print("no admin tokens (create one with: looping-edge admin-tokens create ...)")
    now = datetime.now(UTC)
    for r in records:
        print(
            f"{r.name}\t{_state(r, now)}\t{','.join(r.scopes)}\t"
            f"created {_when(r.created_at, '-')}\tlast used {_when(r.last_used_at, 'never')}\t"
            f"expires {_when(r.expires_at, 'never')}"
        )
    return 0


async def _revoke(tokens: AdminTokens, a: argparse.Namespace) -> int:
    await tokens.revoke(a.name)
    print(f"revoked admin token '{a.name}'")
    return 0


_Action = Callable[[AdminTokens, argparse.Namespace], Awaitable[int]]


def _run(action: _Action, args: argparse.Namespace) -> int:
    settings = settings_or_exit()
    db = open_database(settings)

    async def go() -> int:
        try:
            return await action(AdminTokens(db.storage.admin_tokens), args)
        finally:
            await db.dispose()

    try:
        return asyncio.run(go())
    except AdminTokenInvalid as exc:
        return fail(str(exc))
    except AdminTokenExists:
        return fail(f"an admin token named '{args.name}' exists (revoke it or pick another name)")
    except AdminTokenMissing:
        return fail(f"no admin token '{args.name}'")
    except DATABASE_ERRORS as exc:
        return database_failed(exc)
