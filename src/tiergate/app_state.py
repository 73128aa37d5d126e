"""The live objects behind one gateway app instance.

Why its own module: the admin endpoints (api/admin_*.py) read these objects,
and app.py mounts those endpoints; with the type in app.py the two imported
each other. Here it sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tiergate.config import GatewayConfig
from tiergate.config_store import ConfigSync
from tiergate.gateway.pipeline import Gateway
from tiergate.providers.http import UpstreamHTTP
from tiergate.recorder import Recorder
from tiergate.state import StateStore


@dataclass
class AppState:
    """The live objects behind one app instance (exposed for tests and admin)."""

    cfg: GatewayConfig
    gateway: Gateway
    http: UpstreamHTTP
    recorder: Recorder
    store: StateStore
    extras: dict[str, Any] = field(default_factory=dict)
    config_sync: ConfigSync | None = None
