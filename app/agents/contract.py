"""The agent contract (ARCHITECTURE, Agents): what the runtime hands an agent for one turn and
what the agent hands back.

An agent is any object with ``async def run(ctx: TurnContext) -> AgentResult``. It reports
progress with ``await ctx.progress(step_key, text)`` (``step_key`` must be deterministic for
the step, so a retried turn re-sends the same ``<taskId>:<step key>`` message id, CONTRACT §7),
watches ``ctx.cancelled`` (set when the task is canceled or the turn must stop), and returns:

- ``AgentReply(text, parts, artifacts)`` → task ``COMPLETED``; with ``as_message=True`` the
  reply is a Message result for an ``open`` tenant (a blocking SendMessage answers with that
  Message; the task still completes with it as its status message). Other tenants ignore the
  flag: the gateway always gets a Task (CONTRACT §5). ``rejected=True`` ends the task
  ``REJECTED`` instead (a negotiator's terminal refusal, ``docs/negotiation.md``),
- ``AgentFailure(text)`` → task ``FAILED`` with that text (an answer the agent chose to give),
- ``AgentQuestion(text, auth=False, parts=())`` → task ``INPUT_REQUIRED`` (``AUTH_REQUIRED``
  with ``auth=True``; ``parts`` follow the text in the status message, e.g. the gateway's HITL
  request part); the answer arrives as a resume turn with ``ctx.resume_answer`` set.

The gateway's turn envelope (``app.agents.envelope``) is parsed once: ``ctx.envelope.text`` is
the inner text and its attributes are fields beside it.

Raising (or running past the turn timeout) is a *crash*: the runtime retries the turn with
backoff and, after the last attempt, fails the task with the operator's text, never the
exception's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.agents.envelope import TurnEnvelope, turn_envelope
from app.attachments.descriptions import is_description
from app.attachments.stored import Attachment
from app.security.caller import PeerSender

JsonDict = dict[str, Any]


class TurnStopped(Exception):
    """Raised inside an agent (by ``ctx.progress``) when the turn must stop: the task was
    canceled or this worker lost the identity's lease. Agents should let it propagate."""


@dataclass(frozen=True)
class AgentReply:
    text: str | None = None
    parts: tuple[JsonDict, ...] = ()  # protobuf-JSON ``Part`` dicts, after the text
    artifacts: tuple[JsonDict, ...] = ()  # protobuf-JSON ``Artifact`` dicts
    as_message: bool = False  # answer with a Message, not a Task (open tenants only)
    rejected: bool = False  # the task ends REJECTED, not COMPLETED


@dataclass(frozen=True)
class AgentFailure:
    text: str


@dataclass(frozen=True)
class AgentQuestion:
    text: str
    auth: bool = False
    parts: tuple[JsonDict, ...] = ()  # protobuf-JSON ``Part`` dicts, after the text


AgentResult = AgentReply | AgentFailure | AgentQuestion

ProgressFn = Callable[[str, str], Awaitable[None]]


@dataclass(frozen=True)
class TurnContext:
    """Everything an agent may know about one turn. Read-only; the runtime owns the writes."""

    tenant: str
    identity_key: str
    identity: Mapping[str, Any]  # the gateway's identity claims, as verified at accept
    task_id: str
    context_id: str
    kind: str  # "start" | "resume"
    message: JsonDict  # the incoming protobuf-JSON ``Message``
    history: Sequence[JsonDict]  # the task's messages so far (protobuf-JSON), oldest first
    resume_answer: str | None  # the text of the answer when this turn resumes a question
    attempt: int  # 1 on the first run; retries after a crash count up
    cancelled: asyncio.Event
    progress_fn: ProgressFn
    clock: Callable[[], float]  # wall-clock seconds (``time.time``), injectable in tests
    agent_config: Mapping[str, Any] = field(default_factory=dict)
    sessions: Any = None  # per-identity session store (app.agents.llm.session.SessionStore)
    envelope: TurnEnvelope | None = None  # the incoming message's parsed turn envelope
    # The task's messages as stored now (protobuf-JSON, oldest first): steering messages that
    # joined the task while this turn runs are among them (None: not offered by the runtime).
    read_history: Callable[[], Awaitable[Sequence[JsonDict]]] | None = None
    # A peer agent's turn (CONTRACT §10): who sent it, from its verified token (issue 54);
    # None for a gateway's caller.
    peer: PeerSender | None = None
    # The attachments a message of this task carried, by its messageId (issue 55): the bytes
    # and a document's text, kept with the accepted turn; the message itself holds only
    # their descriptions (None: not offered by the runtime).
    read_attachments: Callable[[str], Awaitable[Sequence[Attachment]]] | None = None

    @property
    def turn(self) -> TurnEnvelope:
        """The incoming turn's envelope (parsed from the message when the runtime gave none)."""
        return self.envelope or turn_envelope(first_text(self.message), self.peer)

    async def progress(self, step_key: str, text: str) -> None:
        """Publish a progress message (``WORKING`` + text, pushed as ``<taskId>:<step_key>``).

        Raises ``TurnStopped`` when the write is refused (task canceled or lease lost)."""
        await self.progress_fn(step_key, text)


class Agent(Protocol):
    async def run(self, ctx: TurnContext) -> AgentResult: ...


def text_of(message: Mapping[str, Any]) -> str:
    """The text parts of a protobuf-JSON ``Message``, joined by newlines."""
    parts = message.get("parts") or []
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def first_text(message: Mapping[str, Any]) -> str:
    """The first text part of a protobuf-JSON ``Message`` ("" when there is none); an
    attachment's description (``app.attachments.descriptions``) is not the message's text."""
    for part in message.get("parts") or []:
        if (
            isinstance(part, dict)
            and isinstance(part.get("text"), str)
            and not is_description(part)
        ):
            return str(part["text"])
    return ""
