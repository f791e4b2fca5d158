"""A token's ``aud`` is the url of the interface it calls, exactly as the cards list it
(issue 49, ``app.interfaces``): a token for one binding is refused on another."""

from __future__ import annotations

import pytest

from app.errors import Unauthorized
from app.interfaces import GRPC, HTTP_JSON, JSONRPC, interface_url, served_interfaces

from .conftest import ENDPOINT, Env, make_settings

REST_URL = "http://localhost"


def test_the_interfaces_follow_the_settings() -> None:
    settings = make_settings(public_url="https://edge.example.com", rpc_path="/rpc")
    assert [(i.binding, i.url) for i in served_interfaces(settings)] == [
        (JSONRPC, "https://edge.example.com/rpc"),
        (HTTP_JSON, "https://edge.example.com"),
    ]
    with pytest.raises(LookupError):
        interface_url(settings, GRPC)
    with_grpc = make_settings(public_url="https://edge.example.com", grpc_port=50051)
    assert interface_url(with_grpc, GRPC) == "edge.example.com:50051"


def test_an_ipv6_public_host_keeps_its_brackets_in_the_grpc_url() -> None:
    settings = make_settings(public_url="http://[::1]:8080", grpc_port=50051)
    assert interface_url(settings, GRPC) == "[::1]:50051"


async def test_a_rest_token_passes_the_rest_verifier(env: Env) -> None:
    rest = env.verifier.for_binding(HTTP_JSON)
    assert rest.audience == REST_URL
    caller = await rest.verify(f"Bearer {env.mint(audience=REST_URL)}")
    assert caller.identity_key == "user-1"


async def test_a_jsonrpc_token_is_refused_by_the_rest_verifier(env: Env) -> None:
    rest = env.verifier.for_binding(HTTP_JSON)
    with pytest.raises(Unauthorized) as caught:
        await rest.verify(f"Bearer {env.mint(audience=ENDPOINT)}")
    assert caught.value.reason == "bad_audience"


async def test_a_rest_token_is_refused_on_jsonrpc(env: Env) -> None:
    with pytest.raises(Unauthorized) as caught:
        await env.verify(env.mint(audience=REST_URL))
    assert caught.value.reason == "bad_audience"


@pytest.mark.parametrize("settings_overrides", [{"grpc_port": 50051}])
async def test_a_grpc_token_is_refused_elsewhere_and_the_reverse(env: Env) -> None:
    verifier = env.verifier
    grpc = verifier.for_binding(GRPC)
    assert grpc.audience == "localhost:50051"
    assert (await grpc.verify(f"Bearer {env.mint(audience='localhost:50051')}")).tenant
    for token, target in (
        (env.mint(audience="localhost:50051"), verifier.for_binding(HTTP_JSON)),
        (env.mint(audience=REST_URL), grpc),
        (env.mint(audience=ENDPOINT), grpc),
    ):
        with pytest.raises(Unauthorized):
            await target.verify(f"Bearer {token}")


def test_an_unserved_binding_has_no_verifier(env: Env) -> None:
    with pytest.raises(LookupError):
        env.verifier.for_binding(GRPC)
