"""Tenant ids (CONTRACT §8) and manifest validation at registration."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from app.tenants.manifest import (
    EDGE_CAPABILITY_FLAGS,
    MAX_MANIFEST_BYTES,
    TenantManifest,
    validate_tenant_id,
)

SKILL = {"id": "brew", "name": "Brew", "description": "Brews coffee.", "tags": ["coffee"]}
BASE: dict[str, Any] = {"name": "Coffee", "description": "A coffee agent.", "version": "1.0.0"}


def _text(**changes: Any) -> str:
    data = {**BASE, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not None})


# --- tenant ids -------------------------------------------------------------------------------


# "constructor" is a valid id: it is merely unknown unless registered (REFERENCE-CASES 34).
@pytest.mark.parametrize(
    "tenant", ["a", "0", "main", "my-agent-2", "a" * 63, "9-lives", "a-", "constructor"]
)
def test_valid_tenant_ids(tenant: str) -> None:
    assert validate_tenant_id(tenant) == tenant


@pytest.mark.parametrize(
    "tenant",
    [
        "",
        "-lead",
        "Main",
        "a" * 64,
        "a_b",
        "a.b",
        "a b",
        "ünï",
        "main\n",
        " main",
        "a/b",
        "__proto__",
    ],
)
def test_invalid_tenant_ids(tenant: str) -> None:
    with pytest.raises(ValueError, match="tenant id"):
        validate_tenant_id(tenant)


def test_non_string_tenant_id() -> None:
    with pytest.raises(ValueError, match="tenant id"):
        validate_tenant_id(7)  # type: ignore[arg-type]


# --- valid manifests ------------------------------------------------------------------------


def test_minimal_manifest_gets_defaults() -> None:
    manifest = TenantManifest.from_json_text(_text())
    assert manifest.name == "Coffee"
    assert manifest.default_input_modes == ["text/plain"]
    assert manifest.default_output_modes == ["text/plain"]
    assert manifest.skills == []
    assert manifest.capabilities is None


def test_full_manifest_and_card_fields() -> None:
    text = _text(
        capabilities={
            "pushNotifications": True,
            "extensions": [{"uri": "https://ext.test/v1", "required": False, "params": {"n": 1}}],
        },
        defaultInputModes=["text/plain", "application/json"],
        defaultOutputModes=["application/json"],
        skills=[
            {
                **SKILL,
                "examples": ["make a flat white"],
                "inputModes": ["text/plain"],
                "outputModes": ["application/json"],
            }
        ],
    )
    fields = TenantManifest.from_json_text(text).card_fields()
    assert fields == {
        "name": "Coffee",
        "description": "A coffee agent.",
        "version": "1.0.0",
        "capabilities": {
            "pushNotifications": True,
            "extensions": [{"uri": "https://ext.test/v1", "required": False, "params": {"n": 1}}],
            **EDGE_CAPABILITY_FLAGS,
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {
                **SKILL,
                "examples": ["make a flat white"],
                "inputModes": ["text/plain"],
                "outputModes": ["application/json"],
            }
        ],
    }


def test_card_fields_always_carry_the_edge_capabilities() -> None:
    fields = TenantManifest.from_json_text(_text()).card_fields()
    assert fields["capabilities"] == EDGE_CAPABILITY_FLAGS


def test_as_json_round_trips() -> None:
    manifest = TenantManifest.from_json_text(_text(skills=[SKILL]))
    assert TenantManifest.from_data(manifest.as_json()) == manifest
    assert "defaultInputModes" in manifest.as_json()
    assert "examples" not in manifest.as_json()["skills"][0]


def test_manifest_is_frozen() -> None:
    manifest = TenantManifest.from_json_text(_text())
    with pytest.raises(ValidationError):
        manifest.name = "other"  # type: ignore[misc]


# --- refused manifests -------------------------------------------------------------------------


EXT = {"uri": "https://ext.test/v1"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        ("null", "JSON object"),
        ('{"name": "a", "name": "b", "description": "d", "version": "1"}', "repeats"),
        (_text(name=None), "name"),
        (_text(name=""), "name"),
        (_text(name="   "), "name: must not be blank"),
        (_text(name=5), "name"),
        (_text(description=None), "description"),
        (_text(description=""), "description"),
        (_text(version=None), "version"),
        (_text(version=""), "version"),
        (_text(version=1), "version"),
        (_text(provider={"organization": "x"}), "provider"),
        (_text(default_input_modes=["text/plain"]), "default_input_modes"),
        (_text(defaultInputModes=[]), "defaultInputModes"),
        (_text(defaultInputModes=[""]), "defaultInputModes[0]"),
        (_text(defaultOutputModes="text/plain"), "defaultOutputModes"),
        (_text(defaultOutputModes=["text plain"]), "defaultOutputModes[0]"),
        (_text(skills={"id": "x"}), "skills"),
        (_text(skills=[{**SKILL, "id": ""}]), "skills[0].id"),
        (_text(skills=[{**SKILL, "name": None}]), "skills[0].name"),
        (_text(skills=[{k: v for k, v in SKILL.items() if k != "description"}]), "description"),
        (_text(skills=[{k: v for k, v in SKILL.items() if k != "tags"}]), "skills[0].tags"),
        (_text(skills=[{**SKILL, "tags": []}]), "skills[0].tags"),
        (_text(skills=[{**SKILL, "tags": [""]}]), "skills[0].tags[0]"),
        (_text(skills=[{**SKILL, "tags": [" "]}]), "tags: must not be blank"),
        (_text(skills=[{**SKILL, "extra": 1}]), "skills[0].extra"),
        (_text(skills=[{**SKILL, "input_modes": ["x"]}]), "skills[0].input_modes"),
        (_text(skills=[SKILL, SKILL]), "unique"),
        (_text(capabilities={"bogus": True}), "capabilities: not a valid A2A AgentCapabilities"),
        (_text(capabilities={"pushNotifications": "yes"}), "capabilities"),
        (_text(capabilities={"pushNotifications": False}), "capabilities.pushNotifications"),
        (_text(capabilities={"extendedAgentCard": False}), "capabilities.extendedAgentCard"),
        (_text(capabilities=[]), "capabilities"),
        (
            _text(
                capabilities={
                    "extensions": [
                        {"uri": "https://example.test/ext", "params": {"a": {"b": None}}}
                    ]
                }
            ),
            "capabilities.extensions[0].params.a.b: null",
        ),
        (
            _text(
                capabilities={"extensions": [{"uri": "https://example.test/ext", "params": [1]}]}
            ),
            "capabilities",
        ),
        ('{"name": NaN, "description": "d", "version": "1"}', "NaN"),
        # Found by audit: 10**400 crashed the CLI with an OverflowError traceback.
        (_text(capabilities={"extensions": [{**EXT, "params": {"a": 10**400}}]}), "out of range"),
        (
            _text(capabilities={"extensions": [{**EXT, "params": {"a": 1}}]}).replace(
                '"a": 1', '"a": ' + "9" * 5000
            ),
            "out of range",
        ),
        (_text(name="red \x1b[31m"), "name: must be one line without control characters"),
        (_text(name="two\nlines"), "name: must be one line"),
        (_text(version="1\r"), "version: must be one line"),
        (_text(description="bell \x07"), "description: must not hold control characters"),
        (_text(description="c1 \x9b"), "description: must not hold control characters"),
        (_text(skills=[{**SKILL, "id": "a\tb"}]), "id: must be one line"),
        (_text(skills=[{**SKILL, "tags": ["x\x00"]}]), "tags"),
        (_text(skills=[{**SKILL, "examples": ["\x1b[2J"]}]), "examples"),
        (_text(defaultInputModes=["text/\x7fplain"]), "modes"),
        (_text(capabilities={"extensions": [{"uri": ""}]}), "extensions[0].uri"),
        (_text(capabilities={"extensions": [{"required": True}]}), "extensions[0].uri"),
        (_text(capabilities={"extensions": [{"uri": "https://user:pw@ext.test/"}]}), ".uri"),
        (_text(capabilities={"extensions": [{"uri": "javascript:alert(1)"}]}), ".uri"),
        (_text(capabilities={"extensions": [{"uri": "data:text/html,x"}]}), ".uri"),
        (_text(capabilities={"extensions": [EXT, {"uri": "ftp://ext.test/"}]}), "extensions[1]"),
        ('{"name": "\\ud800", "description": "d", "version": "1"}', "name"),
    ],
)
def test_refused_manifests_name_the_field(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as caught:
        TenantManifest.from_json_text(text)
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_prose_keeps_line_breaks_and_tabs_and_extensions_take_urns() -> None:
    manifest = TenantManifest.from_json_text(
        _text(
            description="First line.\n\tSecond, indented.\r\n",
            capabilities={"extensions": [{"uri": "urn:example:ext:1"}, {"uri": "http://x.test"}]},
        )
    )
    assert manifest.description.startswith("First line.\n\t")


def test_an_integer_past_a_double_in_code_is_refused_not_raised() -> None:
    data = {**BASE, "capabilities": {"extensions": [{**EXT, "params": {"a": 10**400}}]}}
    with pytest.raises(ValueError, match="capabilities: not a valid A2A AgentCapabilities"):
        TenantManifest.from_data(data)


def test_error_messages_do_not_echo_values() -> None:
    secret = "sk-live-SECRET-VALUE"
    with pytest.raises(ValueError) as caught:
        TenantManifest.from_json_text(_text(version=[secret]))
    assert secret not in str(caught.value)


def test_deeply_nested_extension_params_are_refused() -> None:
    params: Any = "leaf"
    for _ in range(40):
        params = {"n": params}
    with pytest.raises(ValueError, match="deeper"):
        TenantManifest.from_data(
            {**BASE, "capabilities": {"extensions": [{**EXT, "params": params}]}}
        )


def test_oversized_manifest_is_refused() -> None:
    with pytest.raises(ValueError, match="larger"):
        TenantManifest.from_json_text(_text(description="x" * MAX_MANIFEST_BYTES))


def test_from_data_refuses_non_objects() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        TenantManifest.from_data(["name"])


def test_model_validate_applies_the_same_rules() -> None:
    with pytest.raises(ValidationError):
        TenantManifest.model_validate({**BASE, "skills": [SKILL, SKILL]})


@pytest.mark.parametrize("stated", [True, False])
def test_streaming_may_be_stated_either_way_and_the_edge_serves_true(stated: bool) -> None:
    # Manifests written while the edge did not stream said false; they stay valid.
    manifest = TenantManifest.from_json_text(_text(capabilities={"streaming": stated}))
    assert manifest.card_fields()["capabilities"]["streaming"] is True
