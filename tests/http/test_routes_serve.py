"""The RPC endpoint under ``looping-edge serve`` over real sockets (issue 47 rows 5 and 6)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
import pytest

from tests.http.served import serving, until_closed
from tests.polling import poll_until

pytestmark = pytest.mark.slow


async def test_an_unauthenticated_chunked_upload_is_cut_short(tmp_path: Path) -> None:
    # After an early 401 the connection stayed open and the edge read 553 MB in 10 s of a
    # chunked body it had no use for (issue 47 row 6).
    async with serving(tmp_path) as edge:
        reader, writer = await asyncio.open_connection("127.0.0.1", edge.port)
        writer.write(
            b"POST /a2a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        answer = asyncio.create_task(until_closed(reader, 10))
        chunk = b"10000\r\n" + b"a" * 65536 + b"\r\n"
        sent = 0
        started = time.monotonic()
        with contextlib.suppress(ConnectionError):
            while not answer.done() and time.monotonic() - started < 5:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        elapsed = time.monotonic() - started
        closed = await answer
        writer.close()
        edge.child.check_alive()
    assert closed is not None and elapsed < 2, (closed, elapsed)
    assert sent < 32_000_000, sent


async def test_an_aborted_upload_is_counted_and_logs_no_error(tmp_path: Path) -> None:
    # One "Exception in ASGI application: ClientDisconnect" per aborted upload (row 5).
    async with serving(tmp_path) as edge:
        for _ in range(3):
            _reader, writer = await asyncio.open_connection("127.0.0.1", edge.port)
            writer.write(edge.token_head(1000) + b'{"jsonrpc":')
            await writer.drain()
            await asyncio.sleep(0.3)  # the token is checked and the body awaited
            writer.close()
        async with httpx.AsyncClient(trust_env=False) as client:

            async def counted() -> bool:
                text = (await client.get(edge.base + "/metrics")).text
                return "edge_client_disconnects_total 3.0" in text

            await poll_until(counted, 10, check=edge.child.check_alive, what="3 disconnects")
        logs = edge.child.logs()
    assert "ClientDisconnect" not in logs and "Exception in ASGI" not in logs, logs[-2000:]
    assert '"ERROR"' not in logs, logs[-2000:]
