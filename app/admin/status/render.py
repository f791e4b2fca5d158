"""The status page and its sign-in form as HTML: one document each, inline CSS, no script and
no external asset, every value escaped. The page reloads itself (``<meta http-equiv=refresh>``)."""

from __future__ import annotations

from datetime import datetime
from html import escape

from app.admin.status.chart import activity_svg
from app.admin.status.data import StatusData
from app.admin.tokens import PUSH_READ, PUSH_WRITE

REFRESH_SECONDS = 15

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:3px 8px;
text-align:left}th{background:#f0f0f0}.num{text-align:right}.muted{color:#777}
.note{background:#e8f4e8;border:1px solid #9c9;padding:4px 8px;display:inline-block}
.error{background:#fbe9e9;border:1px solid #d99;padding:4px 8px;display:inline-block}
.chart .bg{fill:#fff;stroke:#ddd}.chart polyline{fill:none;stroke-width:2}
.chart .accepted{stroke:#2a6fdb}.chart .finished{stroke:#2a9d4b}.chart text{font-size:11px}
.key-a{color:#2a6fdb}.key-f{color:#2a9d4b}form.inline{display:inline;margin:0}
header form{float:right}
"""


def _document(title: str, body: str, *, refresh: bool = False) -> str:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS};url=/status">' if refresh else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>{meta}<style>{_CSS}</style></head>"
        f"<body>{body}</body></html>"
    )


def login_page(message: str | None = None) -> str:
    shown = f'<p class="error">{escape(message)}</p>' if message else ""
    body = (
        "<h1>looping-edge status</h1>"
        "<p>Sign in with an admin token that has the scope <code>tenants:read</code>.</p>"
        f"{shown}"
        '<form method="post" action="/status/login">'
        '<label>Admin token <input type="password" name="token" autocomplete="off" '
        'required size="50"></label> <button type="submit">Sign in</button></form>'
    )
    return _document("looping-edge status: sign in", body)


def _csrf_field(csrf: str | None) -> str:
    return "" if csrf is None else f'<input type="hidden" name="csrf" value="{escape(csrf)}">'


def _age(now: datetime, then: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def _table(headers: list[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _tenants(data: StatusData) -> str:
    rows = [
        f"<tr><td>{escape(t.id)}</td><td>{'enabled' if t.enabled else 'disabled'}</td>"
        f"<td>{escape(t.agent_kind)}</td><td>{escape(t.profile)}</td></tr>"
        for t in data.tenants
    ]
    return "<h2>Tenants</h2>" + _table(["tenant", "state", "agent", "profile"], rows, "No tenants.")


def _turns(data: StatusData, now: datetime) -> str:
    rows = [
        f"<tr><td>{escape(t.tenant)}</td><td>{escape(t.status)}</td>"
        f'<td class="num">{t.count}</td><td class="num">{_age(now, t.oldest_at)}</td></tr>'
        for t in data.turns
    ]
    return "<h2>Unfinished turns</h2>" + _table(
        ["tenant", "state", "turns", "oldest"], rows, "No unfinished turns."
    )


def _workers(data: StatusData, now: datetime) -> str:
    rows = [
        f"<tr><td>{escape(w.owner)}</td><td class='num'>{w.actor_leases}</td>"
        f"<td class='num'>{w.push_leases}</td><td class='num'>"
        f"{_age(w.lease_until, now) if w.lease_until > now else '0 s'}</td></tr>"
        for w in data.workers
    ]
    note = (
        '<p class="muted">From the leases in the database: slots in use are identities a '
        "process drains now (actor leases), pushes in flight are push-outbox leases. A process "
        "holding no lease is not listed.</p>"
    )
    return (
        "<h2>Worker processes</h2>"
        + note
        + _table(
            ["process (lease owner)", "slots in use", "pushes in flight", "lease ends in"],
            rows,
            "No process holds a lease.",
        )
    )


def _push(data: StatusData, caller_scopes: tuple[str, ...], csrf: str | None) -> str:
    push = data.health["push"]
    head = (
        "<h2>Push delivery</h2>"
        f'<p>Outbox depth <b id="outbox-depth">{int(push["outboxDepth"])}</b>, oldest pending '
        f"{float(push['oldestPendingSeconds']):.0f} s.</p>"
    )
    if data.dead_letters is None or PUSH_READ not in caller_scopes:
        return head + f'<p class="muted">Dead letters need the scope {PUSH_READ}.</p>'
    may_replay = PUSH_WRITE in caller_scopes
    rows = []
    for d in data.dead_letters:
        action = (
            f'<form class="inline" method="post" action="/status/dead-letters/{d.id}/replay">'
            f'{_csrf_field(csrf)}<button type="submit" id="replay-{d.id}">Replay</button></form>'
            if may_replay
            else '<span class="muted">needs push:write</span>'
        )
        rows.append(
            f'<tr id="dead-{d.id}"><td>{d.id}</td><td>{escape(d.tenant)}</td>'
            f"<td>{escape(d.task_id)}</td><td>{escape(d.kind)}</td>"
            f'<td class="num">{d.attempts}</td><td>{escape(str(d.last_status or ""))}</td>'
            f"<td>{escape(d.last_error or '')}</td><td>{action}</td></tr>"
        )
    return head + _table(
        ["id", "tenant", "task", "kind", "attempts", "last status", "last error", ""],
        rows,
        "No dead letters.",
    )


def _chart(data: StatusData) -> str:
    minutes = len(data.activity.accepted)
    return (
        f"<h2>Last {minutes} minutes</h2>"
        f'<p><span class="key-a">&#9632; accepted</span> {sum(data.activity.accepted)} '
        f'<span class="key-f">&#9632; finished</span> {sum(data.activity.finished)} '
        '<span class="muted">(tasks per minute; finished: reached a terminal state)</span></p>'
        + activity_svg(data.activity)
    )


def status_page(
    data: StatusData,
    *,
    viewer: str,
    scopes: tuple[str, ...],
    csrf: str | None,
    notice: str | None = None,
) -> str:
    now = data.activity.until
    sign_out = (
        ""
        if csrf is None
        else f'<form method="post" action="/status/logout">{_csrf_field(csrf)}'
        '<button type="submit">Sign out</button></form>'
    )
    body = (
        f"<header>{sign_out}<h1>looping-edge status</h1>"
        f'<p class="muted">As of {escape(now.strftime("%Y-%m-%d %H:%M:%S"))} UTC, signed in as '
        f"{escape(viewer)}; reloads every {REFRESH_SECONDS} s.</p></header>"
        + (f'<p class="note" id="notice">{escape(notice)}</p>' if notice else "")
        + _tenants(data)
        + _turns(data, now)
        + _push(data, scopes, csrf)
        + _workers(data, now)
        + _chart(data)
    )
    return _document("looping-edge status", body, refresh=True)
