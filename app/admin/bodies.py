"""Request bodies: bounded, parsed as strictly as the CLI reads a manifest file, then bound to
a model that refuses unknown fields (issue 52).

FastAPI's own body binding would read any size, accept duplicate members and ``NaN``, and
answer 422 with the input echoed; bodies here are read by hand instead, and each route states
its model in the OpenAPI document (``openapi_body``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from app.admin.problems import Problem
from app.tenants.manifest import MAX_AGENT_CONFIG_BYTES, MAX_MANIFEST_BYTES, strict_json_object

# A tenant body holds at most a manifest and an agent config, each bounded on its own.
MAX_BODY_BYTES = MAX_MANIFEST_BYTES + MAX_AGENT_CONFIG_BYTES + 16 * 1024

M = TypeVar("M", bound=BaseModel)


def _too_large() -> Problem:
    return Problem(413, f"the body is larger than {MAX_BODY_BYTES} bytes", reason="body_too_large")


async def read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request, model: type[M]) -> M:
    """The body as ``model``; 415 unless JSON, 400 naming the field otherwise."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise Problem(415, "send the body as application/json", reason="unsupported_media_type")
    raw = await read_body(request)
    try:
        data = strict_json_object(raw.decode("utf-8"), "the body")
    except UnicodeDecodeError:
        raise Problem(400, "the body is not UTF-8", reason="invalid_body") from None
    except ValueError as exc:
        raise Problem(400, str(exc), reason="invalid_body") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Problem(400, describe(exc), reason="invalid_body") from None


def describe(exc: ValidationError) -> str:
    """``field: message`` of the first error, never the value given."""
    first = exc.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    message = str(first["msg"])
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    return f"{where}: {message}"


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` that documents ``model`` as the route's JSON body."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }
