"""Shared CLI plumbing: settings from the environment, one-line failures, exit codes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from app.errors import ConfigError
from app.settings import Settings, load_settings

T = TypeVar("T")

EXIT_USAGE = 2
EXIT_CONFIG = 78  # EX_CONFIG (sysexits.h)


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"looping-edge: {message}", file=sys.stderr)
    return code


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        raise SystemExit(fail(exc.message, EXIT_CONFIG)) from None


def run(coro_factory: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await coro_factory()

    return asyncio.run(main())
