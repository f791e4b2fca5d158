"""The status page on the admin listener, on both backends (issue 53): sign-in with an admin
token sets a signed session cookie, a bearer header works too, forms need the session's CSRF
token, replay needs push:write, and no page or error echoes a token."""

from __future__ import annotations

import re

import httpx

from app.admin.status.session import COOKIE, LIFETIME_SECONDS, SessionSigner
from app.db.models import PushOutboxRow
from app.testing.edge import demo_manifest
from tests.admin.conftest import AdminRig
from tests.admin.test_ops_routes import _dead

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page carries no CSRF token"
    return found.group(1)


async def _sign_in(admin: AdminRig, *scopes: str) -> str:
    token = await admin.token(*scopes)
    response = await admin.client.post("/status/login", data={"token": token})
    assert response.status_code == 303 and response.headers["location"] == "/status"
    return token


async def test_without_a_session_the_page_offers_the_sign_in_form(admin: AdminRig) -> None:
    response = await admin.client.get("/status")
    assert response.status_code == 303 and response.headers["location"] == "/status/login"
    form = await admin.client.get("/status/login")
    assert form.status_code == 200 and 'action="/status/login"' in form.text
    assert "default-src 'none'" in form.headers["content-security-policy"]
    assert (
        await admin.client.get("/status", headers={"Authorization": "Bearer x"})
    ).status_code == 401


async def test_sign_in_sets_a_signed_http_only_strict_cookie(admin: AdminRig) -> None:
    await admin.edge.add_tenant("demo", manifest=demo_manifest(), require_push_config=False)
    token = await admin.token("tenants:read")
    response = await admin.client.post("/status/login", data={"token": token})
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and token not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
    assert f"Max-Age={LIFETIME_SECONDS}" in cookie and "Path=/status" in cookie
    page = await admin.client.get("/status")
    assert page.status_code == 200 and token not in page.text
    assert "<td>demo</td><td>enabled</td><td>echo</td><td>gateway</td>" in page.text
    assert '<meta http-equiv="refresh"' in page.text and "<svg" in page.text
    assert "Dead letters need the scope push:read" in page.text
    assert page.headers["cache-control"] == "no-store"


async def test_over_https_the_cookie_is_secure(admin: AdminRig) -> None:
    token = await admin.token("tenants:read")
    transport = httpx.ASGITransport(app=admin.app)
    async with httpx.AsyncClient(transport=transport, base_url="https://admin.test") as client:
        response = await client.post("/status/login", data={"token": token})
    assert "Secure" in response.headers["set-cookie"]


async def test_a_bad_token_or_a_missing_scope_is_refused_without_echo(admin: AdminRig) -> None:
    wrong = "leadm_" + "x" * 43
    bad = await admin.client.post("/status/login", data={"token": wrong})
    assert bad.status_code == 401 and wrong not in bad.text and "set-cookie" not in bad.headers
    push_only = await admin.token("push:read")
    refused = await admin.client.post("/status/login", data={"token": push_only})
    assert refused.status_code == 403 and push_only not in refused.text
    by_header = await admin.client.get("/status", headers={"Authorization": f"Bearer {push_only}"})
    assert by_header.status_code == 403 and push_only not in by_header.text


async def test_a_bearer_header_reads_the_page_and_replays_without_csrf(admin: AdminRig) -> None:
    db = admin.edge.services.db
    await _dead(db, "a", "t1", "k1")
    h = await admin.headers("tenants:read", "push:read", "push:write")
    page = await admin.client.get("/status", headers=h)
    assert page.status_code == 200 and "<td>t1</td>" in page.text
    assert 'name="csrf"' not in page.text  # no session, no CSRF token
    letter = int(re.search(r'id="replay-(\d+)"', page.text).group(1))  # type: ignore[union-attr]
    replayed = await admin.client.post(f"/status/dead-letters/{letter}/replay", headers=h)
    assert replayed.status_code == 303
    assert replayed.headers["location"] == f"/status?replayed={letter}"
    again = await admin.client.post(f"/status/dead-letters/{letter}/replay", headers=h)
    assert again.status_code == 404


