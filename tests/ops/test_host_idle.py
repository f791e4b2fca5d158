"""``EDGE_IDLE_POLL_MICROSECONDS`` unset: the edge polls except where the guest kernel polls
already (``app.ops.host_idle``); an explicit value always wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.ops.host_idle import POLL_MICROSECONDS, HostIdle, auto_idle_poll_microseconds
from app.security.keys import generate_private_jwk
from app.services import build_services, idle_poll_seconds
from app.settings import Settings, load_settings


def _sys(root: Path, driver: str | None, halt_poll_ns: str | None) -> Path:
    if driver is not None:
        path = root / "devices/system/cpu/cpuidle/current_driver"
        path.parent.mkdir(parents=True)
        path.write_text(driver + "\n")
    if halt_poll_ns is not None:
        path = root / "module/haltpoll/parameters/guest_halt_poll_ns"
        path.parent.mkdir(parents=True)
        path.write_text(halt_poll_ns + "\n")
    return root


@pytest.mark.parametrize(
    ("driver", "halt_poll_ns", "expected"),
    [
        # The guest kernel polls before it halts: the edge's polling on top bought ~nothing.
        ("haltpoll", "200000", 0),
        ("haltpoll", "50000", 0),
        # Nobody polls: every wake-up is a full halt and resume; the edge's polling pays.
        ("haltpoll", "0", POLL_MICROSECONDS),
        # No cpuidle driver: the guest halts into the host (the parameter, if any, is unread);
        # measured mostly to pay with one process.
        ("none", "200000", POLL_MICROSECONDS),
        ("none", None, POLL_MICROSECONDS),
        # Bare metal, or nothing readable (a container without /sys): never measured, so the
        # window the edge always had.
        ("intel_idle", None, POLL_MICROSECONDS),
        (None, None, POLL_MICROSECONDS),
        ("haltpoll", None, POLL_MICROSECONDS),
        ("haltpoll", "garbage", POLL_MICROSECONDS),
    ],
)
def test_auto_turns_polling_off_only_where_the_guest_polls(
    tmp_path: Path, driver: str | None, halt_poll_ns: str | None, expected: int
) -> None:
    host = HostIdle.read(_sys(tmp_path, driver, halt_poll_ns))
    assert auto_idle_poll_microseconds(host) == expected
    assert host.describe()


def _settings(**overrides: object) -> Settings:
    return load_settings(
        signing_key=json.dumps(generate_private_jwk("k1")),
        gateway_origins=["https://gateway.test"],
        public_url="https://edge.example.com",
        database_url="sqlite+aiosqlite:///:memory:",
        **overrides,
    )


HALTS = HostIdle(driver="haltpoll", guest_halt_poll_ns=0)
POLLED = HostIdle(driver="haltpoll", guest_halt_poll_ns=200_000)


def test_unset_and_auto_follow_the_host() -> None:
    for settings in (_settings(), _settings(idle_poll_microseconds="auto")):
        assert settings.idle_poll_microseconds is None
        assert idle_poll_seconds(settings, HALTS) == POLL_MICROSECONDS / 1e6
        assert idle_poll_seconds(settings, POLLED) == 0.0


def test_an_explicit_value_wins_over_the_host() -> None:
    assert idle_poll_seconds(_settings(idle_poll_microseconds=0), HALTS) == 0.0
    assert idle_poll_seconds(_settings(idle_poll_microseconds="300"), POLLED) == 300e-6


def test_the_environment_variable_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGE_IDLE_POLL_MICROSECONDS", "auto")
    assert _settings().idle_poll_microseconds is None
    monkeypatch.setenv("EDGE_IDLE_POLL_MICROSECONDS", "0")
    assert _settings().idle_poll_microseconds == 0
    monkeypatch.setenv("EDGE_IDLE_POLL_MICROSECONDS", "fast")
    with pytest.raises(ConfigError, match="EDGE_IDLE_POLL_MICROSECONDS"):
        _settings()


def test_build_services_polls_as_the_host_calls_for() -> None:
    assert build_services(_settings(), host=HALTS).idle_pollers.request.enabled
    polled = build_services(_settings(), host=POLLED).idle_pollers
    assert not polled.request.enabled and not polled.statement.enabled
