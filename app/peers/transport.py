"""The HTTP side of calling a peer: one ``httpx`` client per call, no redirects followed
(a 3xx is a failure: it could point anywhere, and would take our credential along), no proxy
from the environment, ``Accept-Encoding: identity`` (a compressed body could expand past the
bound), a deadline per request, and the answer's size bounded while it arrives
(``Content-Length`` is only a hint; a stream counts as one answer).

The byte bound sits in a transport wrapper because the a2a-sdk client reads whole bodies
itself; ``ResponseTooLarge`` leaves the wrapper as it is, past the SDK's error mapping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


class ResponseTooLarge(Exception):
    """The peer's answer passed the byte bound."""


class EncodedResponse(Exception):
    """The peer answered with a content encoding we did not ask for."""


class _Bounded(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, budget: list[int]) -> None:
        self._inner = inner
        self._budget = budget

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._budget[0] -= len(chunk)
            if self._budget[0] < 0:
                raise ResponseTooLarge
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """``inner`` with each response body (a stream as a whole) bounded by ``max_bytes``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: int) -> None:
        self._inner = inner
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            await response.aclose()
            raise ResponseTooLarge
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            await response.aclose()
            raise EncodedResponse
        stream = response.stream
        if not isinstance(stream, httpx.AsyncByteStream):
            raise EncodedResponse  # an async transport answers with an async stream
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Bounded(stream, [self._max_bytes]),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        return None  # the inner transport is the caller's (shared by the process)


def peer_http_client(
    inner: httpx.AsyncBaseTransport,
    *,
    max_bytes: int,
    request_seconds: float,
    auth: httpx.Auth | None = None,
) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=BoundedTransport(inner, max_bytes),
        follow_redirects=False,
        trust_env=False,
        timeout=httpx.Timeout(request_seconds),
        headers={"Accept-Encoding": "identity", "A2A-Version": "1.0"},
        auth=auth,
    )
