"""``looping-edge negotiations list --tenant T [--json]``: a tenant's negotiations, both
directions, oldest update first (docs/negotiation.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from app.cli.common import (
    DATABASE_ERRORS,
    database_failed,
    open_database,
    printable,
    settings_or_exit,
)
from app.db.negotiations import Negotiation
from app.db.storage import open_storage

_FIELDS = ("id", "task_id", "direction", "counterparty", "intent", "state", "verdict", "basis")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("negotiations", help="read the negotiations of a tenant")
    inner = parser.add_subparsers(dest="action", required=True)
    listing = inner.add_parser("list", help="every negotiation of a tenant, both directions")
    listing.add_argument("--tenant", required=True)
    listing.add_argument("--json", action="store_true", help="one JSON array")
    listing.set_defaults(func=_run)


def _shown(row: Negotiation) -> dict[str, Any]:
    return {name: getattr(row, name) for name in _FIELDS}


def _run(args: argparse.Namespace) -> int:
    settings = settings_or_exit()
    db = open_database(settings)

    async def go() -> list[Negotiation]:
        try:
            return await open_storage(db).negotiations.list_for(args.tenant)
        finally:
            await db.dispose()

    try:
        rows = asyncio.run(go())
    except DATABASE_ERRORS as exc:
        return database_failed(exc)
    if args.json:
        print(json.dumps([_shown(r) for r in rows], indent=2))
        return 0
    if not rows:
        print(f"no negotiations for tenant '{printable(args.tenant)}'")
    for row in rows:
        print("\t".join(printable(str(v if v is not None else "-")) for v in _shown(row).values()))
    return 0
