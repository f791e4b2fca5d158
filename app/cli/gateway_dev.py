"""``looping-edge gateway-dev``: a real local gateway for development and demos.

    looping-edge gateway-dev send --edge http://127.0.0.1:8080 --tenant demo "hello"
    looping-edge gateway-dev serve --edge http://127.0.0.1:8080

It never bypasses verification: it serves its own JWKS on a loopback port (the edge must list
``http://127.0.0.1:<port>`` in ``GATEWAY_ORIGINS`` with ``EDGE_ALLOW_LOOPBACK_HTTP=true``),
registers like the Looping gateway (verified cards, pinned ``jku`` + ``kid``), sends turns with
its own EdDSA tokens and verifies every push callback against the pin and its ``aud``.

Exit codes of ``send``: 0 completed (or waiting for input: answer with ``--task-id``),
1 failed/rejected/canceled, 3 no final push before ``--timeout``, 4 registration or
verification failure (the message says which check, or a state file it will not overwrite),
2 usage, 130 interrupted (Ctrl-C; the turn goes on at the edge).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
from pathlib import Path
from typing import Any

from app.cli.common import edge_command, fail, run
from app.gatewaydev.registration import Registration, RegistrationError, http_client
from app.gatewaydev.registration import register as register_with_edge
from app.gatewaydev.session import INTERRUPTED, PushEvent, Turn, follow, send_turn
from app.gatewaydev.state import GatewayState
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import CallbackExpectation, PushReceiver, push_receiver
from app.testing.verify import VerificationError

EXIT_FAILED = 1
EXIT_TIMEOUT = 3
EXIT_VERIFY = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gw = sub.add_parser("gateway-dev", help="a local development gateway (verifies everything)")
    gsub = gw.add_subparsers(dest="gateway_cmd", required=True)

    send = gsub.add_parser("send", help="register, send one turn, print the pushed result")
    _common(send)
    send.add_argument("--tenant", required=True, help="tenant (agent) to address")
    send.add_argument("--identity", default="dev-user", help="caller identity key")
    send.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for pushes")
    send.add_argument("--task-id", help="continue this task (answer an input-required turn)")
    send.add_argument("--context-id", help="context id of the conversation")
    send.add_argument("text", help="the message text")
    send.set_defaults(func=cmd_send)

    serve = gsub.add_parser("serve", help="serve the JWKS and a push receiver, print pushes")
    _common(serve)
    serve.add_argument("--tenant", help="also verify this tenant's card at registration")
    serve.set_defaults(func=cmd_serve)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--edge", required=True, help="the edge's base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    p.add_argument("--port", type=int, default=8090, help="port of our JWKS and push receiver")
    p.add_argument(
        "--state-dir", type=Path, default=Path(".dev/gateway"), help="gateway key and pins"
    )


def _say(line: str) -> None:
    print(line, flush=True)


def _describe(reg: Registration) -> None:
    how = "pinned on first use" if reg.newly_pinned else "matches the pin"
    _say(f"edge {reg.edge_origin}: card signature verified (kid {reg.pin.kid}, {how})")
    if reg.tenant_card is not None:
        name = reg.tenant_card.get("name", "?")
        tenant = reg.tenant_card["supportedInterfaces"][0]["tenant"]
        _say(f"tenant '{tenant}': extended card verified ({name})")


# How much of a data part's JSON a line shows: enough to recognise it, never a screenful
DATA_SHOWN = 200


def _part_text(part: object) -> str:
    """A text part's text; a data part as compact JSON, cut to ``DATA_SHOWN`` characters (found
    by trying the quickstart: a data artifact printed as an empty line); a file part by name."""
    if not isinstance(part, dict):
        return ""
    if isinstance(part.get("text"), str):
        return str(part["text"])
    if "data" in part:
        shown = json.dumps(part["data"], separators=(",", ":"), ensure_ascii=False)
        return shown if len(shown) <= DATA_SHOWN else shown[: DATA_SHOWN - 1] + "…"
    if "raw" in part or "url" in part:
        return f"<file {part.get('filename') or part.get('url') or '(unnamed)'}>"
    return ""


def _parts_text(parts: object) -> str:
    pieces = [_part_text(p) for p in parts] if isinstance(parts, list) else []
    return " ".join(piece for piece in pieces if piece)


def _message_text(task: dict[str, Any]) -> str:
    return _parts_text(task.get("status", {}).get("message", {}).get("parts", []))


def _artifact_lines(task: dict[str, Any]) -> list[str]:
    lines = []
    for artifact in task.get("artifacts") or []:
        label = artifact.get("name") or artifact.get("artifactId", "artifact")
        lines.append(f"  [artifact {label}] {_parts_text(artifact.get('parts', []))}")
    return lines


def _show(event: PushEvent) -> None:
    push = event.push
    if event.kind == "refused":
        _say(f"  ! push refused by this gateway: {push.error}")
        return
    state = (push.state or "?").removeprefix("TASK_STATE_").lower().replace("_", "-")
    _say(f"  [{state}] {_message_text(push.task)}")
    if event.kind == "final":
        for line in _artifact_lines(push.task):
            _say(line)


def _known_endpoints(receiver: PushReceiver, state: GatewayState, *, strict: bool) -> None:
    # Pushes to urls we handed out must carry their token; ``send`` accepts nothing else (like
    # the Looping gateway), ``serve`` also shows pushes to other paths (callback JWT verified).
    receiver.strict_paths = strict
    receiver.tokens.update(state.endpoints())


def _listen_error(args: argparse.Namespace, exc: OSError) -> int:
    return fail(f"cannot listen on {args.host}:{args.port} ({exc.strerror or 'in use?'})")


def _hint(reg_error: RegistrationError, origin: str) -> str:
    text = str(reg_error)
    if "HTTP 401" in text and "signature" in text:
        text += (
            " — the edge holds another key for this gateway origin (a new --state-dir on the "
            "same port?); it refetches keys for an unknown kid at most every "
            "EDGE_JWKS_COOLDOWN_SECONDS, and for a known one when its cache "
            "(EDGE_JWKS_CACHE_SECONDS) expires: use the earlier --state-dir or restart the edge"
        )
    elif "HTTP 401" in text:
        text += (
            f" — does the edge trust this gateway? It needs GATEWAY_ORIGINS={origin} and "
            "EDGE_ALLOW_LOOPBACK_HTTP=true"
        )
    return text


async def _open_gateway(
    stack: contextlib.AsyncExitStack, args: argparse.Namespace, *, strict: bool
) -> tuple[GatewayState, GatewayKit, PushReceiver]:
    """Our key (from the state dir) and our receiver on the loopback port (JWKS + pushes)."""
    state = GatewayState(args.state_dir)
    me = state.identity()
    kit = GatewayKit(kid=me.kid, key=me.key)
    receiver = await stack.enter_async_context(
        push_receiver(kit=kit, host=args.host, port=args.port)
    )
    _known_endpoints(receiver, state, strict=strict)
    return state, kit, receiver


async def _send(args: argparse.Namespace) -> int:
    identity = {"key": args.identity, "name": args.identity, "kind": "user"}
    async with contextlib.AsyncExitStack() as stack:
        try:
            state, kit, receiver = await _open_gateway(stack, args, strict=True)
        except OSError as exc:
            return _listen_error(args, exc)
        except VerificationError as exc:  # a state file we will not overwrite
            return fail(str(exc), EXIT_VERIFY)
        client = await stack.enter_async_context(http_client())
        try:
            reg = await register_with_edge(
                client,
                edge_url=args.edge,
                state=state,
                kit=kit,
                tenant=args.tenant,
                identity=identity,
            )
            _describe(reg)
            receiver.expect = CallbackExpectation(key=reg.key, pin=reg.pin)
            turn = Turn(args.text, args.tenant, identity, args.task_id, args.context_id)
            task = await send_turn(client, kit, reg, receiver, turn, state)
        except RegistrationError as exc:
            return fail(_hint(exc, kit.origin), EXIT_VERIFY)
        _say(f"task {task['id']} accepted (context {task.get('contextId', '-')})")
        return await _follow(receiver, task["id"], args)


def _answer_command(args: argparse.Namespace, task_id: str) -> str:
    """The command that answers ``task_id``: every option this run differed from the default
    in, since the answer needs the same gateway key (state dir), caller and listener."""
    words = [edge_command(), "gateway-dev", "send", "--edge", args.edge]
    defaults = {"host": "127.0.0.1", "port": 8090, "state_dir": Path(".dev/gateway")}
    for name, default in defaults.items():
        if getattr(args, name) != default:
            words += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if args.identity != "dev-user":
        words += ["--identity", args.identity]
    words += ["--tenant", args.tenant, "--task-id", task_id, "<answer>"]
    return shlex.join(words)


async def _follow(receiver: PushReceiver, task_id: str, args: argparse.Namespace) -> int:
    within = args.timeout
    try:
        async for event in follow(receiver, task_id, within=within):
            _show(event)
            if event.kind == "final":
                state = event.push.state
                if state == "TASK_STATE_COMPLETED":
                    return 0
                if state in INTERRUPTED:
                    _say(f"  answer with: {_answer_command(args, task_id)}")
                    return 0
                return EXIT_FAILED
    except TimeoutError:
        pass
    return fail(f"no final push for task {task_id} within {within:g}s", EXIT_TIMEOUT)


async def _serve(args: argparse.Namespace) -> int:
    async with contextlib.AsyncExitStack() as stack:
        try:
            state, kit, receiver = await _open_gateway(stack, args, strict=False)
        except OSError as exc:
            return _listen_error(args, exc)
        except VerificationError as exc:  # a state file we will not overwrite
            return fail(str(exc), EXIT_VERIFY)
        async with http_client() as client:
            try:
                reg = await register_with_edge(
                    client, edge_url=args.edge, state=state, kit=kit, tenant=args.tenant
                )
            except RegistrationError as exc:
                return fail(_hint(exc, kit.origin), EXIT_VERIFY)
        _describe(reg)
        receiver.expect = CallbackExpectation(key=reg.key, pin=reg.pin)
        _say(f"gateway JWKS: {kit.jwks_url}")
        _say(f"push receiver: {receiver.base_url}/push/<name> (Ctrl-C to stop)")
        await _print_pushes(receiver)
    return 0


async def _print_pushes(receiver: PushReceiver) -> None:
    index = 0
    while True:
        push = await receiver.next_request(index, within=365 * 86400)
        index += 1
        verdict = "ok" if push.error is None else f"REFUSED: {push.error}"
        _say(f"{push.path} {push.message_id or '-'} [{push.state or '?'}] {verdict}")
        if push.error is None and push.delivered:
            _say(f"  {_message_text(push.task)}")


def cmd_send(args: argparse.Namespace) -> int:
    if not 0 < args.timeout <= 86400:
        return fail("--timeout must be between 0 and 86400 seconds")
    if not 0 <= args.port <= 65535:
        return fail("--port must be between 0 and 65535")
    try:
        return run(lambda: _send(args))
    except KeyboardInterrupt:
        return fail("interrupted; the turn goes on at the edge", EXIT_INTERRUPTED)


def cmd_serve(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        return fail("--port must be between 0 and 65535")
    with contextlib.suppress(KeyboardInterrupt):
        return run(lambda: _serve(args))
    return 0
