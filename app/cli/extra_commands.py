"""Registrars of the commands owned by other packages: ``worker`` (durable turns),
``push`` and ``gateway-dev`` (push delivery), ``negotiations`` and ``peer-pins`` (other
agents), ``admin-tokens`` (the admin API). Each
module exposes ``register(sub)``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeAlias

from app.cli import admin_tokens as _admin_tokens_cmd
from app.cli import gateway_dev as _gateway_dev_cmd
from app.cli import negotiations as _negotiations_cmd
from app.cli import peer_pins as _peer_pins_cmd
from app.cli import push as _push_cmd
from app.cli import worker as _worker_cmd

Registrar: TypeAlias = "Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]"

REGISTRARS: list[Registrar] = []

REGISTRARS.append(_worker_cmd.register)

REGISTRARS.append(_push_cmd.register)
REGISTRARS.append(_gateway_dev_cmd.register)
REGISTRARS.append(_negotiations_cmd.register)
REGISTRARS.append(_peer_pins_cmd.register)
REGISTRARS.append(_admin_tokens_cmd.register)
