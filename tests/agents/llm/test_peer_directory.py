"""The ``agents`` block of an llm config (issue 54): names, URLs (https, or http to loopback
with ``allow_http_loopback``), auth, and a literal credential refused without echoing it."""

from __future__ import annotations

from typing import Any

import pytest

from app.agents.llm.config import LlmConfigError, parse_llm_config
from app.agents.llm.peer_directory import EDGE_TOKEN, looks_like_credential

BASE = {"model": {"base_url": "http://127.0.0.1:1/v1", "name": "m"}, "system_prompt": "x"}
JWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXZhbHVl"


def _config(agents: dict[str, Any], **extra: Any) -> Any:
    return parse_llm_config({**BASE, "agents": agents, **extra})


def test_a_directory_of_two_peers_is_read() -> None:
    config = _config(
        {
            "billing": {"url": "https://b.example", "tenant": "acme", "auth": EDGE_TOKEN},
            "search": {"url": "https://s.example/a2a", "auth": {"bearer_env": "SEARCH_TOKEN"}},
        }
    )
    assert config.agents["billing"].auth == EDGE_TOKEN
    assert config.agents["billing"].bearer_env is None
    assert config.agents["search"].bearer_env == "SEARCH_TOKEN"
    assert parse_llm_config(BASE).agents == {}


def test_http_only_to_loopback_and_only_when_allowed() -> None:
    loopback = {"b": {"url": "http://127.0.0.1:7102", "tenant": "t", "auth": EDGE_TOKEN}}
    with pytest.raises(LlmConfigError, match=r"agents: 'b': url: .*https"):
        _config(loopback)
    assert _config(loopback, allow_http_loopback=True).allow_http_loopback
    remote = {"b": {"url": "http://b.example", "tenant": "t", "auth": EDGE_TOKEN}}
    with pytest.raises(LlmConfigError, match="https"):
        _config(remote, allow_http_loopback=True)


@pytest.mark.parametrize(
    ("agents", "where"),
    [
        ({"b c": {"url": "https://b.example", "auth": {"bearer_env": "X"}}}, "agent name"),
        ({"b": {"url": "https://b.example", "auth": "basic"}}, "agents.b.auth: must be"),
        ({"b": {"url": "https://b.example", "auth": {"bearer_env": "A-B"}}}, "bearer_env"),
        ({"b": {"url": "https://b.example", "auth": EDGE_TOKEN}}, "tenant: required"),
        ({"b": {"url": "https://b.example?x=1", "auth": {"bearer_env": "X"}}}, "query"),
        ({"b": {"url": "ftp://b.example", "auth": {"bearer_env": "X"}}}, "url"),
        ({"b": {"url": "https://b.example", "auth": {"bearer_env": "X"}, "x": 1}}, "unknown"),
        ({"b": {"url": "https://b.example", "tenant": "a b", "auth": EDGE_TOKEN}}, "tenant"),
    ],
)
def test_a_bad_entry_names_the_field(agents: dict[str, Any], where: str) -> None:
    with pytest.raises(LlmConfigError, match=where):
        _config(agents)


SECRET = "aB3dEfGhIjKlMnOpQrStUvWxYz0123456789"


@pytest.mark.parametrize(
    "entry",
    [
        {"url": "https://b.example", "auth": {"bearer_env": "X"}, "token": "short"},
        {"url": "https://b.example", "auth": {"bearer_env": "X"}, "Authorization": "x"},
        {"url": "https://b.example", "auth": {"bearer_env": "X"}, "password": "pw"},
        {"url": "https://b.example", "auth": {"bearer_env": "X"}, "client_secret": "s"},
        {"url": "https://b.example", "auth": {"bearer_env": "X"}, "api-key": "k"},
        {"url": "https://b.example", "auth": f"Bearer {SECRET}"},
        {"url": "https://b.example", "auth": {"bearer_env": JWT}},
        {"url": f"https://user:{SECRET}@b.example", "auth": {"bearer_env": "X"}},
        {"url": "https://b.example", "auth": {"bearer_env": "X"}, "note": SECRET},
        {"url": "https://b.example", "auth": {"bearer_env": "X"}, "h": [{"k": f"sk-{SECRET}"}]},
    ],
)
def test_a_literal_credential_is_refused_without_echoing_it(entry: dict[str, Any]) -> None:
    with pytest.raises(LlmConfigError) as caught:
        _config({"peer": entry})
    message = str(caught.value)
    assert "literal credential" in message and "bearer_env" in message
    assert SECRET not in message and JWT not in message
    assert "short" not in message and "pw" not in message.replace("password", "")


@pytest.mark.parametrize("value", ["REMOTE_A2A_TOKEN", "acme-production-tenant-0001", "edge-token"])
def test_names_and_ids_are_not_mistaken_for_credentials(value: str) -> None:
    assert not looks_like_credential(value)
    assert not looks_like_credential("https://agent.example.com/a2a/v1")


@pytest.mark.parametrize(
    "variable", ["A2A_SIGNING_KEY", "DATABASE_URL", "EDGE_PUSH_SECRET_KEY", "edge_x", "PUBLIC_URL"]
)
def test_bearer_env_may_not_name_one_of_the_edges_own_settings(variable: str) -> None:
    """Else the edge's signing key or database URL would go, as a bearer token, to whatever
    URL the entry names."""
    entry = {"url": "https://b.example", "auth": {"bearer_env": variable}}
    with pytest.raises(LlmConfigError, match="edge's own settings"):
        _config({"b": entry})
