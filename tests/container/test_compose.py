"""docker-compose.yml, checked structurally against the Dockerfile and the docs (issue 6).

The real `docker compose up` needs a registry; here we pin what it would do: postgres becomes
healthy, `migrate` runs once, then `edge` serves, with the key as a file secret.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.container.dockerfile import ROOT, load

COMPOSE = ROOT / "docker-compose.yml"
SECRET_TARGET = "/run/secrets/a2a_signing_key"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def _depends(service: dict[str, Any]) -> dict[str, str]:
    return {name: spec["condition"] for name, spec in service["depends_on"].items()}


def test_the_three_services(services: dict[str, Any]) -> None:
    assert set(services) == {"postgres", "migrate", "edge"}


def test_postgres_is_16_with_a_pg_isready_healthcheck_and_a_volume(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    postgres = services["postgres"]
    assert postgres["image"] == "postgres:16"
    test = postgres["healthcheck"]["test"]
    assert test[0] in ("CMD", "CMD-SHELL") and "pg_isready" in " ".join(test[1:])
    volume, _, target = postgres["volumes"][0].partition(":")
    assert target == "/var/lib/postgresql/data"
    assert volume in compose["volumes"], "a named volume, so data outlives the container"


def test_migrate_is_a_one_shot_after_postgres_is_healthy(services: dict[str, Any]) -> None:
    migrate = services["migrate"]
    assert migrate["command"] == ["migrate"]
    assert _depends(migrate) == {"postgres": "service_healthy"}
    assert migrate["restart"] == "no", "a one-shot must not be restarted after exiting 0"


def test_edge_waits_for_migrate_to_complete(services: dict[str, Any]) -> None:
    assert _depends(services["edge"]) == {
        "postgres": "service_healthy",
        "migrate": "service_completed_successfully",
    }


def test_commands_follow_the_dockerfile_entrypoint(services: dict[str, Any]) -> None:
    final = load().final
    assert final.last("ENTRYPOINT").exec_form() == ["looping-edge"]
    for name in ("migrate", "edge"):
        service = services[name]
        # Same image as the Dockerfile builds, and its ENTRYPOINT left alone, so `command` is
        # the looping-edge subcommand the docs show (`looping-edge migrate`, `... serve`).
        assert service["build"]["context"] == "."
        assert service["build"].get("dockerfile", "Dockerfile") == "Dockerfile"
        assert "entrypoint" not in service
        assert isinstance(service["command"], list), "exec form"
    assert services["migrate"]["image"] == services["edge"]["image"]
    assert services["edge"]["command"] == final.last("CMD").exec_form()


def test_edge_publishes_the_port_it_serves_on(services: dict[str, Any]) -> None:
    edge = services["edge"]
    port = edge["command"][edge["command"].index("--port") + 1]
    assert load().final.last("EXPOSE").args == port
    assert [str(p).rsplit(":", 1)[-1] for p in edge["ports"]] == [port]


def test_signing_key_is_a_file_secret(compose: dict[str, Any], services: dict[str, Any]) -> None:
    edge = services["edge"]
    assert edge["secrets"] == ["a2a_signing_key"]
    assert edge["environment"]["A2A_SIGNING_KEY_FILE"] == SECRET_TARGET
    assert compose["secrets"]["a2a_signing_key"] == {"file": "./secrets/a2a_signing_key.json"}
    for service in services.values():
        assert "A2A_SIGNING_KEY" not in service.get("environment", {}), "no inline key"


def test_both_app_services_use_the_postgres_service(services: dict[str, Any]) -> None:
    urls = {services[name]["environment"]["DATABASE_URL"] for name in ("migrate", "edge")}
    assert len(urls) == 1
    url = urls.pop()
    assert url.startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in url


def test_no_password_is_written_into_the_file(services: dict[str, Any]) -> None:
    # Interpolated from .env and required (`:?`): compose refuses to start without it.
    password = services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert password.startswith("${POSTGRES_PASSWORD:?")
    for name in ("migrate", "edge"):
        assert ":${POSTGRES_PASSWORD:?" in services[name]["environment"]["DATABASE_URL"]


def test_edge_has_its_public_settings(services: dict[str, Any]) -> None:
    env = services["edge"]["environment"]
    assert {"PUBLIC_URL", "GATEWAY_ORIGINS"} <= set(env)
    assert env["GATEWAY_ORIGINS"].startswith("${GATEWAY_ORIGINS:?"), "no default allow-list"


def test_app_containers_are_hardened(services: dict[str, Any]) -> None:
    # The same settings scripts/container-smoke runs the image with.
    for name in ("migrate", "edge"):
        service = services[name]
        assert service["read_only"] is True
        assert service["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in service["security_opt"]


def test_docs_show_the_same_commands() -> None:
    # The compose path is taught in docs/operations.md: every doc that teaches it
    # must show the commands this file and the Dockerfile run, and at least one must teach it.
    teaching = []
    for doc in ("README.md", "docs/operations.md", "deploy/README.md"):
        path: Path = ROOT / doc
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if "docker compose" in text:
            teaching.append(doc)
            for command in ("docker compose up", "looping-edge migrate", "looping-edge serve"):
                assert command in text, f"{doc} does not mention `{command}`"
    assert teaching, "no README documents `docker compose up`"
