"""Model-call metrics, fed by the loop's events: calls, retries, fallbacks, tokens in and out,
labelled by model name and outcome only (never tenant, identity or task)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from app.agents.llm.events import LoopEvent, ModelCalled


class LlmMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry or CollectorRegistry()
        self.calls = Counter(
            "edge_llm_model_calls_total",
            "Model calls by model and outcome",
            ["model", "outcome"],
            registry=r,
        )
        self.retries = Counter(
            "edge_llm_model_retries_total", "Model calls retried, by model", ["model"], registry=r
        )
        self.fallbacks = Counter(
            "edge_llm_model_fallbacks_total",
            "Steps sent to the fallback model",
            ["model"],
            registry=r,
        )
        self.tokens = Counter(
            "edge_llm_tokens_total",
            "Tokens by model and direction (in, out)",
            ["model", "direction"],
            registry=r,
        )

    async def on_event(self, event: LoopEvent) -> None:
        if not isinstance(event, ModelCalled):
            return
        self.calls.labels(event.model, event.outcome).inc()
        if event.outcome == "retry":
            self.retries.labels(event.model).inc()
        if event.fallback:
            self.fallbacks.labels(event.model).inc()
        if event.tokens_in:
            self.tokens.labels(event.model, "in").inc(event.tokens_in)
        if event.tokens_out:
            self.tokens.labels(event.model, "out").inc(event.tokens_out)
