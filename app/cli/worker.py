"""``looping-edge worker``: turn workers (and the push deliverer) without HTTP, for scale-out
on PostgreSQL and for crash tests. Runs until SIGTERM/SIGINT, then drains gracefully: no new
claims, running turns get a grace period, the rest are handed back to the queue."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from typing import TYPE_CHECKING

import uvloop

from app.cli.common import EXIT_CONFIG, fail, settings_or_exit
from app.errors import ConfigError

if TYPE_CHECKING:
    from app.services import EdgeServices


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = sub.add_parser(
        "worker",
        help="run turn workers and push delivery only (no HTTP); several on PostgreSQL",
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="identities drained in parallel (default EDGE_WORKER_CONCURRENCY)",
    )
    worker.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    from app.ops.logging import configure_logging
    from app.services import build_services

    settings = settings_or_exit()
    if args.concurrency is not None:
        if not 1 <= args.concurrency <= 1024:
            return fail("--concurrency must be between 1 and 1024")
        settings = settings.model_copy(update={"worker_concurrency": args.concurrency})
    try:
        services = build_services(settings, environ=dict(os.environ))
    except ConfigError as exc:
        return fail(exc.message, EXIT_CONFIG)
    configure_logging(settings.log_level, json_logs=settings.log_json)
    # The same event loop as ``serve`` (uvloop). A worker is mostly database round trips, and
    # asyncio's socket writes showed in its profile, though the turn benchmark did not move:
    # kept so both commands run on one kind of loop.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_run(services))


async def _run(services: EdgeServices) -> int:
    from app.runtime import attach_background

    attach_background(services, workers=True, push=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    started = []
    try:
        for service in services.background:
            await service.start()
            started.append(service)
        await stop.wait()
    except ConfigError as exc:
        return fail(exc.message, EXIT_CONFIG)
    finally:
        services.readiness.draining = True
        for service in reversed(started):
            await service.stop()
        await services.aclose()
    return 0
