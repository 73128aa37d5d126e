"""Decide where a request goes: named router, tier, strategy, pins.

Order per request (report §4): identify the session, resolve the escalation
tier, narrow the router's candidates to that tier's pool, rank them with the
router's strategy, and only then apply the session's sticky pins inside that
candidate set. Deciding reads state but writes nothing; the returned plan
carries the writes (`commit`) the pipeline applies after a successful reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tiergate.config import GatewayConfig, RouterConfig
from tiergate.core.model import ChatRequest, ChatResponse
from tiergate.gateway.auth import Workspace
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.names import router_name
from tiergate.routing.affinity import ChannelPin
from tiergate.routing.distributor import Distributor, Target


@dataclass
class Outcome:
    """What happened upstream, for the deferred commit."""

    success: bool
    target: Target | None = None
    response: ChatResponse | None = None
    cost: float = 0.0
    fallback: bool = False
    status: int = 200


@dataclass
class RoutePlan:
    models: list[str]
    router: RouterConfig | None = None
    channel_pin: ChannelPin | None = None
    tier_header: str | None = None
    session_hash: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    async def commit(self, outcome: Outcome) -> None:
        """Apply the plan's deferred writes after the upstream reply."""


class Planner:
    """Turns a parsed request into a RoutePlan."""

    def __init__(self, cfg: GatewayConfig, distributor: Distributor) -> None:
        self.cfg = cfg
        self.distributor = distributor
        self.routers = {r.name: r for r in cfg.routers}

    async def plan(
        self,
        req: ChatRequest,
        body: dict[str, Any],
        headers: Mapping[str, str],
        workspace: Workspace,
    ) -> RoutePlan:
        name = router_name(req.model)
        if name is None:
            if self.distributor.model_config(req.model) is None:
                raise GatewayError(
                    404, f"The model '{req.model}' does not exist", "model_not_found"
                )
            return RoutePlan(models=[req.model])
        router = self.routers.get(name)
        if router is None:
            raise GatewayError(404, f"The router '{name}' does not exist", "model_not_found")
        models = [m for m in self.cfg.exposed_models() if self.distributor.is_live(m)]
        if router.default_model and router.default_model not in models:
            models.append(router.default_model)
        return RoutePlan(models=models, router=router)
