"""Model calls: retries with backoff or Retry-After, the fallback, the operator's failure
text, the missing key, metrics by model and outcome."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from app.agents.contract import AgentFailure, AgentReply
from app.agents.llm.metrics import LlmMetrics
from app.testing.fake_model import (
    FakeModelServer,
    empty_choices,
    error,
    malformed,
    text,
)
from tests.agents.llm.kit import FAILURE, Sleeps, run_turn, runtime, turn


async def test_retries_back_off_then_succeed(fake: FakeModelServer) -> None:
    fake.script(error(503), error(500), text("ok"))
    sleeps = Sleeps()
    assert await run_turn(fake, runtime(sleep=sleeps), turn("hi")) == AgentReply(text="ok")
    assert sleeps.slept == [1.0, 2.0]


async def test_retry_after_is_honoured(fake: FakeModelServer) -> None:
    fake.script(error(429, retry_after=7), text("ok"))
    sleeps = Sleeps()
    await run_turn(fake, runtime(sleep=sleeps), turn("hi"))
    assert sleeps.slept == [7.0]


async def test_a_retry_after_past_a_minute_uses_the_backoff(fake: FakeModelServer) -> None:
    fake.script(error(429, retry_after=3600), text("ok"))
    sleeps = Sleeps()
    await run_turn(fake, runtime(sleep=sleeps), turn("hi"))
    assert sleeps.slept == [1.0]


@pytest.mark.parametrize("bad", [malformed, empty_choices])
async def test_garbage_bodies_count_as_failed_attempts(fake: FakeModelServer, bad: object) -> None:
    fake.script(bad(), text("ok"))  # type: ignore[operator]
    assert await run_turn(fake, runtime(), turn("hi")) == AgentReply(text="ok")
    assert len(fake.requests) == 2


async def test_a_slow_model_times_out_and_is_retried(fake: FakeModelServer) -> None:
    fake.script(text("late", delay=1.5), text("ok"))
    result = await run_turn(fake, runtime(), turn("hi"), model_timeout_seconds=0.3)
    assert result == AgentReply(text="ok")


async def test_attempts_used_up_then_fallback(fake: FakeModelServer) -> None:
    registry = CollectorRegistry()
    fake.script(error(500), error(502), error(503), text("from fallback"))
    fallback = {"base_url": fake.base_url, "name": "backup-model"}
    rt = runtime(metrics=LlmMetrics(registry))
    result = await run_turn(fake, rt, turn("hi"), fallback_model=fallback)
    assert result == AgentReply(text="from fallback")
    assert [r.body["model"] for r in fake.requests] == ["main-model"] * 3 + ["backup-model"]
    value = registry.get_sample_value
    assert value("edge_llm_model_calls_total", {"model": "main-model", "outcome": "retry"}) == 2
    assert value("edge_llm_model_calls_total", {"model": "main-model", "outcome": "failed"}) == 1
    assert value("edge_llm_model_calls_total", {"model": "backup-model", "outcome": "ok"}) == 1
    assert value("edge_llm_model_retries_total", {"model": "main-model"}) == 2
    assert value("edge_llm_model_fallbacks_total", {"model": "backup-model"}) == 1
    assert value("edge_llm_tokens_total", {"model": "backup-model", "direction": "in"}) == 10
    assert value("edge_llm_tokens_total", {"model": "backup-model", "direction": "out"}) == 5


async def test_a_bad_request_is_not_retried(fake: FakeModelServer) -> None:
    fake.script(error(400))
    assert await run_turn(fake, runtime(), turn("hi")) == AgentFailure(FAILURE)
    assert len(fake.requests) == 1


async def test_a_server_that_is_down_fails_with_the_operators_text() -> None:
    with FakeModelServer() as gone:
        pass  # its port is closed now: connection refused
    result = await run_turn(gone, runtime(), turn("hi"))
    assert result == AgentFailure(FAILURE)


async def test_a_missing_key_fails_the_turn_naming_the_variable(
    fake: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="looping.agent")
    model = {"base_url": fake.base_url, "name": "m", "api_key_env": "MY_MODEL_KEY"}
    result = await run_turn(fake, runtime(environ={}), turn("hi"), model=model)
    assert result == AgentFailure(FAILURE)
    assert not fake.requests
    record = next(r for r in caplog.records if r.getMessage() == "agent.model_key_missing")
    assert record.variable == "MY_MODEL_KEY"  # type: ignore[attr-defined]


async def test_the_key_is_sent_and_never_logged(
    fake: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.script(error(500), text("ok"))
    model = {"base_url": fake.base_url, "name": "m", "api_key_env": "MY_MODEL_KEY"}
    rt = runtime(environ={"MY_MODEL_KEY": "sk-very-secret"})
    assert await run_turn(fake, rt, turn("hi"), model=model) == AgentReply(text="ok")
    assert fake.requests[0].headers["authorization"] == "Bearer sk-very-secret"
    assert "sk-very-secret" not in caplog.text
