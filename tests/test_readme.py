"""The README is the user's manual: every env var and every CLI command must be in it."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices

from app.cli.main import build_parser
from app.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _env_names() -> list[str]:
    names = []
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        names.append(
            str(alias.choices[0]) if isinstance(alias, AliasChoices) else f"EDGE_{name.upper()}"
        )
    return names


def test_every_env_var_is_documented() -> None:
    missing = [n for n in _env_names() if f"`{n}`" not in README]
    assert not missing, f"README lacks env vars: {missing}"


def test_every_cli_command_is_documented() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    missing = []
    for name, subparser in sub.choices.items():  # type: ignore[union-attr]
        if f"looping-edge {name}" not in README:
            missing.append(name)
        for action in subparser._actions:
            if getattr(action, "choices", None) and isinstance(action.choices, dict):
                for child in action.choices:
                    if child not in README:
                        missing.append(f"{name} {child}")
    assert not missing, f"README lacks commands: {missing}"


def test_readme_names_the_one_commands() -> None:
    assert "./scripts/quickstart" in README
    assert "./scripts/test" in README
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "./scripts/test" in ci
