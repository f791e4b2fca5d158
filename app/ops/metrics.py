"""Prometheus metrics (base units; no tenant, identity or task ids as labels)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    """One registry per app instance (tests build many apps in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._add_call_metrics(self.registry)
        self._add_work_metrics(self.registry)
        # labels() takes a lock and builds a key on every call; the hot path reuses the child
        # objects instead (label values come from bounded sets: method names, error reasons).
        self._rpc_counts: dict[tuple[str, str], Any] = {}
        self._rpc_timers: dict[str, Any] = {}

    def _add_call_metrics(self, r: CollectorRegistry) -> None:
        """The calls' side: RPC outcomes and latency, token checks, gateway JWKS fetches."""
        self.rpc_requests = Counter(
            "edge_rpc_requests_total",
            "JSON-RPC calls by method and outcome",
            ["method", "outcome"],
            registry=r,
        )
        self.rpc_seconds = Histogram(
            "edge_rpc_duration_seconds",
            "JSON-RPC call latency by method",
            ["method"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        # result = "ok" or the stable refusal reason (bounded set: app.security.token).
        self.token_verifications = Counter(
            "edge_token_verifications_total",
            "Gateway token verifications by result",
            ["result"],
            registry=r,
        )
        self._token_ok = self.token_verifications.labels("ok")
        self.client_disconnects = Counter(
            "edge_client_disconnects_total",
            "RPC requests whose client went away before its body arrived",
            registry=r,
        )
        self.jwks_fetches = Counter(
            "edge_jwks_fetches_total", "Gateway JWKS fetches by result", ["result"], registry=r
        )

    def _add_work_metrics(self, r: CollectorRegistry) -> None:
        """The work behind the calls: turns, push delivery, open streams."""
        self.turns = Counter(
            "edge_turns_total", "Turns finished, by result", ["result"], registry=r
        )
        self.push_deliveries = Counter(
            "edge_push_deliveries_total", "Push delivery attempts by result", ["result"], registry=r
        )
        self.push_outbox_depth = Gauge(
            "edge_push_outbox_depth", "Undelivered push outbox rows", registry=r
        )
        self.push_oldest_pending_seconds = Gauge(
            "edge_push_oldest_pending_seconds", "Age of the oldest pending push", registry=r
        )
        self.streams_open = Gauge(
            "edge_streams_open",
            "Open streams, SSE and gRPC (SendStreamingMessage, SubscribeToTask)",
            registry=r,
        )

    # RpcObserver role (app.rpc.dispatch)
    def rpc_finished(self, method: str, outcome: str, seconds: float) -> None:
        count = self._rpc_counts.get((method, outcome))
        if count is None:
            count = self._rpc_counts[method, outcome] = self.rpc_requests.labels(method, outcome)
        timer = self._rpc_timers.get(method)
        if timer is None:
            timer = self._rpc_timers[method] = self.rpc_seconds.labels(method)
        count.inc()
        timer.observe(seconds)

    def token_verified(self) -> None:
        self._token_ok.inc()

    def token_refused(self, reason: str) -> None:
        self.token_verifications.labels(reason).inc()

    def client_disconnected(self) -> None:
        self.client_disconnects.inc()

    def jwks_fetched(self, result: str) -> None:
        self.jwks_fetches.labels(result).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
