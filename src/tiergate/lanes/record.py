"""The per-lane binding record: everything storage holds about one lane.

Fields are exactly the spec's list: hashed principal/session scope, lane,
route identifiers (approved and actual), hashed policy revision, expiry, the
completed-turn marker, hashed outstanding tool-call ids and the lease (with its
owner: the gateway instance and request id holding it, no client data). There
is no field that could hold prompt, response, tool-argument or result text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class LaneRecord:
    scope: str  # scope_hash(kind, principal, session, lane)
    lane: str  # main | delegation | aux
    approved_model: str  # the approved route, only ever set from request metadata
    approved_tier: int
    actual_route: str | None  # the route that last served a turn (may be a fallback)
    revision: str  # revision_hash(policy revision)
    expires_at: float  # idle expiry (epoch seconds in the caller's clock)
    generation: int = 0  # completed turns on this binding
    completed_user_turns: int = 0  # user messages in the last completed request
    last_turn_ok: bool = False  # the previous turn completed successfully
    tools_unknown: bool = False  # tool state unobservable: no boundary until expiry
    outstanding: tuple[str, ...] = ()  # tool_id_hash of calls still without a result
    lease_id: str | None = None  # the in-flight request holding the lane
    lease_expires_at: float | None = None  # short, renewed by the holder while it runs
    completed_turn: str | None = None  # turn_hash of the last completed user turn
    lease_owner: str | None = None  # "<instance>/<request id>" of the holder, for operators

    def live(self, now: float) -> bool:
        return self.expires_at > now

    def leased(self, now: float) -> bool:
        return (
            self.lease_id is not None
            and self.lease_expires_at is not None
            and self.lease_expires_at > now
        )

    def lapsed(self, now: float) -> bool:
        """A lease was taken and never released, and its holder stopped renewing it:
        the holder died (or lost the store) mid-turn."""
        return self.lease_id is not None and not self.leased(now)

    def evolve(self, **changes: Any) -> LaneRecord:
        return replace(self, **changes)

    # ---- serialisation (memory keeps objects; Redis keeps this JSON) ----------

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: bytes | str) -> LaneRecord:
        data = orjson.loads(raw)
        data["outstanding"] = tuple(data.get("outstanding") or ())
        return cls(**data)
