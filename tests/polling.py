"""Waiting in tests: poll a condition with a deadline rather than sleeping a guessed time."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def poll_until(
    predicate: Callable[[], Awaitable[T | None] | T | None],
    timeout: float = 20.0,
    *,
    interval: float = 0.05,
    check: Callable[[], object] | None = None,
    what: str = "condition",
) -> T:
    """Call ``predicate`` (sync or async) until it returns something truthy, and return that.

    ``check`` runs before each call and may raise at once (a child process that died, say)
    instead of waiting out the deadline. After ``timeout`` seconds an ``AssertionError`` names
    ``what`` and the last value the predicate returned.
    """
    deadline = time.monotonic() + timeout
    while True:
        if check is not None:
            check()
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:g} s (last: {value!r})")
        await asyncio.sleep(interval)
