"""``LISTEN looping_push`` on PostgreSQL: a latency aid for cross-process wake-ups.

The deliverer polls regardless, so this loop is best effort: on any connection error it waits
and reconnects, and a missed notification only delays a push by one poll interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from app.db.engine import Database
from app.push.wakeup import CHANNEL

log = logging.getLogger(__name__)

_RECONNECT_SECONDS = 5.0


async def listen_forever(db: Database, on_notify: Callable[[], None]) -> None:
    """Run until cancelled; call ``on_notify`` for every notification on the channel."""

    def callback(*_: Any) -> None:
        on_notify()

    while True:
        try:
            async with db.engine.connect() as conn:
                raw = await conn.get_raw_connection()
                driver: Any = raw.driver_connection
                closed = asyncio.Event()
                driver.add_termination_listener(lambda *_, done=closed: done.set())
                await driver.add_listener(CHANNEL, callback)
                try:
                    # Wake once on (re)connect: notifications sent while we were away are lost.
                    on_notify()
                    await closed.wait()
                finally:
                    if not driver.is_closed():
                        await driver.remove_listener(CHANNEL, callback)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any driver or network failure: poll covers, retry later
            log.warning("push LISTEN connection failed (%s); retrying", type(exc).__name__)
        await asyncio.sleep(_RECONNECT_SECONDS)
