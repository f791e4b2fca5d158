"""The tenant card of an agent that negotiates (issue 51): whatever its manifest says, a
skill with id ``negotiate`` whose description names every action of its vocabulary
(research §1.4), so a counterparty reading the card knows what to expect back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.agents.llm.config import LlmConfigError, parse_llm_config
from app.db.tenants import TenantRecord
from app.negotiation.gate import negotiates
from app.negotiation.vocabulary import vocabulary_of

SKILL_ID = "negotiate"


def card_manifest(tenant: TenantRecord) -> Mapping[str, Any]:
    """The manifest the tenant's card is built from: its own, plus the ``negotiate`` skill
    when its agent negotiates."""
    if not negotiates(tenant):
        return tenant.manifest
    try:
        config = parse_llm_config(tenant.agent_config)
    except LlmConfigError:
        return tenant.manifest
    assert config.negotiation is not None
    skill = {
        "id": SKILL_ID,
        "name": "Negotiate",
        "description": vocabulary_of(config.negotiation).skill_description(),
        "tags": ["negotiation"],
    }
    skills = [
        s
        for s in tenant.manifest.get("skills") or ()
        if not (isinstance(s, Mapping) and s.get("id") == SKILL_ID)
    ]
    return {**tenant.manifest, "skills": [*skills, skill]}
