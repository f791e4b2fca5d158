"""Which attachments a tenant accepts: its agent config's ``attachments`` block.

Off unless the operator opted in. The ``llm`` agent reads the attachments themselves; the
other kinds (``echo``, ``scripted``) see their descriptions only. The same policy
names the card's extra input modes and the request body limit for the tenant, which the
bindings apply after the token (and so the tenant claim) is verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

IMAGE_TYPES = ("image/jpeg", "image/png")
DOCUMENT_TYPES = ("application/pdf", "text/plain", "text/markdown", "text/csv")  # .documents


class AttachmentsConfig(BaseModel):
    """``attachments`` in the agent config: ``{"images": true, "documents": true}``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    images: bool = False
    documents: bool = False


@dataclass(frozen=True, slots=True)
class AttachmentPolicy:
    images: bool = False
    documents: bool = False

    @property
    def any(self) -> bool:
        return self.images or self.documents

    def input_modes(self) -> tuple[str, ...]:
        """The media types the tenant's card adds to ``defaultInputModes``."""
        return (IMAGE_TYPES if self.images else ()) + (DOCUMENT_TYPES if self.documents else ())

    def body_limit(self, default: int, *, images: int, documents: int) -> int:
        """The request body limit for this tenant: raised only when it opted in."""
        limit = max(default, images) if self.images else default
        return max(limit, documents) if self.documents else limit


NO_ATTACHMENTS = AttachmentPolicy()


def policy_of(agent_config: Mapping[str, Any]) -> AttachmentPolicy:
    """The tenant's policy, whatever its agent kind; anything but a valid opt-in is none
    (fails closed)."""
    block = agent_config.get("attachments")
    if not isinstance(block, Mapping):
        return NO_ATTACHMENTS
    try:
        config = AttachmentsConfig.model_validate(dict(block))
    except ValueError:
        return NO_ATTACHMENTS
    return AttachmentPolicy(images=config.images, documents=config.documents)


def with_input_modes(manifest: Mapping[str, Any], policy: AttachmentPolicy) -> Mapping[str, Any]:
    """The manifest the card is built from, with the policy's input modes added."""
    extra = policy.input_modes()
    if not extra:
        return manifest
    modes = list(manifest.get("defaultInputModes") or ["text/plain"])
    modes += [m for m in extra if m not in modes]
    return {**manifest, "defaultInputModes": modes}
