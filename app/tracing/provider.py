"""The process's tracer provider: OTLP over HTTP when an endpoint is configured, else none.

Called once per process (``app.services.build_services``). The endpoint, headers and service
name come from ``Settings`` (OTEL_EXPORTER_OTLP_ENDPOINT / _TRACES_ENDPOINT / _HEADERS,
OTEL_SERVICE_NAME); the SDK itself reads its own tuning variables (OTEL_TRACES_SAMPLER,
OTEL_BSP_*) when the provider is made, which is the one time (docs/observability.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from app.settings import Settings
from app.tracing import spans

INSTRUMENTATION = "looping_edge"


@dataclass(frozen=True)
class Tracing:
    """What ``install`` set up; ``shutdown`` flushes the spans still queued."""

    provider: TracerProvider | None = None

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def shutdown(self) -> None:
        if self.provider is not None:
            spans.activate(None)
            self.provider.shutdown()


OFF = Tracing()


def install(settings: Settings, processor: SpanProcessor | None = None) -> Tracing:
    """Choose this process's tracer. ``processor``: tests' in-memory exporter in place of
    OTLP (tracing is then on whatever the settings say)."""
    endpoint = settings.traces_endpoint
    if processor is None and endpoint is None:
        spans.activate(None)
        return OFF
    if processor is None:
        exporter = OTLPSpanExporter(
            endpoint=endpoint, headers=_headers(settings), timeout=_EXPORT_TIMEOUT_SECONDS
        )
        processor = BatchSpanProcessor(exporter)
    resource = Resource.create(
        {"service.name": settings.otel_service_name, "process.pid": os.getpid()}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(processor)
    spans.activate(provider.get_tracer(INSTRUMENTATION), model_content=settings.trace_model_content)
    return Tracing(provider)


_EXPORT_TIMEOUT_SECONDS = 10.0


def _headers(settings: Settings) -> dict[str, str]:
    """OTEL_EXPORTER_OTLP_HEADERS: ``key=value`` pairs separated by commas."""
    if settings.otel_headers is None:
        return {}
    found: dict[str, str] = {}
    for pair in settings.otel_headers.get_secret_value().split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            found[key.strip()] = value.strip()
    return found
