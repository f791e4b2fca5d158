"""The ``scripted`` agent: deterministic behaviour driven by the message (tests, conformance,
demos). Grammar (also in docs/tenants-and-agents.md):

The script is the first text part of the task's first message (its inner text when the
gateway wrapped it in a turn envelope), one directive per line
(surrounding blanks ignored, empty lines skipped). Keywords are lower case.

    sleep <seconds>        wait (0 to 3600 s; a cancel interrupts it)
    progress <text>        publish progress: task WORKING with <text>, message id
                           <taskId>:line-<n>
    ask <question>         stop and ask: task INPUT_REQUIRED with <question>; the answer arrives
                           as a SendMessage carrying the taskId; the script goes on after this line
    auth <question>        the same, but the task goes to AUTH_REQUIRED
    reply <text>           end the turn: task COMPLETED with <text> (and the artifacts so far)
    message <text>         the same, answered as a Message (open tenants; elsewhere a reply)
    fail <text>            end the turn: task FAILED with <text>
    artifact text <text>   add a text artifact to the reply
    artifact data <json>   add a data artifact (any JSON value)
    artifact file <filename> <mediaType> <base64>
                           add an artifact whose file part carries those bytes and filename
    artifact url <url> <mediaType> [<filename>]
                           add an artifact whose file part points at <url> (the filename
                           defaults to the URL's last path segment)
    crash                  raise an error (every attempt): exercises retries, then the task FAILs
                           with the operator's failure text (EDGE_FAILURE_TEXT)
    crash <n>              raise on the first <n> attempts only, then carry on
    anything else          echoed: such lines (and malformed directives) are collected and sent
                           as the reply when the script ends without reply/fail/ask

When the script runs out, the reply is the echoed lines joined by newlines ("done" if there
are none) plus the artifacts. In the arguments of progress/ask/auth/reply/message/fail/artifact
text,
``{answer}`` is replaced by the latest answer to an ask, ``{attempt}`` by the attempt number
(1 on the first run) and ``{attachments}`` by the descriptions of the turn's attachments
(``[image: a.png, image/png, 1234 bytes]``, joined by spaces; issue 55). Step keys
(``line-<n>``, n = 1-based line number) are stable across retries, so a retried turn re-sends
the same progress message ids.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from app.agents.contract import (
    AgentFailure,
    AgentQuestion,
    AgentReply,
    AgentResult,
    JsonDict,
    TurnContext,
    TurnStopped,
    first_text,
)
from app.agents.envelope import parse_envelope
from app.attachments.descriptions import descriptions_of

MAX_SLEEP_SECONDS = 3600.0
ASK_KEYWORDS = ("ask", "auth")


class ScriptCrash(RuntimeError):
    """The ``crash`` directive (a deliberate agent error)."""


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line number in the script
    keyword: str
    argument: str
    raw: str


def parse_script(text: str) -> list[Line]:
    lines = []
    for number, raw_line in enumerate(text.splitlines(), start=1):
        raw = raw_line.strip()
        if not raw:
            continue
        keyword, _, argument = raw.partition(" ")
        lines.append(Line(number, keyword, argument.strip(), raw))
    return lines


def _user_messages(ctx: TurnContext) -> list[JsonDict]:
    """The task's user messages, oldest first, the incoming one included exactly once."""
    seen: set[str] = set()
    out: list[JsonDict] = []
    for message in [*ctx.history, ctx.message]:
        if message.get("role") in ("ROLE_AGENT", "agent"):
            continue
        key = str(message.get("messageId", ""))
        if key and key in seen:
            continue
        seen.add(key)
        out.append(message)
    return out


def _resume_point(lines: Sequence[Line], answered: int) -> int:
    """Index of the first line to run after ``answered`` asks were answered."""
    if answered <= 0:
        return 0
    asks = 0
    for index, line in enumerate(lines):
        if line.keyword in ASK_KEYWORDS and line.argument:
            asks += 1
            if asks == answered:
                return index + 1
    return len(lines)


