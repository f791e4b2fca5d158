"""The negotiator (research §4.6): one model call in JSON mode per move, no tools, the
tenant's ``negotiator_prompt`` as the system message, the decision the answer's JSON content.
Or a Python ``module:function`` the config names (``negotiator``), called with the same view.

The negotiator sees the exchange from its own side: the counterparty's moves as ``user``
messages, its own as ``assistant``, each move with terms followed by its offer line
``[offer <offerId>: <terms json>]`` so an accepting move can name the offer it takes. Offer ids
are never the model's: ``Decision.with_offer_id`` replaces whatever it wrote.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

from app.agents.llm.config import LlmConfig, ModelEndpoint, NegotiationConfig
from app.agents.llm.model_calls import NO_KEY, RETRY_STATUSES
from app.negotiation.decision import Decision, DecisionError, decision_from_data
from app.negotiation.settlement import canonical
from app.negotiation.vocabulary import Action

MAX_TOKENS = 2048


class NegotiatorFailed(Exception):
    """No usable decision (every model refused or answered no valid JSON decision)."""


@dataclass(frozen=True)
class Move:
    """One earlier move as this side sees it: ``mine`` (ours) or theirs."""

    mine: bool
    decision: Decision


@dataclass(frozen=True)
class View:
    """What the negotiator decides from."""

    party: str  # whom it negotiates for
    objective: str
    moves: tuple[Move, ...]
    offered: tuple[Action, ...]
    now: float


def objective_of(intent: str, brief: str | None, guidance: Sequence[str]) -> str:
    """Intent, the opening brief and the party's standing guidance (research §3.5)."""
    parts = [f"Current intent: {intent}" if intent else "No particular intent."]
    if brief:
        parts.append(f"In this negotiation: {brief}")
    if guidance:
        parts.append("Guidance from the party you act for:\n" + "\n".join(guidance))
    return "\n\n".join(parts)


def system_message(prompt: str, view: View) -> str:
    day = time.strftime("%Y-%m-%d (%A)", time.gmtime(view.now))
    actions = ", ".join(a.shown() for a in view.offered)
    return "\n".join(
        [
            prompt,
            "",
            f'You are negotiating on behalf of "{view.party}".',
            f"Objective: {view.objective}",
            f"Today's date is {day}.",
            f"Decide how to respond to the other party, and choose exactly one action from: "
            f"{actions}.",
            'Answer with one JSON object: {"action": ..., "message": ..., "terms": {...}, '
            '"acceptsOfferId": "<id>"}.',
            "terms: the concrete offer of this move as flat key/value pairs (amount, currency, "
            "date, quantity, location), absolute YYYY-MM-DD dates, never relative ones.",
            "acceptsOfferId is required when accepting: copy the id from the bracketed offer "
            "line you accept, with the same terms. Never accept terms different from the offer "
            "you name — counter instead.",
            "The message is the only thing the other party will see.",
        ]
    )


def history_messages(moves: Sequence[Move]) -> list[dict[str, str]]:
    out = []
    for move in moves:
        content = move.decision.message
        terms = move.decision.terms
        if terms is not None:
            content += f"\n[offer {move.decision.offer_id or 'unidentified'}: {canonical(terms)}]"
        out.append({"role": "assistant" if move.mine else "user", "content": content})
    if not out or out[-1]["role"] == "assistant":
        out.append({"role": "user", "content": "Make your move."})
    return out


def checked(data: object, offered: Sequence[Action]) -> Decision:
    """The model's JSON as a decision whose action was offered (``DecisionError`` if not)."""
    decision = decision_from_data(data)
    if decision.action not in {a.name for a in offered}:
        raise DecisionError(f"disallowed action {decision.action!r}")
    return decision


class Negotiator:
    """Decides moves for one agent config. ``http``: the runtime's client for model servers."""

    def __init__(
        self,
        config: LlmConfig,
        environ: Mapping[str, str],
        http: httpx2.AsyncClient | None,
        *,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        assert config.negotiation is not None
        self.config = config
        self.negotiation: NegotiationConfig = config.negotiation
        self.environ = environ
        self.http = http
        self.sleep = sleep

    async def decide(self, view: View) -> Decision:
        if self.negotiation.negotiator is not None:
            return await self._python(view)
        messages = [
            {"role": "system", "content": system_message(self.negotiation.negotiator_prompt, view)},
            *history_messages(view.moves),
        ]
        last: Exception | None = None
        for endpoint in self._endpoints():
            try:
                content = await self._complete(endpoint, messages)
                return checked(json.loads(content), view.offered)
            except (NegotiatorFailed, DecisionError, ValueError) as exc:
                last = exc
        raise NegotiatorFailed(f"no usable decision ({type(last).__name__})")

    def _endpoints(self) -> list[ModelEndpoint]:
        if self.negotiation.model is not None:
            return [self.negotiation.model]
        endpoints = [self.config.model]
        if self.config.fallback_model is not None:
            endpoints.append(self.config.fallback_model)
        return endpoints

    async def _complete(self, endpoint: ModelEndpoint, messages: list[dict[str, str]]) -> str:
        key = NO_KEY
        if endpoint.api_key_env is not None:
            key = self.environ.get(endpoint.api_key_env) or ""
            if not key:
                raise NegotiatorFailed(f"no key in {endpoint.api_key_env}")
        body = {
            "model": endpoint.name,
            "messages": messages,
            "response_format": {"type": "json_object"},
            "max_tokens": MAX_TOKENS,
        }
        url = endpoint.base_url.rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {key}"}
        client = self.http or httpx2.AsyncClient(trust_env=False, follow_redirects=False)
        try:
            for attempt in range(1, self.config.model_attempts + 1):
                try:
                    response = await client.post(
                        url, json=body, headers=headers, timeout=self.config.model_timeout_seconds
                    )
                except httpx2.HTTPError:
                    response = None
                if response is not None and response.status_code == 200:
                    return _content(response.content)
                status = response.status_code if response is not None else 0
                if status and status not in RETRY_STATUSES and status < 500:
                    raise NegotiatorFailed(f"HTTP {status}")
                if attempt < self.config.model_attempts:
                    await self.sleep(2 ** (attempt - 1))
            raise NegotiatorFailed("no answer")
        finally:
            if self.http is None:
                await client.aclose()

    async def _python(self, view: View) -> Decision:
        """``negotiator: "module:function"``: called with the view; returns a decision object
        (a mapping as the model would write it), awaited if it is a coroutine."""
        module, _, name = (self.negotiation.negotiator or "").partition(":")
        try:
            fn = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise NegotiatorFailed(f"negotiator does not load ({type(exc).__name__})") from None
        result = fn(view)
        if inspect.isawaitable(result):
            result = await result
        try:
            return checked(result, view.offered)
        except DecisionError as exc:
            raise NegotiatorFailed(str(exc)) from None


def _content(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
        content = doc["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise NegotiatorFailed("not a completion") from None
    if not isinstance(content, str) or not content.strip():
        raise NegotiatorFailed("empty completion")
    return content
