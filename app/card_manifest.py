"""The manifest a tenant's signed card is built from: the stored manifest plus what the edge
adds from the agent's configuration (the ``negotiate`` skill, issue 51; the attachment media
types in ``defaultInputModes``, issue 55). One function, so ``GetExtendedAgentCard`` and the
admin API's card preview can never differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.attachments.policy import policy_of, with_input_modes
from app.db.tenants import TenantRecord
from app.negotiation.card import card_manifest


def published_manifest(tenant: TenantRecord) -> Mapping[str, Any]:
    return with_input_modes(card_manifest(tenant), policy_of(tenant.agent_config))
