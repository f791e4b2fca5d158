"""The slots for large bodies on their own (issue 55): a process-wide bound, a per-tenant
bound, a refusal after the wait, and a freed slot served to the next waiter."""

from __future__ import annotations

import asyncio

import pytest

from app.attachments.admission import LargeBodies, SlotLimits
from app.errors import TooManyRequests


async def test_bounds_per_process_and_per_tenant() -> None:
    gate = LargeBodies(SlotLimits(slots=2, per_tenant=1, wait_seconds=0.05))
    async with gate.admitted("a"):
        with pytest.raises(TooManyRequests) as refused:
            async with gate.admitted("a"):
                pass
        assert refused.value.reason == "large_bodies_busy" and refused.value.status_code == 429
        async with gate.admitted("b"):
            assert gate.in_flight == 2
            with pytest.raises(TooManyRequests):
                async with gate.admitted("c"):
                    pass
    assert gate.in_flight == 0


async def test_a_waiter_gets_the_freed_slot() -> None:
    gate = LargeBodies(SlotLimits(slots=1, per_tenant=1, wait_seconds=5))
    order: list[str] = []

    async def hold(name: str, seconds: float) -> None:
        async with gate.admitted("t"):
            order.append(name)
            await asyncio.sleep(seconds)

    await asyncio.gather(hold("first", 0.05), hold("second", 0))
    assert order == ["first", "second"] and gate.in_flight == 0


async def test_a_failure_inside_frees_the_slot() -> None:
    gate = LargeBodies(SlotLimits(slots=1, per_tenant=1, wait_seconds=0.05))
    with pytest.raises(ValueError):
        async with gate.admitted("t"):
            raise ValueError
    async with gate.admitted("t"):
        assert gate.in_flight == 1
