"""One step's model call: retries with backoff or the server's ``Retry-After``, then the
fallback model, then a ``ModelUnavailable`` the loop turns into the operator's failure text.

Retried: timeouts, connection errors, HTTP 408/409/425/429 and 5xx, and a 200 whose body is
not a usable completion (malformed JSON, no choices). Other statuses (a 400 for a bad request,
401 for a bad key) go straight to the fallback: asking again would get the same answer. The
client library's own retries are off (``max_retries=0``) so these rules are the only ones.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx2
from openai import AsyncOpenAI, OpenAIError
from pydantic_ai.direct import model_request
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelHTTPError,
    ModelTimeoutError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition

from app.agents.llm.config import LlmConfig, ModelEndpoint
from app.agents.llm.events import EventBus, ModelCalled
from app.agents.llm.tracing import model_span, record_response

log = logging.getLogger("looping.agent")

RETRY_STATUSES = frozenset({408, 409, 425, 429})
MAX_RETRY_AFTER_SECONDS = 60.0
NO_KEY = "unused"  # servers that need no key still get an Authorization header


class ModelUnavailable(Exception):
    """Every attempt on every configured model failed (or a key is missing): the turn fails
    with the operator's text."""


class MissingKey(ModelUnavailable):
    def __init__(self, variable: str) -> None:
        super().__init__(variable)
        self.variable = variable


Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class _Failure:
    retry: bool
    retry_after: float | None
    outcome: str


def classify(exc: BaseException) -> _Failure:
    """Whether a failed call may be asked again, and how long the server asked to wait."""
    after = getattr(exc, "retry_after", None)
    after = float(after) if isinstance(after, int | float) else None
    if after is not None and not 0 <= after <= MAX_RETRY_AFTER_SECONDS:
        after = None
    if isinstance(exc, ModelHTTPError):
        status = exc.status_code
        return _Failure(status in RETRY_STATUSES or status >= 500, after, "failed")
    if isinstance(exc, TimeoutError | ModelTimeoutError | httpx2.TimeoutException):
        return _Failure(True, None, "timeout")
    # Connection errors, undecodable bodies, empty choices: a failed attempt worth repeating.
    return _Failure(True, after, "failed")


_ModelKey = tuple[ModelEndpoint, str, float]  # the endpoint, the key, the timeout
MODELS_KEPT = 256


class ModelClients:
    """The model clients of a process whose turns share one HTTP client (``LlmRuntime``),
    by endpoint, key and timeout: a client made for every turn cost each turn its
    construction and the ``openai`` SDK's first-request platform probe (a thread hop)."""

    def __init__(self) -> None:
        self._kept: dict[_ModelKey, OpenAIChatModel] = {}

    def get(self, key: _ModelKey, make: Callable[[], OpenAIChatModel]) -> OpenAIChatModel:
        model = self._kept.pop(key, None)
        if model is None:
            model = make()
            if len(self._kept) >= MODELS_KEPT:
                self._kept.pop(next(iter(self._kept)))  # the least recently used
        self._kept[key] = model
        return model


