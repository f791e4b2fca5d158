"""The media types the RPC endpoint reads (issue 47 row 10)."""

from __future__ import annotations

import pytest

from app.rpc.media_type import is_json


@pytest.mark.parametrize(
    "value",
    [
        None,
        "application/json",
        "application/a2a+json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "APPLICATION/A2A+JSON;charset=UTF-8",
        " application/json ",
    ],
)
def test_json_is_read(value: str | None) -> None:
    assert is_json(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "text/plain",
        "text/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-patch+json",
        "application/a2a+json2",
    ],
)
def test_anything_else_is_not(value: str) -> None:
    assert not is_json(value)
