"""The summary ``scripts/tck`` writes: per transport, the requirements of one level (MUST
unless told) passed, failed and skipped, read from the TCK's ``reports/compatibility.json``.

A requirement counts for a transport when the TCK recorded a result for it there; the
transport-neutral ones (the agent card, ``agent_card`` in the report) are counted on their own
line. ``python -m app.testing.tck_summary <compatibility.json> [transport] [level]``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRANSPORTS = ("jsonrpc", "http_json", "grpc")
NEUTRAL = "agent_card"


@dataclass
class Tally:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def add(self, requirement: str, outcome: str) -> None:
        bucket = {"PASS": self.passed, "FAIL": self.failed}.get(outcome, self.skipped)
        bucket.append(requirement)


def tally(report: Mapping[str, Any], level: str = "MUST") -> dict[str, Tally]:
    """transport -> the requirements of ``level`` by outcome there."""
    out: dict[str, Tally] = {}
    for requirement, entry in sorted((report.get("per_requirement") or {}).items()):
        if entry.get("level") != level:
            continue
        for transport, outcome in (entry.get("transports") or {}).items():
            out.setdefault(transport, Tally()).add(requirement, str(outcome))
    return out


def not_tested(report: Mapping[str, Any], level: str = "MUST") -> list[str]:
    """The requirements of ``level`` with no result: the TCK has no test for them, or none on
    the transports run (a JSON-only check on a gRPC run)."""
    return sorted(
        requirement
        for requirement, entry in (report.get("per_requirement") or {}).items()
        if entry.get("level") == level and not entry.get("transports")
    )


def render(report: Mapping[str, Any], transports: tuple[str, ...], level: str = "MUST") -> str:
    tallies = tally(report, level)
    lines = ["| transport | passed | failed | skipped |", "|---|---|---|---|"]
    details: list[str] = []
    for transport in (*transports, NEUTRAL):
        t = tallies.get(transport, Tally())
        lines.append(f"| {transport} | {len(t.passed)} | {len(t.failed)} | {len(t.skipped)} |")
        for label, ids in (("failed", t.failed), ("skipped", t.skipped)):
            if ids:
                details.append(f"- {transport} {label}: {', '.join(ids)}")
    untested = not_tested(report, level)
    if untested:
        details.append(f"- not tested on the transports run: {', '.join(untested)}")
    return "\n".join([f"{level} requirements", "", *lines, "", *details]) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    report = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    chosen = args[1] if len(args) > 1 else "all"
    transports = TRANSPORTS if chosen == "all" else (chosen,)
    level = args[2].upper() if len(args) > 2 else "MUST"
    sys.stdout.write(render(report, transports, level))


if __name__ == "__main__":
    main()
