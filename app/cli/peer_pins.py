"""``looping-edge peer-pins list [--json]`` and ``peer-pins remove ORIGIN``: the signing keys
pinned for other agents' origins (negotiation's counterparties, the A2A tools' peers). A pin
holds until an operator removes it: after a peer's legitimate key rotation its calls fail
with ``KEY_CHANGED`` until then, and the next card verified pins the new key."""

from __future__ import annotations

import argparse
import asyncio
import json

from app.cli.common import (
    DATABASE_ERRORS,
    database_failed,
    fail,
    open_database,
    printable,
    settings_or_exit,
)
from app.db.peer_pins import PeerPin
from app.db.storage import open_storage


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("peer-pins", help="the signing keys pinned for other agents")
    inner = parser.add_subparsers(dest="action", required=True)
    listing = inner.add_parser("list", help="every pinned origin with its jku and kid")
    listing.add_argument("--json", action="store_true", help="one JSON array")
    listing.set_defaults(func=_list)
    removing = inner.add_parser("remove", help="forget an origin's pin (after a key rotation)")
    removing.add_argument("origin", help="the origin, as listed")
    removing.set_defaults(func=_remove)


def _shown(pin: PeerPin) -> dict[str, str]:
    return {
        "origin": pin.origin,
        "jku": pin.jku,
        "kid": pin.kid,
        "pinned_at": pin.pinned_at.isoformat(),
    }


def _list(args: argparse.Namespace) -> int:
    settings = settings_or_exit()
    db = open_database(settings)

    async def go() -> list[PeerPin]:
        try:
            return await open_storage(db).peer_pins.all()
        finally:
            await db.dispose()

    try:
        pins = asyncio.run(go())
    except DATABASE_ERRORS as exc:
        return database_failed(exc)
    if args.json:
        print(json.dumps([_shown(p) for p in pins], indent=2))
        return 0
    if not pins:
        print("no pinned peers")
    for pin in pins:
        print("\t".join(printable(v) for v in _shown(pin).values()))
    return 0


def _remove(args: argparse.Namespace) -> int:
    settings = settings_or_exit()
    db = open_database(settings)

    async def go() -> bool:
        try:
            return await open_storage(db).peer_pins.remove(args.origin)
        finally:
            await db.dispose()

    try:
        removed = asyncio.run(go())
    except DATABASE_ERRORS as exc:
        return database_failed(exc)
    if not removed:
        return fail(f"no pin for '{printable(args.origin)}'")
    print(f"removed the pin of {printable(args.origin)}; its next verified card is pinned")
    return 0
