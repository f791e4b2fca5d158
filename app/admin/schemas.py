"""The admin API's request bodies: the CLI's names, unknown fields refused (issue 52).

``manifest`` and ``agent_config`` are taken as any JSON value here and checked by the tenant
service (``app.tenants.service``), so a bad one gets the CLI's words, not a schema error.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.tenants.service import TenantDraft

_MAX_IDS = 1000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TenantUpdate(_Body):
    """What ``looping-edge tenants update`` takes; at least one field."""

    manifest: Annotated[Any, Field(description="the tenant manifest, a JSON object")] = None
    agent: str | None = Field(default=None, description="echo, scripted, python or llm")
    agent_config: Annotated[Any, Field(description="the agent's config, a JSON object")] = None
    require_push_config: bool | None = None
    dedupe_message_ids: bool | None = None
    profile: str | None = Field(default=None, description="gateway or open")

    def draft(self) -> TenantDraft:
        return TenantDraft(
            manifest=self.manifest,
            agent=self.agent,
            agent_config=self.agent_config,
            require_push_config=self.require_push_config,
            dedupe_message_ids=self.dedupe_message_ids,
            profile=self.profile,
        )


class TenantCreate(TenantUpdate):
    """What ``looping-edge tenants add`` takes: ``id`` and ``manifest`` required."""

    id: str
    manifest: Annotated[Any, Field(description="the tenant manifest, a JSON object")]


class ReplayRequest(_Body):
    """Dead letters to re-queue: ``ids``, or ``all`` (of ``tenant`` when given)."""

    ids: Annotated[list[Annotated[int, Field(ge=1, le=2**63 - 1)]], Field(max_length=_MAX_IDS)] = (
        Field(default_factory=list)
    )
    all: bool = False
    tenant: str | None = None
