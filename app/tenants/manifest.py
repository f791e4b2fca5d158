"""Tenant ids and tenant manifests: what an operator registers, checked before it is stored.

A manifest becomes a signed tenant card (CONTRACT §4, §8). Everything that could make signing
fail, or make verifiers disagree about the signed bytes, is refused here, at registration,
with a message naming the field: unknown fields, empty required values, skills the a2a.proto
``AgentSkill`` rejects, nulls inside extension params (the a2a-sdk keeps ``null`` where our
canonical form drops it), lone surrogates, and capability flags that contradict the edge.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Self

from a2a.types import AgentCapabilities, AgentSkill
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from app.text import finite_float, finite_int, first_bad_text, refuse_constant, shown

TENANT_ID_RE = r"[a-z0-9][a-z0-9-]{0,62}"  # CONTRACT §8, full match
_TENANT_ID = re.compile(TENANT_ID_RE)

# What the edge itself provides to every tenant (CONTRACT §4): a manifest may restate these
# flags but never contradict them. Streaming: SendStreamingMessage and SubscribeToTask over SSE
# (docs/protocol.md).
EDGE_CAPABILITY_FLAGS: dict[str, bool] = {
    "streaming": True,
    "pushNotifications": True,
    "extendedAgentCard": True,
}

# Flags a stored manifest may state either way, the edge's value served: manifests written when
# this edge did not stream had to say ``streaming: false``, and they stay valid.
_RESTATED_EITHER_WAY = frozenset({"streaming"})

MAX_MANIFEST_BYTES = 256 * 1024
MAX_AGENT_CONFIG_BYTES = 256 * 1024  # every edge reloads every tenant's row on refresh
_MAX_PARAMS_DEPTH = 32

# Control characters (C0, DEL, C1) in text an operator's terminal or a gateway's UI will show:
# an ESC sequence in a name would reach whoever runs ``tenants list``. Descriptions and examples
# may hold line breaks and tabs; one-line fields (names, ids, tags, the version) may not.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_IN_PROSE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Extension URIs identify a specification (A2A AgentExtension.uri): a web address or a URN.
_EXTENSION_URI = re.compile(
    r"(?:https?://[^\s@/?#]+(?:[/?#]\S*)?|urn:[a-z0-9][a-z0-9-]*:\S+)", re.I
)

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=False, min_length=1, max_length=512)]
Description = Annotated[str, StringConstraints(min_length=1, max_length=16384)]
Mode = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^\S+$")]


def validate_tenant_id(value: str) -> str:
    """Return ``value`` if it is a valid tenant id (CONTRACT §8), else raise ``ValueError``."""
    if not isinstance(value, str) or not _TENANT_ID.fullmatch(value):
        raise ValueError(
            "tenant id must be 1-63 characters: lowercase letters, digits and '-', "
            "starting with a letter or digit"
        )
    return value


def _not_blank(value: str, field: str) -> None:
    if not value.strip():
        raise ValueError(f"{field}: must not be blank")
    if _CONTROL.search(value):
        raise ValueError(f"{field}: must be one line without control characters")


def _no_control(value: str, field: str) -> None:
    if _CONTROL_IN_PROSE.search(value):
        raise ValueError(f"{field}: must not hold control characters (line breaks and tabs may)")


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        strict=True,
    )


class ManifestSkill(_Model):
    """An A2A ``AgentSkill`` (a2a.proto): id, name, description and tags required."""

    id: NonEmpty
    name: NonEmpty
    description: Description
    tags: Annotated[list[NonEmpty], Field(min_length=1, max_length=64)]
    examples: list[Description] | None = None
    input_modes: list[Mode] | None = None
    output_modes: list[Mode] | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        for field in ("id", "name"):
            _not_blank(getattr(self, field), field)
        _check_prose(self.description, "description")
        for tag in self.tags:
            _not_blank(tag, "tags")
        for example in self.examples or ():
            _no_control(example, "examples")
        for mode in (self.input_modes or []) + (self.output_modes or []):
            _not_blank(mode, "modes")
        return self


def _check_prose(value: str, field: str) -> None:
    if not value.strip():
        raise ValueError(f"{field}: must not be blank")
    _no_control(value, field)


class TenantManifest(_Model):
    """The registered description of one tenant's agent (CONTRACT §8)."""

    name: NonEmpty
    description: Description
    version: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    capabilities: dict[str, Any] | None = None
    default_input_modes: Annotated[list[Mode], Field(min_length=1, max_length=32)] = Field(
        default_factory=lambda: ["text/plain"]
    )
    default_output_modes: Annotated[list[Mode], Field(min_length=1, max_length=32)] = Field(
        default_factory=lambda: ["text/plain"]
    )
    skills: Annotated[list[ManifestSkill], Field(max_length=256)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> Self:
        for field in ("name", "version"):
            _not_blank(getattr(self, field), field)
        _check_prose(self.description, "description")
        for mode in self.default_input_modes + self.default_output_modes:
            _not_blank(mode, "modes")
        ids = [skill.id for skill in self.skills]
        if len(set(ids)) != len(ids):
            raise ValueError("skills: skill ids must be unique")
        if self.capabilities is not None:
            _check_capabilities(self.capabilities)
        for index, skill in enumerate(self.skills):
            _round_trip(AgentSkill, skill.model_dump(exclude_none=True), f"skills[{index}]")
        try:
            json.dumps(self.model_dump(), ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("manifest contains invalid Unicode (a lone surrogate)") from None
        return self

    @classmethod
    def from_json_text(cls, text: str) -> TenantManifest:
        """Parse and validate; ``ValueError`` with a readable message naming the field."""
        if len(text.encode("utf-8", errors="surrogatepass")) > MAX_MANIFEST_BYTES:
            raise ValueError(f"manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        return cls.from_data(strict_json_object(text, "manifest"))

    @classmethod
    def from_data(cls, data: object) -> TenantManifest:
        """Validate an already parsed manifest (e.g. a stored one or an admin API body)."""
        if not isinstance(data, dict):
            raise ValueError("manifest must be a JSON object")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"invalid manifest: {_describe(exc)}") from None

    def as_json(self) -> dict[str, Any]:
        """The manifest as stored: camelCase, absent optionals omitted."""
        data: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
        return data

    def card_fields(self) -> dict[str, Any]:
        """The A2A card fields this manifest supplies (camelCase), for the card builder."""
        capabilities = dict(self.capabilities or {})
        capabilities.update(EDGE_CAPABILITY_FLAGS)
        fields = self.as_json()
        fields["capabilities"] = capabilities
        return fields


def strict_json_object(text: str, what: str) -> dict[str, Any]:
    """A JSON object an operator wrote (a manifest, an agent config): duplicate members,
    ``NaN``/``Infinity``, U+0000, unpaired surrogates and nesting too deep to parse are refused
    with a ``ValueError`` naming ``what`` (PostgreSQL's jsonb refuses the middle three, and
    SQLite would store text no JSON reader accepts)."""
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write first
    try:
        data = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=refuse_constant,
            parse_float=finite_float,
            parse_int=finite_int,
        )
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON (line {exc.lineno})") from None
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a JSON object")
    where = first_bad_text(data, what)
    if where is not None:
        raise ValueError(f"{shown(where, 120)} must be valid Unicode text without U+0000")
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the JSON repeats the member '{shown(key)}'")
        result[key] = value
    return result


def _round_trip(message_type: Any, data: dict[str, Any], where: str) -> dict[str, Any]:
    """Parse into the a2a.proto type so the card signer can never meet a shape it rejects."""
    try:
        parsed: dict[str, Any] = MessageToDict(ParseDict(data, message_type()))
    except (ParseError, TypeError, ValueError, OverflowError):
        # OverflowError: an integer past a double's range, in a manifest built in code.
        raise ValueError(f"{where}: not a valid A2A {message_type.__name__}") from None
    return parsed


def _check_capabilities(capabilities: dict[str, Any]) -> None:
    _round_trip(AgentCapabilities, capabilities, "capabilities")
    for flag, edge_value in EDGE_CAPABILITY_FLAGS.items():
        if flag in _RESTATED_EITHER_WAY:
            continue
        if flag in capabilities and capabilities[flag] is not edge_value:
            raise ValueError(f"capabilities.{flag}: must be {str(edge_value).lower()} on this edge")
    for index, extension in enumerate(capabilities.get("extensions") or []):
        where = f"capabilities.extensions[{index}]"
        uri = extension.get("uri") if isinstance(extension, dict) else None
        # Published in a signed card that gateways may show or follow: a URI with credentials,
        # a javascript:/data: one, or none at all (served as ``{}``) is refused.
        if not isinstance(uri, str) or not _EXTENSION_URI.fullmatch(uri):
            raise ValueError(
                f"{where}.uri: must be an https or http URL without credentials, or a urn: name"
            )
        params = extension.get("params") if isinstance(extension, dict) else None
        if params is not None:
            _check_params(params, f"{where}.params", 1)


def _check_params(value: Any, where: str, depth: int) -> None:
    # CONTRACT §4 drops nulls from the canonical form while the a2a-sdk verifier keeps them:
    # a null would make the same card verify for one and fail for the other. Refuse it.
    if value is None:
        raise ValueError(f"{where}: null is not allowed in a signed card")
    if depth > _MAX_PARAMS_DEPTH:
        raise ValueError(f"{where}: nested deeper than {_MAX_PARAMS_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_params(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_params(item, f"{where}[{index}]", depth + 1)


def _describe(exc: ValidationError) -> str:
    """``field.path: message`` for the first few errors, never the offending input."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:3]:
        path = ""
        for item in error["loc"]:
            path += f"[{item}]" if isinstance(item, int) else (f".{item}" if path else str(item))
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{path}: {message}" if path else message)
    return "; ".join(parts)
