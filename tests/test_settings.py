"""Settings: validated at start, one line naming the variable (issue 2 foundation)."""

from __future__ import annotations

import json

import pytest

from app.errors import ConfigError
from app.security.keys import generate_private_jwk
from app.services import build_services
from app.settings import load_settings

KEY = json.dumps(generate_private_jwk("k1"))
GOOD = {
    "signing_key": KEY,
    "gateway_origins": ["https://gateway.test"],
    "public_url": "https://edge.example.com",
    "database_url": "sqlite+aiosqlite:///:memory:",
}


def _config_error(**overrides: object) -> str:
    values = {**GOOD, **overrides}
    with pytest.raises(ConfigError) as exc:
        settings = load_settings(**values)
        build_services(settings)
    assert "\n" not in exc.value.message
    return exc.value.message


def test_good_settings_build_services() -> None:
    services = build_services(load_settings(**GOOD))
    assert services.settings.endpoint_url == "https://edge.example.com/a2a"
    assert services.settings.jwks_url == "https://edge.example.com/.well-known/jwks.json"


def test_gateway_origins_from_env_json_or_single(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_ORIGINS", '["gateway.test", "https://b.test/"]')
    assert load_settings().allowlist.origins == {"https://gateway.test", "https://b.test"}
    monkeypatch.setenv("GATEWAY_ORIGINS", "http://gateway.test")
    assert load_settings().allowlist.origins == {"https://gateway.test"}


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"signing_key": None}, "A2A_SIGNING_KEY"),
        ({"signing_key": "not json"}, "A2A_SIGNING_KEY"),
        ({"signing_key": json.dumps({**generate_private_jwk("x"), "kid": ""})}, "kid"),
        ({"gateway_origins": []}, "GATEWAY_ORIGINS"),
        ({"gateway_origins": ["  "]}, "GATEWAY_ORIGINS"),
        ({"gateway_origins": ["https://gw.test/path"]}, "GATEWAY_ORIGINS"),
        ({"gateway_origins": "https://a.test,https://b.test"}, "JSON array"),
        ({"public_url": ""}, "PUBLIC_URL"),
        ({"public_url": "http://edge.example.com"}, "PUBLIC_URL"),
        ({"public_url": "https://edge.example.com/base"}, "PUBLIC_URL"),
        ({"database_url": "mysql://x/y"}, "DATABASE_URL"),
        ({"max_body_bytes": "lots"}, "EDGE_MAX_BODY_BYTES"),
        ({"rpc_path": "a2a"}, "EDGE_RPC_PATH"),
        # Values that once passed the start-up checks and failed later (a traceback, or a
        # purge loop that never ran): each is refused at start, naming its variable.
        ({"log_level": "abc"}, "EDGE_LOG_LEVEL"),
        ({"log_level": ""}, "EDGE_LOG_LEVEL"),
        ({"push_secret_key": "short"}, "EDGE_PUSH_SECRET_KEY"),
        ({"task_retention_days": "inf"}, "EDGE_TASK_RETENTION_DAYS"),
        ({"task_retention_days": 1e23}, "EDGE_TASK_RETENTION_DAYS"),
        ({"push_retry_budget_seconds": "inf"}, "EDGE_PUSH_RETRY_BUDGET_SECONDS"),
        ({"turn_timeout_seconds": "nan"}, "EDGE_TURN_TIMEOUT_SECONDS"),
        ({"jwks_cache_seconds": "inf"}, "EDGE_JWKS_CACHE_SECONDS"),
    ],
)
def test_bad_settings_name_the_variable(overrides: dict[str, object], variable: str) -> None:
    assert variable in _config_error(**overrides)


def test_key_file_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "key.json"
    path.write_text(KEY)
    settings = load_settings(**{**GOOD, "signing_key": None, "signing_key_file": path})
    assert build_services(settings).key.kid == "k1"


def test_missing_key_file_names_the_variable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    message = _config_error(signing_key=None, signing_key_file=tmp_path / "nope.json")
    assert "A2A_SIGNING_KEY_FILE" in message


def test_every_default_the_contract_states() -> None:
    # Each of these is a number CONTRACT.md gives; a changed default must fail here.
    s = load_settings(**GOOD)
    assert s.rpc_path == "/a2a"  # §1, §2
    assert s.jwks_path == "/.well-known/jwks.json"  # §2
    assert s.max_token_bytes == 8 * 1024  # §3 step 1
    assert s.jwks_deadline_seconds == 3.0  # §3 step 5
    assert s.jwks_max_bytes == 64 * 1024
    assert s.jwks_cache_seconds == 600.0
    assert s.jwks_cooldown_seconds == 30.0
    assert s.max_token_lifetime_seconds == 300  # §3 step 6
    assert s.clock_skew_seconds == 30
    assert s.identity_claim == "https://loopingai.org/identity"  # §3 step 7
    assert s.tenant_claim == "https://loopingai.org/tenant"  # §3 step 8
    assert s.max_body_bytes == 64 * 1024  # §3 step 9
    assert s.default_history_length == 50  # §5 GetTask
    assert s.task_retention_days == 30.0  # §6


def test_a_key_file_that_is_not_utf8_names_the_variable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "key.bin"
    path.write_bytes(b"\xff\xfe\x00garbage")
    message = _config_error(signing_key=None, signing_key_file=path)
    assert message.startswith("A2A_SIGNING_KEY_FILE: ")


def test_the_log_level_is_read_in_any_case() -> None:
    assert load_settings(**GOOD, log_level="debug").log_level == "DEBUG"
    messages = _config_error(log_level="verbose")
    assert messages == "EDGE_LOG_LEVEL: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("max_header_bytes", 16383),
        ("max_header_bytes", 65537),
        ("header_timeout_seconds", 0),
        ("header_timeout_seconds", "inf"),
        ("body_timeout_seconds", 0),
        ("keep_alive_seconds", 0),
        ("max_connections", 0),
    ],
)
def test_http_limits_out_of_range_name_the_variable(variable: str, value: object) -> None:
    assert f"EDGE_{variable.upper()}" in _config_error(**{variable: value})


def test_http_limits_defaults() -> None:
    # docs/configuration.md gives each with its reason (issue 47 rows 1 and 2).
    s = load_settings(**GOOD)
    assert s.max_header_bytes == 32 * 1024
    assert s.header_timeout_seconds == 10.0
    assert s.body_timeout_seconds == 30.0
    assert s.keep_alive_seconds == 5
    assert s.max_connections == 1000
