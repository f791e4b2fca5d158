"""The manual stays true and small.

README.md is the front page (what, trust, quickstart, tests, the benchmark summary); the
manual is under docs/. These tests hold them to the code: every setting and every CLI command
documented where it belongs, every relative link resolving inside the repository, the README
small, and no file in the tree grown past what a reader (or a reviewer) can take in.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import AliasChoices

from app.cli.main import build_parser
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

README_MAX_BYTES = 10 * 1024
FILE_MAX_BYTES = 40 * 1024
REQUIRED_DOCS = (
    "configuration.md",
    "operations.md",
    "tenants-and-agents.md",
    "protocol.md",
    "observability.md",
    "troubleshooting.md",
    "architecture.md",
    "performance.md",
    "scaling.md",
)
LOCK_FILE = re.compile(r"(\.lock|-lock\.json|-lock\.yaml)$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# An environment variable as the docs write one: upper case words joined by underscores.
ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _manual() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _linked_docs() -> list[Path]:
    # The manual, and the folder READMEs that point into it.
    return [*_manual(), ROOT / "bench" / "README.md", ROOT / "deploy" / "README.md"]


def _env_names() -> list[str]:
    """Each field's variable: its alias, or the class's env_prefix + the field name."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names = []
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.append(str(alias.choices[0]))
        elif isinstance(alias, str):
            names.append(alias)
        else:
            names.append(f"{prefix}{field}".upper())
    return names


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule, enough for our docs)."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    body = FENCE.sub("", _text(path))
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", body, re.M)}


# --- the README -----------------------------------------------------------------------------


def test_readme_is_at_most_10_kb() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/"


def test_readme_names_the_one_commands() -> None:
    text = _text(README)
    assert "./scripts/quickstart" in text
    assert "./scripts/test" in text
    assert '.venv/bin/python -m pytest -m "not slow and not container"' in text
    ci = _text(ROOT / ".ci" / "run")
    assert "./scripts/test" in ci


def test_readme_links_every_doc() -> None:
    text = _text(README)
    missing = [name for name in REQUIRED_DOCS if f"(docs/{name})" not in text]
    assert not missing, f"README.md does not link {missing}"


# --- links ----------------------------------------------------------------------------------


def test_every_relative_link_resolves_inside_the_repository() -> None:
    broken = []
    for doc in _linked_docs():
        body = FENCE.sub("", _text(doc))
        for target in LINK.findall(body):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (doc.parent / path_part).resolve() if path_part else doc
            where = f"{doc.relative_to(ROOT)}: {target}"
            if not resolved.is_relative_to(ROOT):
                broken.append(f"{where} (outside the repository)")
            elif not resolved.is_file():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_manual_does_not_send_readers_outside_the_repository() -> None:
    # CONTRACT.md and ARCHITECTURE.md are shared with other teams and not part of this tree.
    for doc in _manual():
        for target in LINK.findall(_text(doc)):
            assert not target.endswith(("CONTRACT.md", "ARCHITECTURE.md")), (doc, target)


# --- configuration --------------------------------------------------------------------------


def test_every_setting_is_documented_in_configuration_md() -> None:
    text = _text(DOCS / "configuration.md")
    missing = [name for name in _env_names() if f"`{name}`" not in text]
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_configuration_md_names_no_variable_the_settings_do_not_have() -> None:
    known = set(_env_names())
    named = set(ENV_NAME.findall(_text(DOCS / "configuration.md")))
    unknown = sorted(named - known)
    assert not unknown, f"docs/configuration.md names variables Settings lacks: {unknown}"


# --- commands -------------------------------------------------------------------------------


def test_every_cli_command_is_documented_in_operations_md() -> None:
    text = _text(DOCS / "operations.md")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    missing = []
    for name, subparser in sub.choices.items():  # type: ignore[union-attr]
        if f"looping-edge {name}" not in text:
            missing.append(name)
        for action in subparser._actions:
            if getattr(action, "choices", None) and isinstance(action.choices, dict):
                for child in action.choices:
                    if f"{name} {child}" not in text:
                        missing.append(f"{name} {child}")
    assert "looping-keys" in text
    assert not missing, f"docs/operations.md lacks commands: {missing}"


# --- the tree -------------------------------------------------------------------------------


def test_the_manual_is_complete() -> None:
    missing = [name for name in REQUIRED_DOCS if not (DOCS / name).is_file()]
    assert not missing, f"docs/ lacks {missing}"


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def _exempt(path: Path) -> bool:
    relative = path.relative_to(ROOT)
    if LOCK_FILE.search(relative.name):
        return True
    # Test data: fixtures and the tables the tests read, anything under tests/ but code.
    return relative.parts[0] == "tests" and relative.suffix != ".py"


def test_no_tracked_file_is_over_40_kb() -> None:
    large = [
        f"{path.relative_to(ROOT)} ({path.stat().st_size} bytes)"
        for path in _tracked_files()
        if path.is_file() and not _exempt(path) and path.stat().st_size > FILE_MAX_BYTES
    ]
    assert not large, "files over 40 KB:\n" + "\n".join(large)
