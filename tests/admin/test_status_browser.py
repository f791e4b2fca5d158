"""The status page in a real headless browser (issue 53's Done-when): Debian's ``chromium``
driven through ``chromium-driver`` by Selenium signs in with an admin token, sees a tenant and
a dead letter made by the test, presses Replay and sees the letter re-queued. A screenshot is
kept under the test's temporary directory and copied to ``.artifacts/`` (git-ignored).

``scripts/test`` installs the browser when it is missing (``scripts/ensure-chromium``); the
test is skipped, saying why, only where it could not be installed."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from app.db.models import PushOutboxRow
from app.testing.edge import demo_manifest
from tests.admin.conftest import AdminRig
from tests.admin.test_ops_routes import _dead
from tests.polling import poll_until

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts"


def _browser() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed and scripts/test could "
            "not install them (scripts/ensure-chromium)"
        )
    return chromium, driver


@asynccontextmanager
async def _served(app: FastAPI) -> AsyncIterator[str]:
    """``app`` on a loopback port in this event loop; its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await poll_until(lambda: server.started, 10, interval=0.02, what="uvicorn started")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


def _drive(base: str, token: str, letter: int, shot: Path, binaries: tuple[str, str]) -> str:
    """Sign in, check the page, press Replay; the page's text after the replay. Selenium is
    blocking: this runs in a thread while the server serves in the test's loop."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = binaries[0]
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1200,1400")
    driver: Any = webdriver.Chrome(options=options, service=Service(binaries[1]))
    try:
        wait = WebDriverWait(driver, 20)
        driver.get(f"{base}/status")
        wait.until(ec.presence_of_element_located((By.NAME, "token")))
        assert driver.current_url.endswith("/status/login")
        driver.find_element(By.NAME, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
        wait.until(ec.presence_of_element_located((By.ID, f"dead-{letter}")))
        page = driver.find_element(By.TAG_NAME, "body").text
        assert "browser-demo" in page and token not in driver.page_source
        cookies = {c["name"]: c for c in driver.get_cookies()}
        session = cookies["edge_status_session"]
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        driver.find_element(By.ID, f"replay-{letter}").click()
        wait.until(ec.presence_of_element_located((By.ID, "notice")))
        shot.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(shot))
        text: str = driver.find_element(By.TAG_NAME, "body").text
        assert not driver.find_elements(By.ID, f"dead-{letter}")
        return text
    finally:
        driver.quit()


async def test_the_status_page_signs_in_shows_and_replays_in_chromium(
    admin: AdminRig, tmp_path: Path
) -> None:
    binaries = _browser()
    created = await admin.client.post(
        "/v1/tenants",
        json={"id": "browser-demo", "agent": "echo", "manifest": demo_manifest()},
        headers=await admin.headers("tenants:write"),
    )
    assert created.status_code == 201, created.text
    db = admin.edge.services.db
    await _dead(db, "browser-demo", "task-dead-1", "k1")
    async with db.transaction() as s:
        from sqlalchemy import select

        letter = (await s.execute(select(PushOutboxRow.id))).scalar_one()
    token = await admin.token("tenants:read", "push:read", "push:write")
    shot = tmp_path / "status-page.png"
    async with _served(admin.app) as base:
        text = await asyncio.to_thread(_drive, base, token, letter, shot, binaries)
    assert f"Dead letter {letter} re-queued." in text
    async with db.transaction() as s:
        row = await s.get(PushOutboxRow, letter)
        assert row is not None and row.status == "pending"
    assert shot.stat().st_size > 0
    backend = "postgres" if db.storage.shares_across_processes else "sqlite"
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / f"status-page-{backend}.png")
