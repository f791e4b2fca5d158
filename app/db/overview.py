"""Counts an operator reads at a glance (the admin API's health summary, issue 52): tenants by
state and unfinished turns by status. The push outbox's depth comes from its own store
(``PushOutboxStore.gauges``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Overview:
    tenants_enabled: int
    tenants_disabled: int
    unfinished_turns: Mapping[str, int]  # every unfinished status, zero included


class OverviewStore(Protocol):
    async def overview(self) -> Overview: ...
