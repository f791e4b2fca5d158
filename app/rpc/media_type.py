"""Which request bodies the RPC endpoint reads: JSON only (issue 47 row 10).

A2A §9 (JSON-RPC binding): requests are ``application/json``; ``application/a2a+json`` is the
A2A media type. The type and subtype compare case-insensitively and parameters such as
``charset`` may follow (RFC 9110 §8.3.1). A request without a Content-Type is read as JSON:
gateways and simple clients that omit it send JSON all the same. Anything else is refused
before the body is read (HTTP 415), so no other format is ever parsed as if it were JSON.
"""

from __future__ import annotations

JSON_MEDIA_TYPES = frozenset({"application/json", "application/a2a+json"})


def is_json(content_type: str | None) -> bool:
    """Whether a request with this Content-Type value is read as JSON."""
    if content_type is None:
        return True
    return content_type.split(";", 1)[0].strip().lower() in JSON_MEDIA_TYPES
