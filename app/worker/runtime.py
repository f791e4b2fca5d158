"""Turn workers as a background service (placeholder until the durable-turns work lands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.services import BackgroundService, EdgeServices


def build_worker(services: EdgeServices, *, owner: str) -> BackgroundService | None:
    return None
