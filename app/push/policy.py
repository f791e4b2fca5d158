"""What one delivery attempt means, and when (if ever) to try again (CONTRACT §7).

Pure functions over an attempt's outcome: no I/O, no clock (``now`` is passed in), jitter
from an injectable random source, so the whole policy is unit-tested without waiting.

- ``2xx`` → delivered (a 200 is done even if the gateway dropped it as a duplicate).
- network errors, timeouts, ``408``, ``429``, ``5xx`` → retry with exponential backoff and
  jitter, never earlier than ``Retry-After`` (RFC 9110 §10.2.3: seconds or an HTTP date),
  until the budget (``push_retry_budget_seconds`` from the first attempt) runs out.
- ``401`` → a few short retries (the gateway may have failed to fetch our JWKS), then
  permanent.
- ``3xx`` → permanent: redirects are never followed (CONTRACT §7), retrying cannot help.
- any other ``4xx`` (``400``, ``404`` …) → permanent.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import Enum

from app.settings import Settings

# A 401 is retried on a short clock: long enough for the gateway's JWKS cache to refetch our
# key (its unknown-kid cooldown is tens of seconds), short enough to give up within a minute.
_UNAUTHORIZED_FACTOR = 5.0
_UNAUTHORIZED_CAP_SECONDS = 60.0


class Outcome(Enum):
    DELIVERED = "delivered"
    RETRYABLE = "retryable"
    UNAUTHORIZED = "unauthorized"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class AttemptResult:
    """What happened on the wire. ``error`` is safe text (no URL, token or exception text)."""

    outcome: Outcome
    status: int | None = None
    error: str | None = None
    retry_after: str | None = None


class Verdict(Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    DEAD = "dead"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    next_attempt_at: datetime | None = None
    unauthorized_attempts: int = 0
    error: str | None = None


def classify_status(status: int) -> Outcome:
    if 200 <= status <= 299:
        return Outcome.DELIVERED
    if status == 401:
        return Outcome.UNAUTHORIZED
    if status in (408, 429) or 500 <= status <= 599:
        return Outcome.RETRYABLE
    return Outcome.PERMANENT


def status_error(status: int) -> str | None:
    if 200 <= status <= 299:
        return None
    if 300 <= status <= 399:
        return f"HTTP {status} (redirects are not followed)"
    return f"HTTP {status}"


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delay-seconds or HTTP-date), or None."""
    if value is None:
        return None
    text = value.strip()
    # RFC 9110 §10.2.3: delay-seconds = 1*DIGIT, ASCII digits only (str.isdigit() also takes
    # "²", which int() refuses). A value past 10**9 s is "beyond any budget" without parsing
    # it (int() refuses strings of more than 4300 digits).
    if text.isascii() and text.isdigit():
        digits = text.lstrip("0") or "0"
        return 1e9 if len(digits) > 9 else float(int(digits))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    base_seconds: float
    max_seconds: float
    budget_seconds: float
    unauthorized_retries: int
    rand: Callable[[], float] = random.random

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            base_seconds=settings.push_retry_base_seconds,
            max_seconds=settings.push_retry_max_seconds,
            budget_seconds=settings.push_retry_budget_seconds,
            unauthorized_retries=settings.push_unauthorized_retries,
        )

    def _jittered(self, delay: float) -> float:
        # "Equal jitter": half fixed, half random, so retries of many rows spread out but a
        # row never retries sooner than half its backoff.
        return delay / 2 + self.rand() * delay / 2

    def backoff(self, attempts: int) -> float:
        """Delay after the ``attempts``-th failed attempt (1-based)."""
        exponent = min(max(attempts - 1, 0), 60)
        return self._jittered(min(self.max_seconds, self.base_seconds * 2.0**exponent))

    def unauthorized_backoff(self, count: int) -> float:
        exponent = min(max(count - 1, 0), 60)
        cap = min(self.max_seconds, _UNAUTHORIZED_CAP_SECONDS)
        return self._jittered(min(cap, self.base_seconds * _UNAUTHORIZED_FACTOR * 2.0**exponent))

    def decide(
        self,
        result: AttemptResult,
        *,
        attempts: int,
        unauthorized_attempts: int,
        first_attempt_at: datetime,
        now: datetime,
    ) -> Decision:
        """The row's next state after an attempt (``attempts`` counts this one)."""
        if result.outcome is Outcome.DELIVERED:
            return Decision(Verdict.DELIVERED)
        error = result.error or "delivery failed"
        if result.outcome is Outcome.PERMANENT:
            return Decision(Verdict.DEAD, error=error)
        if result.outcome is Outcome.UNAUTHORIZED:
            count = unauthorized_attempts + 1
            if count > self.unauthorized_retries:
                return Decision(
                    Verdict.DEAD,
                    unauthorized_attempts=count,
                    error=f"{error} after {count} attempts",
                )
            delay = self.unauthorized_backoff(count)
            return self._schedule(delay, None, first_attempt_at, now, error, count)
        retry_after = parse_retry_after(result.retry_after, now)
        return self._schedule(self.backoff(attempts), retry_after, first_attempt_at, now, error, 0)

    def _schedule(
        self,
        delay: float,
        retry_after: float | None,
        first_attempt_at: datetime,
        now: datetime,
        error: str,
        unauthorized: int,
    ) -> Decision:
        deadline = first_attempt_at + timedelta(seconds=self.budget_seconds)
        if now >= deadline:
            return Decision(Verdict.DEAD, unauthorized_attempts=unauthorized, error=_spent(error))
        wait = max(delay, retry_after or 0.0)
        # Cap before building a timedelta: a hostile Retry-After must not overflow datetime.
        wait = min(wait, self.budget_seconds + 1.0)
        when = now + timedelta(seconds=wait)
        if when > deadline:
            if retry_after is not None and retry_after >= delay:
                # The gateway asked us to wait past our budget: honour it by giving up.
                return Decision(
                    Verdict.DEAD, unauthorized_attempts=unauthorized, error=_spent(error)
                )
            when = deadline  # one last attempt exactly at the end of the budget
        return Decision(
            Verdict.RETRY, next_attempt_at=when, unauthorized_attempts=unauthorized, error=error
        )


def _spent(error: str) -> str:
    return f"{error}; retry budget exhausted"
