"""`tenants add|update --profile` (issue 49): ``open`` implies ``--require-push-config false``
unless that flag is given too; the profile is shown."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from app.cli import tenants as cli
from app.db.engine import Database
from app.tenants.registry import TenantStore
from app.testing.edge import demo_manifest


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["tenants", *argv])


@pytest.fixture
def manifest(tmp_path: Path) -> str:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(demo_manifest()))
    return str(path)


@pytest.mark.parametrize(
    ("flags", "profile", "require"),
    [
        ((), "gateway", True),
        (("--profile", "open"), "open", False),
        (("--profile", "open", "--require-push-config", "true"), "open", True),
        (("--profile", "gateway", "--require-push-config", "false"), "gateway", False),
    ],
)
async def test_add_with_a_profile(
    database: Database, manifest: str, flags: tuple[str, ...], profile: str, require: bool
) -> None:
    store = TenantStore(database)
    await cli._add(store, _parse("add", "t1", "--manifest", manifest, *flags))
    record = await store.get("t1")
    assert record is not None
    assert (record.profile, record.require_push_config) == (profile, require)
    assert cli._show(record)["profile"] == profile


async def test_update_to_open_drops_the_push_requirement_unless_told(
    database: Database, manifest: str
) -> None:
    store = TenantStore(database)
    await cli._add(store, _parse("add", "t1", "--manifest", manifest))
    await cli._update(store, _parse("update", "t1", "--profile", "open"))
    record = await store.get("t1")
    assert record is not None and record.is_open and not record.require_push_config
    await cli._update(store, _parse("update", "t1", "--profile", "gateway"))
    record = await store.get("t1")
    assert record is not None and record.profile == "gateway"


def test_an_unknown_profile_is_a_usage_error(manifest: str) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse("add", "t1", "--manifest", manifest, "--profile", "public")
    assert exited.value.code == 2
