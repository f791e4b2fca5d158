"""Tools the model may call: an async function becomes a ``Tool`` (name, description, JSON
schema from its annotations, an argument validator), and each call gets a ``ToolContext``.

A tool's function is ``async def name(ctx, a: int, b: str = "x") -> str | ToolOutput``: the
function name is the tool name, the docstring its description, the annotated parameters (all
but a first one named ``ctx``) its JSON schema. It returns text (anything else is sent as
JSON) or a ``ToolOutput`` carrying artifacts for the task's reply. Raising ``ToolError`` sends
its message to the model; any other exception sends only its class name.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

JsonDict = dict[str, Any]
ToolFn = Callable[..., Awaitable[Any]]


class ToolError(Exception):
    """Raised by a tool to tell the model why it failed (the message is sent as the result)."""


@dataclass(frozen=True)
class ToolOutput:
    text: str
    artifacts: tuple[JsonDict, ...] = ()  # protobuf-JSON ``Artifact`` dicts for the reply


@dataclass(frozen=True)
class ToolContext:
    """The turn's scoped context a tool receives as ``ctx``. ``idempotency_key`` is stable
    across a re-run of the same call after a crash (tools run at least once)."""

    tenant: str
    identity_key: str
    task_id: str
    call_id: str
    idempotency_key: str
    secrets: Mapping[str, str]
    cancelled: asyncio.Event
    clock: Callable[[], float]
    sender: str | None = None
    channel: str | None = None


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: JsonDict
    fn: ToolFn
    takes_ctx: bool
    args_model: type[BaseModel]
    sequential: bool = False
    plugin: str | None = None  # the key of the plugin that brought it (None: built in)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def validate(self, args: Mapping[str, Any]) -> JsonDict:
        """The arguments as the function takes them; ``ValidationError`` when they do not fit."""
        model = self.args_model.model_validate(dict(args))
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def call(self, ctx: ToolContext, args: Mapping[str, Any]) -> Any:
        if self.takes_ctx:
            return await self.fn(ctx, **args)
        return await self.fn(**args)


def tool_from_function(fn: ToolFn, *, sequential: bool = False, plugin: str | None = None) -> Tool:
    """``TypeError`` when ``fn`` is not an async function with annotated parameters."""
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"tool {getattr(fn, '__name__', fn)!r} is not an async function")
    name = fn.__name__
    signature = inspect.signature(fn)
    hints = get_type_hints(fn)
    params = list(signature.parameters.values())
    takes_ctx = bool(params) and params[0].name == "ctx"
    fields: dict[str, Any] = {}
    for param in params[1:] if takes_ctx else params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args and **kwargs are not allowed")
        if param.name not in hints:
            raise TypeError(f"tool {name!r}: parameter {param.name!r} has no annotation")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints[param.name], default)
    args_model = cast(type[BaseModel], create_model(f"{name}_args", __base__=_Args, **fields))
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    description = inspect.cleandoc(fn.__doc__ or "") or name
    return Tool(
        name=name,
        description=description,
        schema=schema,
        fn=fn,
        takes_ctx=takes_ctx,
        args_model=args_model,
        sequential=sequential,
        plugin=plugin,
    )


def schema_problem(exc: ValidationError) -> str:
    """The first problem of a validation error, for the model (no input values echoed)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "arguments"
    return f"{where}: {first['msg']}"