class ModelCaller:
    """Calls the tenant's model (and fallback) for one step. ``environ`` is the worker's
    environment mapping, read at call time for ``api_key_env``. ``clients``: where the
    runtime keeps its model clients (only with its ``http_client``)."""

    def __init__(
        self,
        config: LlmConfig,
        environ: Mapping[str, str],
        events: EventBus,
        *,
        sleep: Sleep = asyncio.sleep,
        cancelled: asyncio.Event | None = None,
        http_client: httpx2.AsyncClient | None = None,
        clients: ModelClients | None = None,
    ) -> None:
        self.config = config
        self.clients = clients if http_client is not None else None
        self.environ = environ
        self.events = events
        self.sleep = sleep
        self.cancelled = cancelled
        self.http_client = http_client
        self._own_client: httpx2.AsyncClient | None = None
        self._models: dict[ModelEndpoint, OpenAIChatModel] = {}

    async def aclose(self) -> None:
        """Close the client this caller made (none when the runtime lent one)."""
        if self._own_client is not None:
            await self._own_client.aclose()
            self._own_client = None

    def _client(self) -> httpx2.AsyncClient:
        if self.http_client is not None:
            return self.http_client
        if self._own_client is None:
            self._own_client = httpx2.AsyncClient(trust_env=False, follow_redirects=False)
        return self._own_client

    async def request(
        self, messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition] | None
    ) -> ModelResponse:
        endpoints = [self.config.model]
        if self.config.fallback_model is not None:
            endpoints.append(self.config.fallback_model)
        params = ModelRequestParameters(function_tools=list(tools or ()))
        for index, endpoint in enumerate(endpoints):
            response = await self._attempts(endpoint, messages, params, fallback=index > 0)
            if response is not None:
                return response
        raise ModelUnavailable("every model attempt failed")

    def _model(self, endpoint: ModelEndpoint) -> OpenAIChatModel:
        """The endpoint's client for this turn (the key is read once per turn)."""
        model = self._models.get(endpoint)
        if model is None:
            key = self._key(endpoint)
            if self.clients is None:
                model = self._new_model(endpoint, key)
            else:
                kept = (endpoint, key, self.config.model_timeout_seconds)
                model = self.clients.get(kept, lambda: self._new_model(endpoint, key))
            self._models[endpoint] = model
        return model

    def _key(self, endpoint: ModelEndpoint) -> str:
        if endpoint.api_key_env is None:
            return NO_KEY
        value = self.environ.get(endpoint.api_key_env)
        if not value:
            log.error("agent.model_key_missing", extra={"variable": endpoint.api_key_env})
            raise MissingKey(endpoint.api_key_env)
        return value

    def _new_model(self, endpoint: ModelEndpoint, key: str) -> OpenAIChatModel:
        client = AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=key,
            max_retries=0,
            timeout=self.config.model_timeout_seconds,
            http_client=self._client(),
        )
        return OpenAIChatModel(endpoint.name, provider=OpenAIProvider(openai_client=client))

    async def _attempts(
        self,
        endpoint: ModelEndpoint,
        messages: Sequence[ModelMessage],
        params: ModelRequestParameters,
        *,
        fallback: bool,
    ) -> ModelResponse | None:
        model = self._model(endpoint)
        for attempt in range(1, self.config.model_attempts + 1):
            try:
                with model_span(endpoint.name, attempt, fallback=fallback) as span:
                    async with asyncio.timeout(self.config.model_timeout_seconds):
                        response = await model_request(
                            model, list(messages), model_request_parameters=params
                        )
                    record_response(span, messages, response)
            except (ModelAPIError, UnexpectedModelBehavior, OpenAIError, TimeoutError) as exc:
                failure = classify(exc)
                last = attempt == self.config.model_attempts or not failure.retry
                outcome = failure.outcome if last else "retry"
                await self._failed(endpoint, exc, outcome, attempt, fallback=fallback)
                if last or self._stopped():
                    return None
                delay = failure.retry_after
                await self.sleep(2.0 ** (attempt - 1) if delay is None else delay)
                if self._stopped():
                    return None
                continue
            await self._answered(endpoint, response, fallback=fallback)
            return response
        return None

    async def _failed(
        self, endpoint: ModelEndpoint, exc: Exception, outcome: str, attempt: int, *, fallback: bool
    ) -> None:
        """A failed attempt, as an event (``outcome``: its class, or ``retry``) and a log line."""
        await self.events.emit(ModelCalled(endpoint.name, outcome, fallback=fallback))
        log.warning(
            "agent.model_call_failed",
            extra={"model": endpoint.name, "outcome": type(exc).__name__, "attempt": attempt},
        )

    async def _answered(
        self, endpoint: ModelEndpoint, response: ModelResponse, *, fallback: bool
    ) -> None:
        """An answered attempt, as an event with the tokens it used."""
        usage = response.usage
        await self.events.emit(
            ModelCalled(
                endpoint.name,
                "ok",
                tokens_in=usage.input_tokens or 0,
                tokens_out=usage.output_tokens or 0,
                fallback=fallback,
            )
        )

    def _stopped(self) -> bool:
        return self.cancelled is not None and self.cancelled.is_set()
