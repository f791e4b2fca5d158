"""Baseline (b): a bare FastAPI endpoint returning a fixed JSON-RPC result — the framework
ceiling. ``uvicorn bench.bare_server:app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from bench.wire import sample_task

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
_RESULT = {"jsonrpc": "2.0", "id": 1, "result": sample_task()}


@app.post("/a2a")
async def rpc() -> dict[str, Any]:
    return _RESULT


@app.get("/livez")
async def livez() -> dict[str, str]:
    return {"status": "ok"}
