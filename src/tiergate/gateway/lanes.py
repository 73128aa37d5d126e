"""Glue between the request pipeline and role-scoped sticky session tiers.

The pipeline calls three things: `extract` before parsing (removes the tier
metadata), `prepare` after planning (takes the lane's lease and reorders the
plan to the lane's allowed routes), and `finalize` exactly once on every exit
path (success, upstream failure, client disconnect), which releases the lease.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from tiergate.config import GatewayConfig
from tiergate.core.model import ChatRequest, ChatResponse
from tiergate.gateway.auth import Workspace
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.planner import RoutePlan
from tiergate.lanes import (
    PreparedTurn,
    RouteCandidate,
    SessionTierError,
    SessionTiers,
    SessionTierSettings,
    TierTurn,
    TurnOutcome,
    open_lane_store,
    policy_revision,
)
from tiergate.lanes.revision import LaneRevisions
from tiergate.routing.distributor import Distributor


def make_session_tiers(cfg: GatewayConfig) -> SessionTiers:
    """Settings from config and environment (environment wins), the configured store."""
    settings = SessionTierSettings.from_env_and_config(
        os.environ,
        cfg.session_tiers.mode,
        cfg.session_tiers.ttl_seconds,
        cfg.session_tiers.lease_seconds,
    )
    store = None
    if settings.enabled:
        store = open_lane_store(
            cfg.session_tiers.backend,
            sqlite_path=cfg.session_tiers.sqlite_path,
            redis_url=cfg.state.url,
            key_prefix=f"{cfg.state.key_prefix}lanes:",
            cluster=cfg.state.cluster,
        )
    return SessionTiers(settings, store, policy_revision(cfg))


def _gateway_error(err: SessionTierError) -> GatewayError:
    return GatewayError(err.status, err.message, err.code)


class LaneGlue:
    """What the pipeline needs from the session-tiers package."""

    def __init__(self, tiers: SessionTiers, distributor: Distributor, cfg: GatewayConfig) -> None:
        self.tiers = tiers
        self.distributor = distributor
        self.revisions = LaneRevisions(cfg)

    def reload(self, cfg: GatewayConfig, distributor: Distributor) -> None:
        """A new config: each lane's revision is recomputed from it, so only lanes
        whose router or approved model's catalogue entries changed are unbound."""
        self.distributor = distributor
        self.revisions = LaneRevisions(cfg)

    @property
    def enabled(self) -> bool:
        return self.tiers.enabled

    def extract(self, body: dict[str, Any]) -> tuple[dict[str, Any], TierTurn | None]:
        try:
            return self.tiers.extract(body)
        except SessionTierError as err:
            raise _gateway_error(err) from None

    async def prepare(
        self, workspace: Workspace, turn: TierTurn, req: ChatRequest, plan: RoutePlan
    ) -> PreparedTurn:
        """Take the lease and restrict the plan to the lane's routes, in its order."""
        candidates = []
        for name in plan.models:
            m = self.distributor.model_config(name)
            if m is None:
                continue
            provider = name.split("/", 1)[0] if "/" in name else ""
            candidates.append(
                RouteCandidate(name, m.upstream or name.split("/", 1)[-1], m.quality_tier, provider)
            )
        try:
            prepared = await self.tiers.prepare(
                workspace.id,
                turn,
                req.messages,
                candidates,
                admit=lambda c: self.distributor.is_live(c.route_id),
                revision=self.revisions.get(turn.router),
                request_id=str(plan.extras.get("request_id") or "") or None,
            )
        except SessionTierError as err:
            raise _gateway_error(err) from None
        plan.models = [c.route_id for c in prepared.candidates]
        if (
            plan.channel_pin is not None
            and plan.models
            and plan.pins.channel_for(plan.models[0]) != plan.channel_pin
        ):
            plan.channel_pin = None
        return prepared

    async def finalize(
        self,
        prepared: PreparedTurn,
        *,
        served_model: str | None,
        response: ChatResponse | None,
        tool_call_ids: tuple[str, ...] | None,
        credential_failure: bool = False,
    ) -> None:
        """Record the turn: only a normal completion (stop or tool_calls) is a success.

        `tool_call_ids` are the ids the client received, also on a failed turn:
        `()` when nothing reached the client (a failure before the first byte),
        None when that is unknown (a stream cut short). Only None blocks the
        lane's boundary until expiry; a failure alone blocks just the next one.
        """
        ok = response is not None and response.finish_reason in ("stop", "tool_calls")
        outcome = TurnOutcome(
            success=ok,
            actual_route=served_model if ok else None,
            tool_call_ids=tool_call_ids,
            credential_failure=credential_failure,
        )
        # a storage failure after the reply: the lease then expires with the lane TTL
        with contextlib.suppress(SessionTierError):
            await self.tiers.finalize(prepared, outcome)
