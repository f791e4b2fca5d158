"""Which background loops a process runs: ``serve`` (HTTP + workers + push by default) or
``worker`` (workers + push, no HTTP)."""

from __future__ import annotations

import os
import socket
import uuid

from app.agents.registry import AgentRegistry
from app.push.runtime import build_push_deliverer
from app.services import EdgeServices
from app.worker.runtime import build_worker


def process_owner() -> str:
    """A unique lease-owner name for this process (host, pid, random suffix)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def attach_background(
    services: EdgeServices,
    *,
    workers: bool = True,
    push: bool = True,
    agents: AgentRegistry | None = None,
) -> None:
    """Add the background loops; ``agents`` replaces the built-in kinds (embedders, tests)."""
    owner = process_owner()
    if workers:
        worker = build_worker(services, owner=owner, agents=agents)
        if worker is not None:
            services.background.append(worker)
    if push:
        deliverer = build_push_deliverer(services, owner=owner)
        if deliverer is not None:
            services.background.append(deliverer)
