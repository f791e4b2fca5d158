"""The action vocabulary (research §1.4): ``propose``, ``counter``, ``accept``, ``reject``
plus the tenant's configured actions, each with a terminal flag and the task state it ends
in. Default terminal states: ``accept`` completes, ``withdraw`` cancels, any other terminal
action rejects; a non-terminal move leaves the task ``INPUT_REQUIRED``.

``ask`` is offered to the negotiator too: outbound it never leaves the edge (the negotiation
parks while the party is asked), inbound it goes to the peer as a normal non-terminal reply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.agents.llm.config import NegotiationConfig
from app.db.states import CANCELED, COMPLETED, INPUT_REQUIRED, REJECTED

DEFAULT_ACTIONS = ("propose", "counter", "accept", "reject")
DEFAULT_TERMINAL = frozenset({"accept", "reject", "decline", "withdraw"})
ASK = "ask"
ASK_DESCRIPTION = (
    "use only when your next move depends on something the party you act for has not told "
    "you — a limit, a date, a preference. State what you need to know. Nothing is sent to "
    "the counterparty"
)
# Configured actions name their end state in these words.
STATE_NAMES: Mapping[str, str] = {
    "completed": COMPLETED,
    "rejected": REJECTED,
    "canceled": CANCELED,
}


def default_terminal_state(action: str) -> str:
    if action == "accept":
        return COMPLETED
    if action == "withdraw":
        return CANCELED
    return REJECTED


@dataclass(frozen=True)
class Action:
    name: str
    description: str | None = None
    terminal: bool = False
    state: str | None = None  # the A2A state a terminal action ends in (None: the default)

    def shown(self) -> str:
        """How the negotiator sees it: ``name (description)``."""
        return f"{self.name} ({self.description})" if self.description else self.name


@dataclass(frozen=True)
class Vocabulary:
    actions: tuple[Action, ...]

    @classmethod
    def build(cls, configured: Iterable[Action] = ()) -> Vocabulary:
        actions = [Action(name, terminal=name in DEFAULT_TERMINAL) for name in DEFAULT_ACTIONS]
        for action in configured:
            actions = [a for a in actions if a.name != action.name]
            actions.append(action)
        return cls(tuple(actions))

    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actions)

    def get(self, name: str) -> Action | None:
        return next((a for a in self.actions if a.name == name), None)

    def is_terminal(self, name: str) -> bool:
        action = self.get(name)
        return action.terminal if action is not None else name in DEFAULT_TERMINAL

    def task_state(self, name: str) -> str:
        """The state the responder's move leaves the task in (research §1.5 step 6)."""
        if not self.is_terminal(name):
            return INPUT_REQUIRED
        action = self.get(name)
        if action is not None and action.state is not None:
            return STATE_NAMES[action.state]
        return default_terminal_state(name)

    def offered(self, *, with_ask: bool) -> tuple[Action, ...]:
        """The actions a negotiator may choose from this turn."""
        extra = (Action(ASK, ASK_DESCRIPTION),) if with_ask else ()
        return (*self.actions, *extra)

    def skill_description(self) -> str:
        """The card's ``negotiate`` skill (research §1.4): names every action."""
        return (
            "Negotiates on its party's behalf over A2A SendMessage. Understands: "
            + ", ".join(self.names())
            + "."
        )


def vocabulary_of(config: NegotiationConfig) -> Vocabulary:
    """The vocabulary a tenant's ``negotiation`` block configures."""
    return Vocabulary.build(
        Action(a.action, a.description, a.terminal, a.state) for a in config.actions
    )
