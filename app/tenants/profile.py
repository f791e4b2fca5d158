"""Tenant profiles: who a tenant is served for (issue 49).

- ``gateway`` (the default): the Looping gateway's contract as it always was (CONTRACT §5,
  §7): pushes only to ``GATEWAY_ORIGINS``, tasks as results.
- ``open``: general A2A clients. Callers still prove themselves with the gateway's EdDSA
  tokens and the same ``(tenant, identity)`` isolation holds, but a push config may name any
  ``https`` URL that passes the SSRF rules (``app.push_targets``), a push config is not
  required, and an agent may answer with a Message instead of a Task.
"""

from __future__ import annotations

from app.db.tenants import GATEWAY as GATEWAY
from app.db.tenants import OPEN as OPEN

PROFILES = (GATEWAY, OPEN)


def check_profile(value: str) -> str:
    """The profile name, or ``ValueError`` naming the allowed ones."""
    if value not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}")
    return value
