"""``looping-edge push dead|replay``: the operator's view of push dead letters (CONTRACT §7).

    looping-edge push dead [--json] [--tenant T] [--limit N]
    looping-edge push replay ID [ID ...] | --all [--tenant T]

Only the database is needed (``DATABASE_URL``). A replayed row starts over with a fresh retry
budget and is delivered by whichever ``serve``/``worker`` process runs push delivery.
"""

from __future__ import annotations

import argparse
import json

from app.cli.common import (
    DATABASE_ERRORS,
    database_failed,
    fail,
    open_database,
    run,
    settings_or_exit,
)
from app.db.engine import Database
from app.push.dead_letters import list_dead, replay


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    push = sub.add_parser("push", help="push delivery: list and replay dead letters")
    psub = push.add_subparsers(dest="push_cmd", required=True)

    dead = psub.add_parser("dead", help="list dead-lettered pushes")
    dead.add_argument("--json", action="store_true", help="one JSON document")
    dead.add_argument("--tenant", help="only this tenant")
    dead.add_argument("--limit", type=int, default=1000, help="at most N rows (default 1000)")
    dead.set_defaults(func=cmd_dead)

    rep = psub.add_parser("replay", help="re-queue dead letters (by id, or --all)")
    rep.add_argument("ids", nargs="*", type=int, metavar="ID")
    rep.add_argument("--all", action="store_true", help="every dead letter (of --tenant)")
    rep.add_argument("--tenant", help="only this tenant")
    rep.set_defaults(func=cmd_replay)


_MAX_ID = 2**63 - 1  # the outbox's id column is a 64-bit integer


def _database() -> Database:
    return open_database(settings_or_exit())


def cmd_dead(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 100_000:
        return fail("--limit must be between 1 and 100000")
    db = _database()

    async def go() -> int:
        try:
            letters = await list_dead(db, tenant=args.tenant, limit=args.limit)
        except DATABASE_ERRORS as exc:
            return database_failed(exc)
        finally:
            await db.dispose()
        if args.json:
            print(json.dumps({"dead": [d.as_json() for d in letters]}, indent=2))
            return 0
        if not letters:
            print("no dead letters")
            return 0
        print(f"{'ID':>8}  {'TENANT':<16} {'TASK':<36}  {'KIND':<8} {'TRIES':>5}  LAST ERROR")
        for d in letters:
            print(
                f"{d.id:>8}  {d.tenant:<16} {d.task_id:<36}  {d.kind:<8} {d.attempts:>5}  "
                f"{d.last_error or '-'}  ({d.created_at:%Y-%m-%d %H:%M:%S}Z)"
            )
        return 0

    return run(go)


def cmd_replay(args: argparse.Namespace) -> int:
    if args.all == bool(args.ids):
        return fail("give dead-letter IDs or --all (not both)")
    if any(not 1 <= i <= _MAX_ID for i in args.ids):
        return fail("dead-letter IDs are positive integers (as `push dead` lists them)")
    db = _database()

    async def go() -> int:
        try:
            report = await replay(db, ids=None if args.all else list(args.ids), tenant=args.tenant)
        except DATABASE_ERRORS as exc:
            return database_failed(exc)
        finally:
            await db.dispose()
        print(f"re-queued {len(report.requeued)} push(es)" + _ids(report.requeued))
        if report.superseded:
            print(
                f"skipped {len(report.superseded)} push(es) superseded by a later "
                "delivered push" + _ids(report.superseded)
            )
        if report.not_dead:
            print(f"not dead letters (ignored): {', '.join(map(str, report.not_dead))}")
            return 1
        return 0

    return run(go)


def _ids(ids: tuple[int, ...]) -> str:
    return f": {', '.join(map(str, ids))}" if ids else ""
