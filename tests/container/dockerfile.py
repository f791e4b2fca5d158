"""A small reader for the project's Dockerfile: instructions per stage, continuations joined.

Enough for structural assertions (which instructions, which arguments); hadolint does the
real linting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """The JSON array of an exec-form ENTRYPOINT/CMD (raises if it is shell form)."""
        value = json.loads(self.args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), self.args
        return value


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"stage {self.name} has no {keyword}"
        return found[-1]


@dataclass
class Dockerfile:
    preamble: list[Instruction]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # comments inside a continued instruction are dropped by the builder too
        if stripped.endswith("\\"):
            current += stripped[:-1].rstrip() + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current.rstrip())
    return lines


def parse(text: str) -> Dockerfile:
    preamble: list[Instruction] = []
    stages: list[Stage] = []
    for line in logical_lines(text):
        keyword, _, args = line.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip())
        if instruction.keyword == "FROM":
            words = instruction.args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(base=words[0], name=name))
        elif stages:
            stages[-1].instructions.append(instruction)
        else:
            preamble.append(instruction)
    return Dockerfile(preamble=preamble, stages=stages)


def load() -> Dockerfile:
    return parse(DOCKERFILE.read_text(encoding="utf-8"))
