"""Push delivery as a background service (placeholder until the push work lands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.services import BackgroundService, EdgeServices


def build_push_deliverer(services: EdgeServices, *, owner: str) -> BackgroundService | None:
    return None
