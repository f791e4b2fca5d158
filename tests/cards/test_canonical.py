"""The canonical form (A2A §8.4.1, CONTRACT §4) and RFC 8785 JCS."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785

from app.cards.canonical import (
    MAX_DEPTH,
    CardFormatError,
    canonical_dict,
    canonical_payload,
    jcs,
    prune_empty,
    wire_form,
)


def test_prune_drops_empty_strings_arrays_objects_and_nulls_recursively() -> None:
    value = {"a": "", "b": [], "c": {}, "d": None, "e": {"f": [{"g": ""}, {}]}, "h": [None, ""]}
    assert prune_empty(value) is None


def test_prune_keeps_false_and_zero() -> None:
    value = {"flag": False, "count": 0, "ratio": 0.0, "nested": {"on": False, "list": [0, ""]}}
    assert prune_empty(value) == {
        "flag": False,
        "count": 0,
        "ratio": 0.0,
        "nested": {"on": False, "list": [0]},
    }


def test_prune_refuses_pathological_depth() -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(CardFormatError):
        prune_empty(deep)


def test_jcs_sorts_members_and_emits_utf8_and_es6_numbers() -> None:
    assert jcs({"b": 1.0, "a": "é", "c": [1e21, 0.5]}) == (
        '{"a":"é","b":1,"c":[1e+21,0.5]}'.encode()
    )


def test_jcs_refuses_values_rfc8785_cannot_represent() -> None:
    with pytest.raises(CardFormatError):
        jcs({"n": float("nan")})
    with pytest.raises(CardFormatError):
        jcs({"s": "\ud800"})


def test_gateway_vector(vector: dict[str, Any]) -> None:
    gateway = vector["gateway_vector"]
    assert canonical_payload(gateway["input"]) == gateway["canonical"].encode()


def test_spec_example_differs_only_by_empty_required_fields(vector: dict[str, Any]) -> None:
    """A2A §8.4.1 keeps empty REQUIRED fields; our rule (and the reference's) prunes them all.

    The note in the vector: cards we serve never carry an empty required field, so both rules
    give the same bytes for them. Here the input has an empty ``description`` and ``skills``:
    our payload omits them, the spec's keeps them, and nothing else differs.
    """
    example = vector["spec_example"]
    ours = canonical_payload(example["input"])
    assert ours == (
        b'{"capabilities":{"pushNotifications":false,"streaming":false},"name":"Example Agent"}'
    )
    assert ours != example["spec_canonical"].encode()
    spec = json.loads(example["spec_canonical"])
    assert spec.pop("description") == ""
    assert spec.pop("skills") == []
    assert jcs(spec) == ours


def test_served_form_never_carries_an_empty_value(vector: dict[str, Any]) -> None:
    # The served document is protobuf-JSON: empty strings and arrays are not emitted at all,
    # so a verifier keeping "empty REQUIRED fields" finds none to keep (vector note).
    served = wire_form(vector["spec_example"]["input"])
    assert "description" not in served
    assert "skills" not in served
    assert canonical_dict(served) == prune_empty(served)


def test_payload_drops_signatures_and_unknown_fields(vector: dict[str, Any]) -> None:
    served = vector["served_card"]
    expected = vector["canonical_payload"].encode()
    assert canonical_payload(served) == expected
    assert canonical_payload({**served, "futureField": {"x": 1}, "signatures": []}) == expected
    nested = json.loads(json.dumps(served))
    nested["capabilities"]["unknownFlag"] = True
    assert canonical_payload(nested) == expected


def test_payload_keeps_false_capabilities(vector: dict[str, Any]) -> None:
    # capabilities.streaming is an `optional` bool in a2a.proto: false is present and signed.
    assert b'"streaming":false' in canonical_payload(vector["served_card"])


def test_wire_form_refuses_unknown_fields() -> None:
    # We never serve a member the proto does not know: it would be outside the signature.
    with pytest.raises(CardFormatError):
        wire_form({"name": "x", "futureField": 1})


def test_wire_form_refuses_wrong_types() -> None:
    with pytest.raises(CardFormatError):
        wire_form({"name": ["not", "a", "string"]})


def test_canonical_payload_is_rfc8785_of_the_pruned_card(vector: dict[str, Any]) -> None:
    served = vector["served_card"]
    assert canonical_payload(served) == rfc8785.dumps(canonical_dict(served))
