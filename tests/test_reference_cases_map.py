"""``tests/REFERENCE_CASES.md`` stays true: every reference case 1-107 has one row with a known
outcome, every applicable case and every CONTRACT rule cites at least one test, and every cited
test id names a test function that exists (checked with ``ast``, no collection run)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "tests" / "REFERENCE_CASES.md"
CASES = range(1, 108)
OUTCOMES = {"same", "stricter", "differs by design", "not applicable"}
TEST_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
CASE_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|(.*)\|\s*$")
RULE_ROW = re.compile(r"^\|\s*(§\d[^|]*?)\s*\|(.*)\|\s*$")
SECTIONS = [f"§{n}" for n in range(1, 9)]


def _sections() -> tuple[list[str], list[str]]:
    text = MAP.read_text(encoding="utf-8")
    cases, _, rules = text.partition("## 2. CONTRACT rules")
    assert rules, "REFERENCE_CASES.md lost its CONTRACT section"
    return cases.splitlines(), rules.splitlines()


@cache
def _functions(path: str) -> frozenset[str]:
    """Names of the test functions a file defines, at module level or inside a class."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    )


def _case_rows() -> dict[int, list[tuple[str, str]]]:
    rows: dict[int, list[tuple[str, str]]] = {}
    for line in _sections()[0]:
        match = CASE_ROW.match(line)
        if match:
            rows.setdefault(int(match.group(1)), []).append((match.group(2), match.group(3)))
    return rows


def test_every_case_has_exactly_one_row_with_a_known_outcome() -> None:
    rows = _case_rows()
    assert sorted(rows) == list(CASES), sorted(set(CASES) ^ set(rows))
    for case, entries in rows.items():
        assert len(entries) == 1, f"case {case} has {len(entries)} rows"
        outcome, _ = entries[0]
        assert outcome in OUTCOMES, f"case {case}: unknown outcome {outcome!r}"


def test_every_applicable_case_cites_a_test() -> None:
    for case, [(outcome, rest)] in _case_rows().items():
        if outcome != "not applicable":
            assert TEST_ID.search(rest), f"case {case} ({outcome}) cites no test"


def test_every_contract_section_has_rules_that_cite_tests() -> None:
    seen: set[str] = set()
    for line in _sections()[1]:
        match = RULE_ROW.match(line)
        if not match:
            continue
        section = match.group(1).split()[0]
        seen.add(section)
        assert TEST_ID.search(match.group(2)), f"rule row {line[:60]!r} cites no test"
    assert seen == set(SECTIONS)


def _cited() -> list[tuple[str, str]]:
    return sorted(set(TEST_ID.findall(MAP.read_text(encoding="utf-8"))))


def test_every_cited_test_exists() -> None:
    cited = _cited()
    assert len(cited) > 200
    missing = [
        f"{path}::{name}"
        for path, name in cited
        if not (ROOT / path).is_file() or name not in _functions(path)
    ]
    assert missing == []
