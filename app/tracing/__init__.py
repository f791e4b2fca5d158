"""OpenTelemetry traces (issue 53): off unless an OTLP endpoint is configured.

``provider.install`` runs once per process at start (``app.services.build_services``) and picks
the tracer; every span goes through ``spans.span``, which is a shared no-op context when
tracing is off (no span object is made, docs/observability.md).
"""