async def test_replay_from_the_page_needs_the_csrf_token_and_push_write(
    admin: AdminRig,
) -> None:
    db = admin.edge.services.db
    await _dead(db, "a", "t1", "k1")
    await _sign_in(admin, "tenants:read", "push:read", "push:write")
    page = (await admin.client.get("/status")).text
    letter = int(re.search(r'id="replay-(\d+)"', page).group(1))  # type: ignore[union-attr]
    url = f"/status/dead-letters/{letter}/replay"
    assert (await admin.client.post(url, data={})).status_code == 403
    assert (await admin.client.post(url, data={"csrf": "forged"})).status_code == 403
    other = SessionSigner()  # a token of another key
    stray = other.csrf(other.issue("0" * 64)[1])
    assert (await admin.client.post(url, data={"csrf": stray})).status_code == 403
    done = await admin.client.post(url, data={"csrf": _csrf(page)})
    assert done.status_code == 303
    async with db.transaction() as s:
        row = await s.get(PushOutboxRow, letter)
        assert row is not None and row.status == "pending"
    shown = await admin.client.get(done.headers["location"])
    assert (
        f"Dead letter {letter} re-queued." in shown.text and f'id="dead-{letter}"' not in shown.text
    )


async def test_without_push_write_there_is_no_replay(admin: AdminRig) -> None:
    db = admin.edge.services.db
    await _dead(db, "a", "t1", "k1")
    await _sign_in(admin, "tenants:read", "push:read")
    page = (await admin.client.get("/status")).text
    assert "needs push:write" in page and "replay-" not in page
    letter = int(re.search(r'id="dead-(\d+)"', page).group(1))  # type: ignore[union-attr]
    refused = await admin.client.post(
        f"/status/dead-letters/{letter}/replay", data={"csrf": _csrf(page)}
    )
    assert refused.status_code == 403


async def test_revoking_the_token_or_signing_out_ends_the_session(admin: AdminRig) -> None:
    await _sign_in(admin, "tenants:read")
    page = (await admin.client.get("/status")).text
    assert (await admin.client.post("/status/logout", data={})).status_code == 403
    out = await admin.client.post("/status/logout", data={"csrf": _csrf(page)})
    assert out.status_code == 303 and out.headers["location"] == "/status/login"
    assert (await admin.client.get("/status")).status_code == 303
    await _sign_in(admin, "tenants:read")
    assert (await admin.client.get("/status")).status_code == 200
    name = (await admin.tokens.list())[-1].name
    await admin.tokens.revoke(name)
    assert (await admin.client.get("/status")).headers.get("location") == "/status/login"


async def test_a_forged_or_expired_cookie_is_no_session() -> None:
    signer = SessionSigner()
    cookie, session = signer.issue("a" * 64, now=1000.0)
    assert signer.open(cookie, now=1001.0) == session
    assert signer.open(cookie, now=1000.0 + LIFETIME_SECONDS) is None
    payload, _, mac = cookie.rpartition(".")
    assert signer.open(payload.replace("a" * 64, "b" * 64) + "." + mac, now=1001.0) is None
    assert SessionSigner().open(cookie, now=1001.0) is None
    assert signer.open("garbage", now=1001.0) is None
    assert signer.csrf_ok(session, signer.csrf(session))
    assert not signer.csrf_ok(session, None)


async def test_the_page_shows_turns_workers_and_the_chart_escaped(admin: AdminRig) -> None:
    from datetime import UTC, datetime, timedelta

    from app.db.models import ActorRow

    db = admin.edge.services.db
    await admin.edge.add_tenant("demo", manifest=demo_manifest(), require_push_config=False)
    await admin.edge.result(
        "SendMessage",
        {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": True},
        },
    )
    async with db.transaction() as s:
        s.add(
            ActorRow(
                tenant="demo",
                identity="someone",
                lease_owner="host:1:<b>x</b>",
                lease_until=datetime.now(UTC) + timedelta(minutes=1),
                fence=1,
            )
        )
    await _dead(db, "demo", "t-<script>", "k1")
    page = (await admin.client.get("/status", headers=await admin.headers())).text
    assert '<tr><td>demo</td><td>queued</td><td class="num">1</td>' in page
    assert "host:1:&lt;b&gt;x&lt;/b&gt;</td><td class='num'>1</td>" in page
    assert "t-&lt;script&gt;" in page and "<script" not in page
    assert "accepted</span> 1 " in page and "<polyline" in page
