"""ASGI entry for uvicorn (``app.asgi:app``): builds settings and services once per process.

The CLI passes which background loops to run through ``LOOPING_EDGE_BACKGROUND`` (and the
host the gRPC port binds, ``LOOPING_EDGE_GRPC_HOST``) because
uvicorn's multi-worker mode imports the app in fresh processes; this module is the process
entry point, the one place besides the CLI that reads the environment.
"""

from __future__ import annotations

import os
import sys

from app.errors import ConfigError
from app.main import create_app
from app.ops.logging import configure_logging
from app.runtime import attach_background
from app.services import build_services
from app.settings import load_settings

try:
    _settings = load_settings()
    # Each process logs as configured: a worker of ``serve --workers N`` is a fresh
    # interpreter (uvicorn spawns it) where the CLI's logging setup never ran.
    configure_logging(_settings.log_level, json_logs=_settings.log_json)
    _services = build_services(_settings, environ=dict(os.environ))
except ConfigError as exc:
    print(f"looping-edge: {exc.message}", file=sys.stderr)  # noqa: T201 - process entry
    raise SystemExit(78) from None

_flags = set(filter(None, os.environ.get("LOOPING_EDGE_BACKGROUND", "workers,push").split(",")))
attach_background(_services, workers="workers" in _flags, push="push" in _flags)
# The gRPC port (EDGE_GRPC_PORT) listens on the host the CLI's --host names, as HTTP does.
app = create_app(_services, grpc_host=os.environ.get("LOOPING_EDGE_GRPC_HOST", "127.0.0.1"))
