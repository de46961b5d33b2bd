"""The contract between the gateway and its API modules, where mypy cannot see it.

The dispatch table holds every handler under the common message base class, so the
typing of each module's ``handle`` against its own API's request and response
classes is checked here: what ``decode_request`` hands a handler is exactly what
its annotation promises, and what it returns is what ``encode_response`` accepts.
"""

from __future__ import annotations

import importlib
import pkgutil
import types
import typing

import pytest

from odradek.config import Config
from odradek.gateway import apis
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway import DEFAULTS, Gateway
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import request_class, response_class


def test_apis_holds_exactly_one_module_per_served_api() -> None:
    on_disk = {m.name for m in pkgutil.iter_modules(apis.__path__)}
    assert on_disk == set(apis.MODULES)
    keys = [importlib.import_module(f"odradek.gateway.apis.{m}").API_KEY for m in apis.MODULES]
    assert len(set(keys)) == len(keys)
    assert all(isinstance(k, ApiKey) for k in keys)


@pytest.mark.parametrize("name", apis.MODULES)
def test_handle_is_typed_with_its_apis_message_classes(name: str) -> None:
    module = importlib.import_module(f"odradek.gateway.apis.{name}")
    hints = typing.get_type_hints(module.handle)
    assert hints["gw"] is GatewayApi
    assert hints["ctx"] is ConnectionContext
    assert hints["header"] is RequestHeader
    assert hints["request"] is request_class(module.API_KEY)
    response = response_class(module.API_KEY)
    if module.API_KEY == ApiKey.PRODUCE:  # acks=0: no response at all
        assert hints["return"] == response | None
    else:
        assert hints["return"] is response


async def test_gateway_has_every_member_of_gateway_api() -> None:
    gw = Gateway(
        Config(
            DEFAULTS,
            overrides={"listeners": "PLAINTEXT://127.0.0.1:0", "controller.address": "127.0.0.1:1"},
        )
    )
    members = [
        name
        for name, value in vars(GatewayApi).items()
        if isinstance(value, (property, types.FunctionType)) and not name.startswith("_")
    ]
    assert "groups" in members and "producer_ids" in members
    for name in members:
        assert hasattr(gw, name), name
    assert not hasattr(gw, "state")  # typed fields, not a string-keyed dict
    await gw.controller.close()
