"""A2A tool metrics: calls by tool and outcome, the task's state (``TASK_STATE_COMPLETED``,
``MESSAGE``...) or the error code (``DELIVERY_UNCERTAIN``, ``TIMEOUT``...), both from fixed
sets; never labelled by tenant, agent name or task."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class PeerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.calls = Counter(
            "edge_peer_calls_total",
            "A2A tool calls of llm agents to their peers, by tool and outcome",
            ["tool", "outcome"],
            registry=self.registry,
        )

    def record(self, tool: str, outcome: str) -> None:
        self.calls.labels(tool, outcome).inc()
