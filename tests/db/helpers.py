"""Helpers for tests that look at the statements a unit sends and the plans they get."""

from __future__ import annotations

from typing import Any

import pytest

from app.db.statement_pool import StatementPool


def record_statements(monkeypatch: pytest.MonkeyPatch, pool: StatementPool) -> list[str]:
    """Every statement ``pool`` runs from now on (``fetch``, ``fetchrow``, ``fetchval``), in
    order: the one-statement checks of the PostgreSQL fast paths count them."""
    seen: list[str] = []

    def spy(name: str) -> Any:
        real = getattr(pool, name)

        async def recorded(query: str, *args: Any) -> Any:
            seen.append(query)
            return await real(query, *args)

        return recorded

    for name in ("fetch", "fetchrow", "fetchval"):
        monkeypatch.setattr(pool, name, spy(name))
    return seen


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` plan, the root first."""
    found = [plan]
    for child in plan.get("Plans", []):
        found += plan_nodes(child)
    return found
