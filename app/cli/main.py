"""``looping-edge``: the operator's command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.cli import admin, agents, extra_commands, serve, tenants


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="looping-edge",
        description="Multi-tenant, zero-trust A2A gateway edge. Configuration comes from the "
        "environment (see docs/configuration.md: A2A_SIGNING_KEY, GATEWAY_ORIGINS, PUBLIC_URL, "
        "DATABASE_URL).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve.register(sub)
    admin.register(sub)
    tenants.register(sub)
    agents.register(sub)
    # Commands contributed by other packages (worker, push, gateway-dev).
    for extra in extra_commands.REGISTRARS:
        extra(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
