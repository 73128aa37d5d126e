"""What an operator can see and do to a session's lanes (issue #27).

`lane_views` reads the lanes of one (principal, session): for each request kind
and lane, the binding and who holds its lease. `release_lane` frees one lane at
once, without waiting for a lease to lapse: the lease goes and the in-flight
turn, if any, counts as interrupted (decide.interrupted: the binding stays; its
tool state becomes unknown, as for a stream cut short). With `forget` the
lane's binding goes too, so the next request binds afresh from its approval.
A holder that is still running finds its lease gone: its renewal stops and its
late completion changes nothing.

Only hashes and route names are read or returned; the raw session id is used
to compute the scope and is never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tiergate.lanes.decide import interrupted
from tiergate.lanes.errors import (
    CapacityExhausted,
    StorageUnavailable,
    busy,
    storage_unavailable,
)
from tiergate.lanes.flow import SWAP_ATTEMPTS
from tiergate.lanes.hashing import scope_hash
from tiergate.lanes.metadata import LANES, Kind
from tiergate.lanes.record import LaneRecord
from tiergate.lanes.store_base import LaneStore

KINDS: tuple[Kind, ...] = ("managed", "public")


@dataclass(frozen=True, slots=True)
class LaneRef:
    kind: Kind
    lane: str
    scope: str


@dataclass(frozen=True, slots=True)
class Released:
    """What a release did: whether a live lease was dropped (and whose), or the
    binding deleted (`forgot`)."""

    ref: LaneRef
    was_leased: bool
    lease_owner: str | None
    forgot: bool


def lane_refs(
    principal: str, session: str, lanes: tuple[str, ...] = LANES, kinds: tuple[Kind, ...] = KINDS
) -> list[LaneRef]:
    return [
        LaneRef(kind, lane, scope_hash(kind, principal, session, lane))
        for kind in kinds
        for lane in lanes
    ]


def lane_view(ref: LaneRef, record: LaneRecord, now: float) -> dict[str, Any]:
    """The admin API's view of one lane: no tool hashes, no revision hash."""
    return {
        "kind": ref.kind,
        "lane": ref.lane,
        "scope": ref.scope,
        "approved_model": record.approved_model,
        "approved_tier": record.approved_tier,
        "actual_route": record.actual_route,
        "expires_at": record.expires_at,
        "generation": record.generation,
        "last_turn_ok": record.last_turn_ok,
        "tools_unknown": record.tools_unknown,
        "outstanding_tool_calls": len(record.outstanding),
        "leased": record.leased(now),
        "lease_owner": record.lease_owner if record.leased(now) else None,
        "lease_expires_at": record.lease_expires_at if record.leased(now) else None,
        "lease_lapsed": record.lapsed(now),
    }


async def lane_views(store: LaneStore, refs: list[LaneRef], now: float) -> list[dict[str, Any]]:
    """The live lanes among `refs`. Raises StorageUnavailable."""
    out = []
    for ref in refs:
        found = await store.load(ref.scope, now)
        if found is not None:
            out.append(lane_view(ref, found.record, now))
    return out


async def release_lane(
    store: LaneStore, ref: LaneRef, now: float, *, forget: bool = False
) -> Released | None:
    """Free one lane now. None: no live lane there. Raises SessionTierError: 503
    when the store fails, 409 when the lane kept changing under every attempt."""
    try:
        for _ in range(SWAP_ATTEMPTS):
            found = await store.load(ref.scope, now)
            if found is None:
                return None
            record = found.record
            leased = record.leased(now)
            owner = record.lease_owner if leased else None
            if forget:
                new: LaneRecord | None = None
            elif record.lease_id is not None:  # held, or lapsed and not yet taken over
                new = interrupted(record)
            else:
                return Released(ref, was_leased=False, lease_owner=None, forgot=False)
            if await store.swap(ref.scope, found.etag, new, now):
                return Released(ref, was_leased=leased, lease_owner=owner, forgot=forget)
    except (StorageUnavailable, CapacityExhausted):
        raise storage_unavailable() from None
    raise busy()  # the lane kept changing under every attempt: try again
