"""The tenant operations behind both front ends: ``looping-edge tenants …`` and the admin API
(issue 52). Neither front end validates on its own: a definition is checked here, once, and a
refusal is a ``TenantInvalid`` whose message names the field (CONTRACT §8), the same words
whichever front end shows it.

The front ends only turn their input into a ``TenantDraft`` (the CLI reads files, the API reads
a JSON body) and a result into their output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from app.agents.entry_point import AgentEntryError, entry_of
from app.agents.kinds import AGENT_KINDS
from app.agents.llm.config import LlmConfigError, parse_llm_config
from app.db.tenants import TenantStale as TenantStale
from app.errors import EdgeError
from app.tenants.manifest import MAX_MANIFEST_BYTES, TenantManifest, validate_tenant_id
from app.tenants.profile import GATEWAY, OPEN, check_profile
from app.tenants.registry import (
    TenantExists,
    TenantMissing,
    TenantRecord,
    TenantStore,
    check_agent_config,
)

__all__ = [
    "TenantDraft",
    "TenantExists",
    "TenantInvalid",
    "TenantMissing",
    "TenantPage",
    "TenantService",
    "TenantStale",
    "tenant_json",
]


class TenantInvalid(EdgeError):
    """A definition refused; ``field`` names what was wrong (``id``, ``manifest``,
    ``agent`` (its kind, or its config's shape for that kind), ``agent_config`` (the object
    itself), ``profile`` or ``changes``) and the message says how."""

    default_reason = "invalid_tenant"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class TenantDraft:
    """What an operator gives for ``add`` or ``update``: ``None`` is "not given" (for ``add``:
    the default). ``manifest`` and ``agent_config`` are parsed JSON objects."""

    manifest: Mapping[str, Any] | None = None
    agent: str | None = None
    agent_config: Mapping[str, Any] | None = None
    require_push_config: bool | None = None
    dedupe_message_ids: bool | None = None
    profile: str | None = None

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))


@dataclass(frozen=True)
class TenantPage:
    """One page of tenants in id order; ``next`` is the id to ask ``after`` for the next page
    (``None`` on the last page)."""

    items: list[TenantRecord]
    next: str | None = None


@dataclass(frozen=True)
class _Checked:
    manifest: dict[str, Any] | None
    agent_config: dict[str, Any] | None
    values: dict[str, Any] = field(default_factory=dict)


def tenant_json(record: TenantRecord) -> dict[str, Any]:
    """A tenant as both front ends show it (``tenants show``, ``GET /v1/tenants/{id}``)."""
    return {
        "id": record.id,
        "enabled": record.enabled,
        "profile": record.profile,
        "agent": record.agent_kind,
        "agentConfig": dict(record.agent_config),
        "requirePushConfig": record.require_push_config,
        "dedupeMessageIds": record.dedupe_message_ids,
        "revision": record.revision,
        "manifest": dict(record.manifest),
    }


def check_tenant_id(value: str) -> str:
    try:
        return validate_tenant_id(value)
    except ValueError as exc:
        raise TenantInvalid(str(exc), field="id") from None


def check_manifest(data: object) -> dict[str, Any]:
    """The manifest as stored (camelCase, absent optionals omitted), or ``TenantInvalid``."""
    try:
        manifest = TenantManifest.from_data(data)
    except ValueError as exc:
        raise TenantInvalid(str(exc), field="manifest") from None
    stored = manifest.as_json()
    # The file front end bounds the text it reads; a manifest given as an object is bounded
    # by its stored form, the same limit.
    if len(json.dumps(stored, ensure_ascii=False).encode()) > MAX_MANIFEST_BYTES:
        raise TenantInvalid(f"manifest is larger than {MAX_MANIFEST_BYTES} bytes", field="manifest")
    return stored


def check_agent_config_object(data: object) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TenantInvalid("agent config must be a JSON object", field="agent_config")
    try:
        check_agent_config(data)
    except ValueError as exc:
        raise TenantInvalid(str(exc), field="agent_config") from None
    return dict(data)


def check_agent(kind: str, config: Mapping[str, Any]) -> None:
    """The agent kind, and its config's shape for the kinds that need one. Shape only: the
    worker imports a python entry (and reads a model's key) from its own environment, which
    the CLI's or the admin listener's need not be."""
    if kind == "llm":
        try:
            parse_llm_config(config)
        except LlmConfigError as exc:
            raise TenantInvalid(f"invalid llm agent config: {exc}", field="agent") from None
    if kind == "python":
        try:
            entry_of(config)
        except AgentEntryError as exc:
            raise TenantInvalid(str(exc), field="agent") from None


def _check_draft(draft: TenantDraft) -> _Checked:
    manifest = None if draft.manifest is None else check_manifest(draft.manifest)
    config = None if draft.agent_config is None else check_agent_config_object(draft.agent_config)
    if draft.profile is not None:
        try:
            check_profile(draft.profile)
        except ValueError as exc:
            raise TenantInvalid(str(exc), field="profile") from None
    if draft.agent is not None and draft.agent not in AGENT_KINDS:
        raise TenantInvalid(f"agent must be one of {', '.join(AGENT_KINDS)}", field="agent")
    # ``profile open`` alone implies no required push config (general clients need not send
    # one); an explicit value beside it wins.
    require_push = draft.require_push_config
    if require_push is None and draft.profile == OPEN:
        require_push = False
    values = {
        "manifest": manifest,
        "agent_kind": draft.agent,
        "agent_config": config,
        "require_push_config": require_push,
        "dedupe_message_ids": draft.dedupe_message_ids,
        "profile": draft.profile,
    }
    return _Checked(manifest, config, {k: v for k, v in values.items() if v is not None})


class TenantService:
    """Register, change, list and remove tenants; every check before any write."""

    def __init__(self, store: TenantStore) -> None:
        self._store = store

    async def add(self, tenant_id: str, draft: TenantDraft) -> TenantRecord:
        """``TenantInvalid``, or ``TenantExists`` if the id is taken."""
        check_tenant_id(tenant_id)
        if draft.manifest is None:
            raise TenantInvalid("manifest: required", field="manifest")
        checked = _check_draft(draft)
        values = checked.values
        record = TenantRecord(
            id=tenant_id,
            manifest=checked.manifest or {},
            agent_kind=values.get("agent_kind", "echo"),
            agent_config=checked.agent_config or {},
            require_push_config=values.get("require_push_config", True),
            dedupe_message_ids=values.get("dedupe_message_ids", True),
            profile=values.get("profile", GATEWAY),
        )
        check_agent(record.agent_kind, record.agent_config)
        return await self._store.add(record)

    async def update(
        self, tenant_id: str, draft: TenantDraft, *, revision: int | None = None
    ) -> TenantRecord:
        """Change what ``draft`` gives. ``revision``: the one the caller last saw
        (``TenantStale`` if the tenant has moved on since). ``TenantMissing`` if none."""
        if draft.is_empty():
            raise TenantInvalid(
                "nothing to update: give a manifest, an agent, an agent config or a flag",
                field="changes",
            )
        checked = _check_draft(draft)
        values = checked.values
        if "agent_kind" in values or "agent_config" in values:
            current = await self._store.get(tenant_id)
            if current is None:
                raise TenantMissing(tenant_id)
            check_agent(
                values.get("agent_kind", current.agent_kind),
                values.get("agent_config", current.agent_config),
            )
        return await self._store.update(tenant_id, expected_revision=revision, **values)

    async def set_enabled(
        self, tenant_id: str, enabled: bool, *, revision: int | None = None
    ) -> TenantRecord:
        return await self._store.update(tenant_id, expected_revision=revision, enabled=enabled)

    async def remove(self, tenant_id: str, *, revision: int | None = None) -> None:
        await self._store.remove(tenant_id, expected_revision=revision)

    async def get(self, tenant_id: str) -> TenantRecord:
        record = await self._store.get(tenant_id)
        if record is None:
            raise TenantMissing(tenant_id)
        return record

    async def list(self) -> list[TenantRecord]:
        return await self._store.list()

    async def page(self, *, after: str | None, limit: int) -> TenantPage:
        """Paged in id order. The table is read whole: it is small by design, every edge
        reloads it on each refresh (``TenantDirectory``)."""
        records = [r for r in await self._store.list() if after is None or r.id > after]
        items = records[:limit]
        more = len(records) > limit
        return TenantPage(items=items, next=items[-1].id if more and items else None)
