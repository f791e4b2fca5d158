"""``looping-edge agents try TENANT "text"``: its arguments. The command's body lives in
``app.cli.agent_try``, imported when the command runs: the model loop's libraries take seconds
to import, which every other command of the CLI would otherwise pay."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agents = sub.add_parser("agents", help="run tenants' agents locally")
    asub = agents.add_subparsers(dest="agents_cmd", required=True)
    try_ = asub.add_parser("try", help="run one turn of a tenant's agent and print each step")
    try_.add_argument("tenant")
    try_.add_argument("text", help="the turn's text (a gateway <turn …> envelope is parsed)")
    try_.add_argument("--identity", default="agents-try", help="the caller's identity key")
    try_.set_defaults(func=cmd_try)


def cmd_try(args: argparse.Namespace) -> int:
    from app.cli.agent_try import run_try

    return run_try(args)
