"""The retry policy as pure functions: classification, backoff, Retry-After, budget, 401."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.push.policy import (
    AttemptResult,
    Outcome,
    RetryPolicy,
    Verdict,
    classify_status,
    parse_retry_after,
    status_error,
)

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def policy(rand: float = 1.0, **kw: float) -> RetryPolicy:
    values = {"base_seconds": 1.0, "max_seconds": 300.0, "budget_seconds": 3600.0}
    values.update(kw)
    return RetryPolicy(**values, unauthorized_retries=3, rand=lambda: rand)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.DELIVERED),
        (202, Outcome.DELIVERED),
        (204, Outcome.DELIVERED),
        (301, Outcome.PERMANENT),
        (302, Outcome.PERMANENT),
        (307, Outcome.PERMANENT),
        (400, Outcome.PERMANENT),
        (403, Outcome.PERMANENT),
        (404, Outcome.PERMANENT),
        (410, Outcome.PERMANENT),
        (401, Outcome.UNAUTHORIZED),
        (408, Outcome.RETRYABLE),
        (429, Outcome.RETRYABLE),
        (500, Outcome.RETRYABLE),
        (502, Outcome.RETRYABLE),
        (503, Outcome.RETRYABLE),
        (599, Outcome.RETRYABLE),
    ],
)
def test_classify(status: int, outcome: Outcome) -> None:
    assert classify_status(status) is outcome


def test_status_error_text() -> None:
    assert status_error(200) is None
    assert status_error(302) == "HTTP 302 (redirects are not followed)"
    assert status_error(503) == "HTTP 503"


def test_retry_after_forms() -> None:
    assert parse_retry_after("120", NOW) == 120
    assert parse_retry_after(" 5 ", NOW) == 5
    assert parse_retry_after("Tue, 01 Jan 2030 12:01:00 GMT", NOW) == 60
    assert parse_retry_after("Tue, 01 Jan 2030 11:00:00 GMT", NOW) == 0  # in the past
    assert parse_retry_after("soon", NOW) is None
    assert parse_retry_after("-5", NOW) is None
    assert parse_retry_after(None, NOW) is None
    assert parse_retry_after("9" * 40, NOW) == 10**9  # bounded, no overflow


def test_backoff_is_exponential_capped_and_jittered() -> None:
    high, low = policy(rand=1.0), policy(rand=0.0)
    assert [high.backoff(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert [low.backoff(n) for n in (1, 2, 3, 4)] == [0.5, 1, 2, 4]
    assert high.backoff(30) == 300 and high.backoff(10_000) == 300


def _decide(
    p: RetryPolicy,
    result: AttemptResult,
    *,
    attempts: int = 1,
    unauth: int = 0,
    first: datetime = NOW,
    now: datetime = NOW,
):  # type: ignore[no-untyped-def]
    return p.decide(
        result, attempts=attempts, unauthorized_attempts=unauth, first_attempt_at=first, now=now
    )


def test_delivered_and_permanent() -> None:
    p = policy()
    assert _decide(p, AttemptResult(Outcome.DELIVERED, 200)).verdict is Verdict.DELIVERED
    dead = _decide(p, AttemptResult(Outcome.PERMANENT, 400, "HTTP 400"))
    assert dead.verdict is Verdict.DEAD and dead.error == "HTTP 400"


def test_retry_schedules_the_backoff() -> None:
    d = _decide(policy(), AttemptResult(Outcome.RETRYABLE, 503, "HTTP 503"), attempts=3)
    assert d.verdict is Verdict.RETRY and d.next_attempt_at == NOW + timedelta(seconds=4)


def test_retry_after_wins_over_a_shorter_backoff() -> None:
    result = AttemptResult(Outcome.RETRYABLE, 429, "HTTP 429", retry_after="90")
    assert _decide(policy(), result).next_attempt_at == NOW + timedelta(seconds=90)


def test_backoff_wins_over_a_shorter_retry_after() -> None:
    result = AttemptResult(Outcome.RETRYABLE, 503, "HTTP 503", retry_after="1")
    assert _decide(policy(), result, attempts=6).next_attempt_at == NOW + timedelta(seconds=32)


def test_budget_spent_is_dead() -> None:
    result = AttemptResult(Outcome.RETRYABLE, None, "timeout")
    d = _decide(policy(), result, first=NOW - timedelta(hours=1))
    assert d.verdict is Verdict.DEAD and d.error == "timeout; retry budget exhausted"


def test_last_attempt_lands_on_the_budget_end() -> None:
    result = AttemptResult(Outcome.RETRYABLE, None, "timeout")
    first = NOW - timedelta(seconds=3599)
    d = _decide(policy(), result, attempts=9, first=first)
    assert d.verdict is Verdict.RETRY
    assert d.next_attempt_at == first + timedelta(seconds=3600)


def test_retry_after_beyond_the_budget_is_dead() -> None:
    result = AttemptResult(Outcome.RETRYABLE, 503, "HTTP 503", retry_after="4000")
    assert _decide(policy(), result).verdict is Verdict.DEAD


def test_unauthorized_short_retries_then_dead() -> None:
    p = policy()
    result = AttemptResult(Outcome.UNAUTHORIZED, 401, "HTTP 401")
    delays = []
    for count in range(3):
        d = _decide(p, result, unauth=count)
        assert d.verdict is Verdict.RETRY and d.unauthorized_attempts == count + 1
        assert d.next_attempt_at is not None
        delays.append((d.next_attempt_at - NOW).total_seconds())
    assert delays == [5, 10, 20]
    dead = _decide(p, result, unauth=3)
    assert dead.verdict is Verdict.DEAD and dead.error == "HTTP 401 after 4 attempts"


def test_unauthorized_counter_resets_on_other_failures() -> None:
    d = _decide(policy(), AttemptResult(Outcome.RETRYABLE, 503, "HTTP 503"), unauth=2)
    assert d.unauthorized_attempts == 0


def test_retry_after_takes_ascii_digits_only_and_any_length() -> None:
    assert parse_retry_after("\u00b2", NOW) is None  # str.isdigit() says yes, int() says no
    assert parse_retry_after("\u0663", NOW) is None  # ARABIC-INDIC DIGIT THREE
    assert parse_retry_after("9" * 5000, NOW) == 10**9  # past int()'s 4300-digit limit
    assert parse_retry_after("0" * 5000 + "7", NOW) == 7  # leading zeros are not magnitude
    assert parse_retry_after("999999999", NOW) == 999999999
