"""``looping-edge serve`` and ``looping-edge migrate``."""

from __future__ import annotations

import argparse
import logging

from app.cli.admin import admin_child, admin_listeners
from app.cli.common import (
    DATABASE_ERRORS,
    EXIT_CONFIG,
    database_failed,
    fail,
    open_database,
    settings_or_exit,
)
from app.db.storage import shares_across_processes
from app.errors import ConfigError
from app.settings import Settings

MAX_SERVE_WORKERS = 64
# How long uvicorn's supervisor waits for a worker process to answer its health ping before it
# kills and replaces it. A spawned worker answers only once it has imported the app; on a busy
# host that took longer than uvicorn's own default, and every worker was killed in a loop.
WORKER_HEALTHCHECK_SECONDS = 60


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the edge (HTTP, gRPC with EDGE_GRPC_PORT, in-process worker, push; the admin "
        "API on EDGE_ADMIN_LISTEN)",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--no-worker", action="store_true", help="do not run turn workers here")
    serve.add_argument("--no-push", action="store_true", help="do not deliver pushes here")
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.set_defaults(func=cmd_serve)

    migrate = sub.add_parser("migrate", help="upgrade the database schema to head (Alembic)")
    migrate.set_defaults(func=cmd_migrate)


def cmd_migrate(_: argparse.Namespace) -> int:
    from app.db.migrate import upgrade_to_head

    settings = settings_or_exit()
    open_database(settings)  # the URL's shape and driver first: exit 78 naming DATABASE_URL
    try:
        upgrade_to_head(settings.database_url)
    except DATABASE_ERRORS as exc:
        return database_failed(exc)
    print(f"schema at head on {settings.database_url.split('://', 1)[0]}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from app.ops.logging import configure_logging

    settings = settings_or_exit()
    if not 0 <= args.port <= 65535:
        return fail("--port must be between 0 and 65535")
    if not 1 <= args.workers <= MAX_SERVE_WORKERS:
        # Each process holds its own database pools (EDGE_DB_POOL_SIZE and the read pool):
        # past a few dozen, PostgreSQL's max_connections and the host's memory run out first.
        return fail(f"--workers must be between 1 and {MAX_SERVE_WORKERS}")
    if args.workers > 1 and not shares_across_processes(settings.database_url):
        return fail("--workers > 1 needs PostgreSQL (SQLite runs in one process)", EXIT_CONFIG)
    try:
        settings.validate_for_serving()
        settings.signing_key_json()
    except ConfigError as exc:
        return fail(exc.message, EXIT_CONFIG)
    configure_logging(settings.log_level, json_logs=settings.log_json)
    raise_open_file_limit(settings.max_connections + _fd_headroom(settings))
    # The factory builds the services inside each uvicorn worker process.
    import os

    os.environ["LOOPING_EDGE_BACKGROUND"] = _background_flags(args)
    os.environ["LOOPING_EDGE_GRPC_HOST"] = args.host
    admin = settings.admin_address
    if admin is not None and admin[1] == args.port:
        return fail("EDGE_ADMIN_LISTEN: must not be the public port (--port)", EXIT_CONFIG)
    try:
        listeners = admin_listeners(admin) if admin is not None else []
    except OSError as exc:
        why = exc.strerror or "in use?"
        return fail(
            f"EDGE_ADMIN_LISTEN: cannot listen on {settings.admin_listen} ({why})", EXIT_CONFIG
        )
    with admin_child(listeners):
        _run_public(args, settings)
    return 0


def _run_public(args: argparse.Namespace, settings: Settings) -> None:
    import uvicorn

    from app.http.connection import HttpLimits, protocol_class

    uvicorn.run(
        "app.asgi:app",
        factory=False,
        host=args.host,
        port=args.port,
        workers=args.workers,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
        # X-Forwarded-* is never trusted for anything security-relevant: audience and card URLs
        # come from PUBLIC_URL only (CONTRACT §2).
        proxy_headers=False,
        # uvicorn's httptools protocol with the head cap, the deadlines and the connection cap
        # it lacks (app/http/connection.py): named, not "auto": the C parser and loop are part
        # of the measured configuration (uvicorn[standard] installs both). A silent fallback
        # to h11/asyncio would cost a large share of the throughput.
        http=protocol_class(HttpLimits.of(settings)),
        loop="uvloop",
        # An idle keep-alive connection; a slow one is bounded by the protocol's deadlines.
        timeout_keep_alive=settings.keep_alive_seconds,
        server_header=False,
        access_log=False,
        log_config=None,
    )


def _fd_headroom(settings: Settings) -> int:
    """File descriptors a process needs besides its client connections: the database pools
    (at most 1.5 x EDGE_DB_POOL_SIZE, docs/configuration.md), the listening socket, JWKS and
    push connections, logs and the interpreter's own."""
    return settings.db_pool_size * 3 // 2 + 128


def raise_open_file_limit(wanted: int) -> None:
    """Raise the soft open-file limit to ``wanted`` (at most the hard limit), so the
    connection cap, not ``accept()`` failing with EMFILE, is what turns clients away; uvicorn's
    worker processes inherit it. Says so when the hard limit is lower."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < wanted:
        logging.getLogger("looping_edge.serve").warning(
            "open-file limit %d is below EDGE_MAX_CONNECTIONS plus the pools (%d): "
            "raise ulimit -n or lower EDGE_MAX_CONNECTIONS",
            target,
            wanted,
        )


def _background_flags(args: argparse.Namespace) -> str:
    flags = []
    if not args.no_worker:
        flags.append("workers")
    if not args.no_push:
        flags.append("push")
    return ",".join(flags)