class ScriptedAgent:
    @classmethod
    def from_config(cls, _config: Mapping[str, Any]) -> ScriptedAgent:
        return cls()

    async def run(self, ctx: TurnContext) -> AgentResult:
        if ctx.kind == "start":
            script, answered = ctx.turn.text, 0
        else:
            users = _user_messages(ctx)
            script, answered = parse_envelope(first_text(users[0])).text, len(users) - 1
        lines = parse_script(script)
        run = _Run(ctx)
        for line in lines[_resume_point(lines, answered) :]:
            if ctx.cancelled.is_set():
                raise TurnStopped
            result = await run.step(line)
            if result is not None:
                return result
        return AgentReply(text="\n".join(run.echoed) or "done", artifacts=tuple(run.artifacts))


class _Run:
    """The state of one scripted turn: echoed lines and artifacts so far."""

    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        self.echoed: list[str] = []
        self.artifacts: list[JsonDict] = []

    def fill(self, text: str) -> str:
        answer = self.ctx.resume_answer or ""
        attached = " ".join(descriptions_of(self.ctx.message))
        filled = text.replace("{answer}", answer).replace("{attempt}", str(self.ctx.attempt))
        return filled.replace("{attachments}", attached)

    async def step(self, line: Line) -> AgentResult | None:
        keyword, arg = line.keyword, line.argument
        if keyword == "sleep" and (seconds := _seconds(arg)) is not None:
            await asyncio.sleep(seconds)
        elif keyword == "progress" and arg:
            await self.ctx.progress(f"line-{line.number}", self.fill(arg))
        elif keyword in ASK_KEYWORDS and arg:
            return AgentQuestion(text=self.fill(arg), auth=keyword == "auth")
        elif keyword in ("reply", "message") and arg:
            return AgentReply(
                text=self.fill(arg),
                artifacts=tuple(self.artifacts),
                as_message=keyword == "message",
            )
        elif keyword == "fail" and arg:
            return AgentFailure(text=self.fill(arg))
        elif keyword == "artifact" and (artifact := self.artifact(line)) is not None:
            self.artifacts.append(artifact)
        elif keyword == "crash" and (limit := _crash_limit(arg)) is not None:
            if limit == 0 or self.ctx.attempt <= limit:
                raise ScriptCrash("scripted crash")
        else:
            self.echoed.append(line.raw)
        return None

    def artifact(self, line: Line) -> JsonDict | None:
        kind, _, body = line.argument.partition(" ")
        body = body.strip()
        part: JsonDict
        if kind == "text" and body:
            part = {"text": self.fill(body)}
        elif kind == "data" and body:
            try:
                part = {"data": json.loads(body)}
            except json.JSONDecodeError:
                return None
        elif kind in _FILE_PARTS and (file_part := _FILE_PARTS[kind](body.split())) is not None:
            part = file_part
        else:
            return None
        return {"artifactId": f"artifact-{line.number}", "parts": [part]}


def _file_part(words: list[str]) -> JsonDict | None:
    """``artifact file <filename> <mediaType> <base64>``: a part carrying the bytes (protobuf
    JSON ``raw`` is base64, so the text is checked and kept as written)."""
    if len(words) != 3:
        return None
    filename, media_type, data = words
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return {"raw": data, "filename": filename, "mediaType": media_type}


def _url_part(words: list[str]) -> JsonDict | None:
    """``artifact url <url> <mediaType> [<filename>]``: a part pointing at the URL; the
    filename defaults to the URL's last path segment."""
    if len(words) not in (2, 3):
        return None
    url, media_type = words[0], words[1]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    filename = words[2] if len(words) == 3 else unquote(parts.path.rsplit("/", 1)[-1])
    part: JsonDict = {"url": url, "mediaType": media_type}
    if filename:
        part["filename"] = filename
    return part


_FILE_PARTS = {"file": _file_part, "url": _url_part}


def _seconds(arg: str) -> float | None:
    try:
        value = float(arg)
    except ValueError:
        return None
    if not 0 <= value <= MAX_SLEEP_SECONDS:
        return None
    return value


def _crash_limit(arg: str) -> int | None:
    """0 = crash on every attempt; n = only on the first n attempts; None = not a crash line."""
    if not arg:
        return 0
    return int(arg) if arg.isdigit() and int(arg) > 0 else None
