"""``looping-edge admin``: the admin API alone on ``EDGE_ADMIN_LISTEN`` (issue 52), and the
child process ``looping-edge serve`` starts for it (one process, whatever ``--workers``).

The admin API runs in a process of its own under ``serve`` too: uvicorn's worker processes
share one listening socket, and the admin listener must be opened exactly once. Like the CLI,
it changes the database only; the running edges pick tenant changes up within
``EDGE_TENANT_REFRESH_SECONDS``. ``serve`` binds the admin address itself before it starts
anything and hands the bound sockets to the child (``--listen-fd``): an address it cannot
bind ends ``serve`` at once with one line, instead of a child that dies unnoticed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence

from app.cli.common import EXIT_CONFIG, fail, settings_or_exit
from app.errors import ConfigError

log = logging.getLogger("looping_edge.serve")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = sub.add_parser(
        "admin", help="run the admin API alone on EDGE_ADMIN_LISTEN (docs/admin-api.md)"
    )
    # serve's child: listen on these bound sockets instead of binding EDGE_ADMIN_LISTEN.
    admin.add_argument("--listen-fd", type=int, action="append", help=argparse.SUPPRESS)
    admin.set_defaults(func=cmd_admin)


def cmd_admin(args: argparse.Namespace) -> int:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

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
    config = uvicorn.Config(
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
    # What ``uvicorn.run`` does for one process, with the sockets ``serve`` bound, if any.
    server = uvicorn.Server(config)
    sockets = [socket.socket(fileno=fd) for fd in args.listen_fd or ()]
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=sockets or None)
    return 0 if server.started else STARTUP_FAILURE


def admin_listeners(address: tuple[str, int]) -> list[socket.socket]:
    """The admin address bound (not yet listening: the child listens once it serves), one
    socket per address the host resolves to, as asyncio's ``create_server`` binds them.
    ``OSError`` when it cannot be bound (in use, not this host's address)."""
    host, port = address
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, where in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(where)
    except OSError:
        for sock in bound:
            sock.close()
        raise
    return bound


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when ``serve`` dies, however it dies (Linux
    ``PR_SET_PDEATHSIG``), so no admin listener outlives its edge."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@contextlib.contextmanager
def admin_child(listeners: Sequence[socket.socket]) -> Iterator[None]:
    """While ``serve`` runs: ``looping-edge admin`` as a child process serving ``listeners``
    (none: no child). The child holds the sockets from then on; this process closes its own."""
    if not listeners:
        yield
        return
    fds = [sock.fileno() for sock in listeners]
    flags = [arg for fd in fds for arg in ("--listen-fd", str(fd))]
    try:
        child = subprocess.Popen(  # noqa: S603 - this interpreter, fd numbers only
            [sys.executable, "-m", "app.cli.main", "admin", *flags],
            pass_fds=fds,
            preexec_fn=_die_with_parent,
        )
    finally:
        for sock in listeners:
            sock.close()
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
