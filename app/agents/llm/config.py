"""The ``llm`` agent's config: what an operator writes in ``--agent-config`` (checked at
``tenants add``/``update``, exit 2 naming the field) and what the worker reads per turn.

Only the *name* of the environment variable holding a model's key is stored (``api_key_env``);
the worker reads it from the environment mapping it was built with, at turn time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from app.agents.llm.delegation.config import DelegationConfig
from app.agents.llm.peer_directory import PeerEntry, check_directory, credential_in
from app.attachments.policy import AttachmentsConfig
from app.settings import SETTING_VARIABLES

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_ACTION_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
# The built-in negotiation actions (app.negotiation.vocabulary) and the negotiator's ``ask``.
_RESERVED_ACTIONS = frozenset({"propose", "counter", "accept", "reject", "ask"})


class ModelEndpoint(BaseModel):
    """An OpenAI-compatible chat-completions server with tool calling. ``base_url`` is the
    operator's and trusted (loopback ``http`` for a local server is fine)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(min_length=1, max_length=2048)
    name: str = Field(min_length=1, max_length=256)
    api_key_env: str | None = Field(default=None, max_length=256)
    # Whether the model takes image inputs; without, an attached image reaches it as a note
    # naming the image (issue 55).
    vision: bool = True

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("must be an environment variable name (letters, digits, _)")
        if value is not None and value.upper() in SETTING_VARIABLES:
            # The key goes to ``base_url``: never the edge's signing key or database URL.
            raise ValueError("must not name one of the edge's own settings")
        return value


class NegotiationAction(BaseModel):
    """A configured negotiation action (issue 51): added to propose, counter, accept and
    reject; a terminal one ends the task in ``state`` (default: rejected)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: str
    description: str | None = Field(default=None, max_length=1000)
    terminal: bool = False
    state: Literal["completed", "rejected", "canceled"] | None = None

    @field_validator("action")
    @classmethod
    def _action_name(cls, value: str) -> str:
        if not _ACTION_NAME.fullmatch(value):
            raise ValueError("must be lower-case letters, digits, _ or - (at most 32)")
        if value in _RESERVED_ACTIONS:
            raise ValueError(f"'{value}' is built in")
        return value

    @model_validator(mode="after")
    def _state_needs_terminal(self) -> NegotiationAction:
        if self.state is not None and not self.terminal:
            raise ValueError("state is only for a terminal action")
        return self


class NegotiationConfig(BaseModel):
    """The ``negotiation`` block (``docs/negotiation.md``): negotiating with other agents'
    edges. ``model`` (default: the agent's ``model``/``fallback_model``) answers the
    negotiator's calls; ``negotiator`` names a Python ``module:function`` to decide instead."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    max_turns: int = Field(default=10, ge=1, le=100)
    negotiator_prompt: str = Field(min_length=1, max_length=100_000)
    actions: tuple[NegotiationAction, ...] = ()
    model: ModelEndpoint | None = None
    negotiator: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

    @field_validator("actions")
    @classmethod
    def _distinct(cls, value: tuple[NegotiationAction, ...]) -> tuple[NegotiationAction, ...]:
        if len({a.action for a in value}) != len(value):
            raise ValueError("an action is named twice")
        return value


class LlmConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelEndpoint
    fallback_model: ModelEndpoint | None = None
    system_prompt: str = Field(min_length=1, max_length=100_000)
    tools: tuple[str, ...] = ()
    max_steps: int = Field(default=10, ge=1, le=200)
    turn_timeout_seconds: float = Field(default=600.0, gt=0, le=86_400)
    model_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    tool_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    model_attempts: int = Field(default=3, ge=1, le=10)
    max_tool_output_bytes: int = Field(default=16 * 1024, ge=256, le=16 * 1024 * 1024)
    session_max_tokens: int = Field(default=32_000, ge=1_000, le=10_000_000)
    delegation: DelegationConfig | None = None  # rounds of subtasks (app.agents.llm.delegation)
    negotiation: NegotiationConfig | None = None
    attachments: AttachmentsConfig = AttachmentsConfig()  # app.attachments (issue 55)
    # The A2A agents this agent may call (app.peers, issue 54); http to loopback peers only
    # with allow_http_loopback (development).
    allow_http_loopback: bool = False
    agents: dict[str, PeerEntry] = Field(default_factory=dict)

    @property
    def negotiates(self) -> bool:
        return self.negotiation is not None and self.negotiation.enabled

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _TOOL_NAME.fullmatch(name):
                raise ValueError(f"'{name[:64]}' is not a tool name")
        if len(set(value)) != len(value):
            raise ValueError("a tool is named twice")
        return value

    @field_validator("agents", mode="before")
    @classmethod
    def _no_literal_credentials(cls, value: Any) -> Any:
        where = credential_in(value)
        if where is not None:
            raise ValueError(
                f"{where} holds a literal credential; keep it in the worker's environment "
                'and name the variable with auth {"bearer_env": NAME}'
            )
        return value

    @field_validator("agents")
    @classmethod
    def _directory(cls, value: dict[str, PeerEntry], info: ValidationInfo) -> dict[str, PeerEntry]:
        check_directory(value, allow_http_loopback=bool(info.data.get("allow_http_loopback")))
        return value


class LlmConfigError(ValueError):
    """The config is refused; ``str`` names the field (``model.base_url: …``)."""


def parse_llm_config(config: Mapping[str, Any]) -> LlmConfig:
    try:
        return LlmConfig.model_validate(dict(config))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        if first["type"] == "extra_forbidden":
            raise LlmConfigError(f"{where}: unknown field") from None
        if first["type"] == "missing":
            raise LlmConfigError(f"{where}: required") from None
        message = str(first["msg"]).removeprefix("Value error, ")
        raise LlmConfigError(f"{where}: {message}") from None
