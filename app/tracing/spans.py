"""Spans for the edge's own code, and the trace context carried with a turn.

The process's tracer is chosen once (``activate``, called by ``app.tracing.provider``); with
none, ``span`` hands out one shared no-op context and nothing else runs. Exceptions mark a
span with their type only (``error.type``): their text may carry request data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanKind, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# The tenant a span concerns (an attribute of the RPC, accept, turn and push spans).
TENANT = "looping_edge.tenant"

Attributes = Mapping[str, str | int | float | bool]

# W3C Trace Context (traceparent / tracestate): what the gateway sends and what a turn keeps.
PROPAGATOR = TraceContextTextMapPropagator()
_NO_SPAN: AbstractContextManager[Span] = nullcontext(INVALID_SPAN)


class _State:
    tracer: Tracer | None = None
    model_content = False  # EDGE_TRACE_MODEL_CONTENT


def activate(tracer: Tracer | None, *, model_content: bool = False) -> None:
    """This process's tracer (None: tracing off)."""
    _State.tracer = tracer
    _State.model_content = model_content and tracer is not None


def enabled() -> bool:
    return _State.tracer is not None


def model_content() -> bool:
    """Whether model call spans may carry prompt and answer text (EDGE_TRACE_MODEL_CONTENT)."""
    return _State.model_content


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes | None = None,
    parent: Mapping[str, str] | None = None,
    link_parent: bool = False,
) -> AbstractContextManager[Span]:
    """A span made current for the block; ``parent``: a stored W3C carrier to continue
    (``carrier``), also recorded as a link with ``link_parent``. Off: a no-op span."""
    tracer = _State.tracer
    if tracer is None:
        return _NO_SPAN
    context = None if parent is None else extract(parent)
    links: Sequence[Link] = ()
    if link_parent and context is not None:
        found = trace.get_current_span(context).get_span_context()
        links = (Link(found),) if found.is_valid else ()
    return _started(tracer, name, kind, attributes, context, links)


@contextmanager
def _started(
    tracer: Tracer,
    name: str,
    kind: SpanKind,
    attributes: Attributes | None,
    context: Context | None,
    links: Sequence[Link],
) -> Iterator[Span]:
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=kind,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__name__)
            current.set_status(StatusCode.ERROR)
            raise


def annotate(attributes: Attributes) -> None:
    """Add attributes to the current span (none when tracing is off)."""
    if _State.tracer is None:
        return
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(attributes)


def carrier() -> dict[str, str] | None:
    """The current span's context as W3C headers, to store with a turn (None when off or
    outside a span)."""
    if _State.tracer is None:
        return None
    found: dict[str, str] = {}
    PROPAGATOR.inject(found)
    return found or None


def extract(headers: Mapping[str, str]) -> Context:
    """A context from W3C headers; an invalid or absent ``traceparent`` gives an empty one
    (a new trace starts)."""
    return PROPAGATOR.extract(dict(headers))


def current_ids() -> tuple[str, str] | None:
    """The current span's (trace_id, span_id) as hex, for log lines; None outside a span."""
    found = trace.get_current_span().get_span_context()
    if not found.is_valid:
        return None
    return format(found.trace_id, "032x"), format(found.span_id, "016x")


def stored_carrier(payload: Mapping[str, Any]) -> dict[str, str] | None:
    """The carrier a turn's payload holds (``traceContext``), if well-formed."""
    return well_formed(payload.get("traceContext"))


def well_formed(found: Any) -> dict[str, str] | None:
    """A stored carrier's string headers (None: not a mapping, or none left)."""
    if not isinstance(found, Mapping):
        return None
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)} or None
