"""Steering: plain user messages that join a task while its turn runs (accepted with the
task's ``taskId`` while it was working). They join the session before the next model call,
in arrival order, as ``task:<taskId>:user:<messageId>``.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelRequest

from app.agents.contract import TurnContext, first_text
from app.agents.envelope import turn_envelope
from app.agents.llm.attachments import UserTurn, user_part
from app.agents.llm.config import LlmConfig
from app.agents.llm.turn_session import TurnSession

__all__ = ["Steering"]


class Steering:
    def __init__(self, config: LlmConfig, ctx: TurnContext, session: TurnSession) -> None:
        self.config = config
        self.ctx = ctx
        self.session = session
        self.looked = False  # whether the loop has looked for steering yet

    async def found(self, *, fresh: bool = True) -> list[dict[str, Any]]:
        """Plain user messages that joined the task while it runs and are not in the session
        yet. Not ``fresh``: the run's first look may take the history the turn started on,
        read moments before; a message accepted since is found by a later look or, at the
        latest, by the completion's guard (``app.worker.runner``: it is refused while the
        history holds a message the loop has not read, and the loop runs again)."""
        if self.ctx.read_history is None:
            return []
        first_look = not self.looked and not fresh
        self.looked = True
        found = []
        history = self.ctx.history if first_look else await self.ctx.read_history()
        for message in history:
            message_id = message.get("messageId")
            if message.get("role") not in ("ROLE_USER", "user") or not isinstance(message_id, str):
                continue
            if message_id != self.ctx.message.get("messageId") and not self.session.applied(
                message_id
            ):
                found.append(message)
        return found

    async def waits(self) -> bool:
        """Whether steering arrived after the turn's answer (the turn goes on with it)."""
        return bool(await self.found())

    async def take(self) -> None:
        """Steering joins the session before the next model call, in arrival order."""
        for message in await self.found(fresh=False):
            turn = await self.user_turn(message)
            await self.session.save(
                f"user:{message['messageId']}",
                ModelRequest(parts=[turn.kept]),
                live=None if turn.live is turn.kept else ModelRequest(parts=[turn.live]),
            )

    async def user_turn(self, message: dict[str, Any]) -> UserTurn:
        # The task's steering comes from its own caller: a peer's, like its first turn.
        envelope = turn_envelope(first_text(message), self.ctx.peer)
        read = self.ctx.read_attachments
        return await user_part(envelope.for_model(), message, read, self.config)

    def taken(self) -> list[dict[str, Any]]:
        """The plain user messages that joined this turn before this run (after the turn's
        message in the history it started on) and are in the session already."""
        ids = [m.get("messageId") for m in self.ctx.history]
        own = self.ctx.message.get("messageId")
        if own not in ids:
            return []
        later = self.ctx.history[len(ids) - ids[::-1].index(own) :]
        return [
            m
            for m in later
            if m.get("role") in ("ROLE_USER", "user")
            and isinstance(m.get("messageId"), str)
            and self.session.applied(m["messageId"])
        ]
