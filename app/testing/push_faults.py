"""The faults a test push receiver (``app.testing.push_receiver``) can answer with: error
statuses, a hang past the sender's deadline, a redirect, a broken body."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Fault:
    """Answer ``status`` for the first ``times`` attempts (``None``: every attempt)."""

    status: int = 200
    times: int | None = None
    hang_seconds: float = 0.0
    retry_after: str | None = None
    location: str | None = None
    # "drip": the status line and headers, then the body one byte a second (past any attempt
    # deadline); "cut": the status line and headers, then part of the body and a closed socket.
    broken_body: str | None = None
    seen: int = 0

    def applies(self) -> bool:
        self.seen += 1
        return self.times is None or self.seen <= self.times


def fail_first(n: int, status: int = 503, retry_after: str | None = None) -> Fault:
    return Fault(status=status, times=n, retry_after=retry_after)


def always(status: int, retry_after: str | None = None) -> Fault:
    return Fault(status=status, times=None, retry_after=retry_after)


def unauthorized(n: int) -> Fault:
    return Fault(status=401, times=n)


def hang(seconds: float, times: int | None = None) -> Fault:
    return Fault(status=200, times=times, hang_seconds=seconds)


def redirect(location: str) -> Fault:
    return Fault(status=307, times=None, location=location)


def broken_body(kind: str, status: int = 200) -> Fault:
    """Answer ``status`` at once, then break the body (``"drip"`` or ``"cut"``)."""
    if kind not in ("drip", "cut"):
        raise ValueError("broken_body: 'drip' or 'cut'")
    return Fault(status=status, times=None, broken_body=kind)
