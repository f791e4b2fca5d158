"""``looping-edge admin``: the admin API alone on ``EDGE_ADMIN_LISTEN`` (issue 52), and the
child process ``looping-edge serve`` starts for it (one process, whatever ``--workers``).

The admin API runs in a process of its own under ``serve`` too: uvicorn's worker processes
share one listening socket, and the admin listener must be opened exactly once. Like the CLI,
it changes the database only; the running edges pick tenant changes up within
``EDGE_TENANT_REFRESH_SECONDS``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from app.cli.common import EXIT_CONFIG, fail, settings_or_exit
from app.errors import ConfigError

log = logging.getLogger("looping_edge.serve")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = sub.add_parser(
        "admin", help="run the admin API alone on EDGE_ADMIN_LISTEN (docs/admin-api.md)"
    )
    admin.set_defaults(func=cmd_admin)


def cmd_admin(_: argparse.Namespace) -> int:
    import uvicorn

    from app.admin.app import create_admin_app
    from app.http.connection import HttpLimits, protocol_class
    from app.ops.logging import configure_logging
    from app.services import build_services

    settings = settings_or_exit()
    address = settings.admin_address
    if address is None:
        return fail("EDGE_ADMIN_LISTEN: required (e.g. 127.0.0.1:8081)", EXIT_CONFIG)
    try:
        services = build_services(settings, environ=dict(os.environ))
    except ConfigError as exc:
        return fail(exc.message, EXIT_CONFIG)
    configure_logging(settings.log_level, json_logs=settings.log_json)
    host, port = address
    uvicorn.run(
        create_admin_app(services, owns_services=True),
        host=host,
        port=port,
        proxy_headers=False,
        http=protocol_class(HttpLimits.of(settings)),
        timeout_keep_alive=settings.keep_alive_seconds,
        server_header=False,
        access_log=False,
        log_config=None,
    )
    return 0


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when ``serve`` dies, however it dies (Linux
    ``PR_SET_PDEATHSIG``), so no admin listener outlives its edge."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@contextlib.contextmanager
def admin_child(enabled: bool) -> Iterator[None]:
    """While ``serve`` runs: ``looping-edge admin`` as a child process (when ``enabled``)."""
    if not enabled:
        yield
        return
    child = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "admin"], preexec_fn=_die_with_parent
    )
    try:
        yield
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
