"""Shadow labelling and the go-live gate (report §8).

In shadow (`rollout_percent: 0`, or a session outside the canary) the engine
records every would-escalate decision as a `shadow` audit event with its
evidence (trigger, delta score, threshold, streak, strikes, shares) and
switches nothing. An operator labels each decision correct or not; a router's
labelled precision over a trailing window (`escalation.gate_window_days`, by
decision time) must reach `gate_min_precision` (70 %) over at least
`gate_min_labels` labels before the admin API lets auto escalation go live
(rollout above 0). `{"force": true}` overrides and is audited as `gate_forced`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import case, delete, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_OFFSET,
    AdminContext,
    actor_of,
    invalid,
    json_response,
    not_found,
    parse_bool,
    parse_int,
    parse_time,
    read_body,
)
from tiergate.config import RouterConfig
from tiergate.db import audit_table, shadow_labels_table
from tiergate.routing.escalation import escalation_applies

_DAY = 86400.0
MAX_HARD_TURNS = 1000


# ---- the gate (pure) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateStatus:
    router: str
    labels: int
    correct: int
    min_labels: int
    min_precision: float
    window_days: int

    @property
    def precision(self) -> float | None:
        return self.correct / self.labels if self.labels else None

    @property
    def open(self) -> bool:
        p = self.precision
        return self.labels >= self.min_labels and p is not None and p >= self.min_precision

    @property
    def reason(self) -> str:
        if self.open:
            return "labelled precision meets the gate"
        if self.labels < self.min_labels:
            return (
                f"{self.labels} of the {self.min_labels} labelled shadow decisions needed "
                f"in the last {self.window_days} days"
            )
        return (
            f"labelled precision {self.precision:.1%} is below {self.min_precision:.0%} "
            f"over {self.labels} labels in the last {self.window_days} days"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "router": self.router,
            "labels": self.labels,
            "correct": self.correct,
            "precision": self.precision,
            "min_labels": self.min_labels,
            "min_precision": self.min_precision,
            "window_days": self.window_days,
            "open": self.open,
            "reason": self.reason,
        }


def gate_status(router: RouterConfig, labels: int, correct: int) -> GateStatus:
    esc = router.escalation
    return GateStatus(
        router.name,
        labels,
        correct,
        esc.gate_min_labels,
        esc.gate_min_precision,
        esc.gate_window_days,
    )


def live_percent(router: RouterConfig | None) -> float:
    """The share of sessions auto escalation really switches (0 = shadow or off)."""
    if router is None or not escalation_applies(router) or router.escalation.mode != "auto":
        return 0.0
    return router.escalation.rollout_percent


GateState = Literal["live", "open", "closed"]


def gate_state(gate: GateStatus, live: float) -> GateState:
    """What the dashboard shows for a router's gate. The gate only guards raising
    the rollout (`raises_rollout`): a router already live for every session has
    nothing left behind it, so it reads live (good), not a red closed gate."""
    if live >= 100.0:
        return "live"
    return "open" if gate.open else "closed"


def gate_summary(gate: GateStatus, live: float) -> str:
    """One line beside the state: why it is what it is."""
    if gate_state(gate, live) == "live":
        return (
            f"live for every session: the gate only guards raising rollout_percent ({gate.reason})"
        )
    return gate.reason


def raises_rollout(old: RouterConfig | None, new: RouterConfig) -> bool:
    """Does a change take auto escalation live, or live for more sessions?"""
    after = live_percent(new)
    return after > 0 and after > live_percent(old)


# ---- storage -----------------------------------------------------------------------------


async def label_counts(engine: AsyncEngine, router: str, since: float) -> tuple[int, int]:
    """(labels, correct) for shadow decisions of `router` made since `since`."""
    t = shadow_labels_table
    q = select(
        func.count(), func.coalesce(func.sum(case((t.c.correct.is_(True), 1), else_=0)), 0)
    ).where(t.c.router == router, t.c.event_ts >= since)
    async with engine.connect() as conn:
        row = (await conn.execute(q)).one()
    return int(row[0]), int(row[1])


async def router_gate(engine: AsyncEngine, router: RouterConfig, now: float) -> GateStatus:
    since = now - router.escalation.gate_window_days * _DAY
    labels, correct = await label_counts(engine, router.name, since)
    return gate_status(router, labels, correct)


def _label_view(r: Any) -> dict[str, Any] | None:
    if r.correct is None:
        return None
    return {
        "correct": bool(r.correct),
        "hard_turns_before": r.hard_turns_before,
        "note": r.note,
        "actor": r.actor,
        "ts": r.label_ts,
    }


def shadow_view(r: Any) -> dict[str, Any]:
    detail = r.detail or {}
    return {
        "id": r.id,
        "ts": r.ts,
        "router": r.router,
        "workspace": r.workspace,
        "session_hash": r.session_hash,
        "request_id": r.request_id,
        "trigger": r.trigger,
        "evidence": {
            "would_header": detail.get("header"),
            "delta_score": detail.get("delta_score"),
            "threshold": detail.get("threshold"),
            "difficulty_streak": detail.get("difficulty_streak"),
            "strike_count": detail.get("strike_count"),
            "router_share": detail.get("router_share"),
            "workspace_share": detail.get("workspace_share"),
        },
        "label": _label_view(r),
    }


def _shadow_query() -> Any:
    a, s = audit_table, shadow_labels_table
    return select(
        a.c.id,
        a.c.ts,
        a.c.router,
        a.c.workspace,
        a.c.session_hash,
        a.c.request_id,
        a.c.trigger,
        a.c.detail,
        s.c.correct,
        s.c.hard_turns_before,
        s.c.note,
        s.c.actor,
        s.c.ts.label("label_ts"),
    ).select_from(a.outerjoin(s, s.c.audit_id == a.c.id))


# ---- handlers ------------------------------------------------------------------------------


async def list_shadow(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/shadow: shadow decisions with their evidence and label."""
    qp = request.query_params
    labelled = parse_bool(qp.get("labelled"), "labelled")
    since, until = parse_time(qp.get("since"), "since"), parse_time(qp.get("until"), "until")
    limit = parse_int(qp.get("limit"), "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    offset = parse_int(qp.get("offset"), "offset", 0, 0, MAX_OFFSET)
    a, s = audit_table, shadow_labels_table
    conds = [a.c.event == "shadow"]
    if qp.get("router"):
        conds.append(a.c.router == qp["router"])
    if since is not None:
        conds.append(a.c.ts >= since)
    if until is not None:
        conds.append(a.c.ts < until)
    if labelled is True:
        conds.append(s.c.audit_id.is_not(None))
    elif labelled is False:
        conds.append(s.c.audit_id.is_(None))
    q = _shadow_query().where(*conds).order_by(a.c.ts.desc(), a.c.id.desc())
    engine = await ctx.fresh_engine()
    async with engine.connect() as conn:
        rows = (await conn.execute(q.limit(limit).offset(offset))).all()
    return json_response(
        {"items": [shadow_view(r) for r in rows], "limit": limit, "offset": offset}
    )


def _label_body(body: dict[str, Any]) -> tuple[bool, int | None, str | None]:
    problems = []
    correct = body.get("correct")
    if not isinstance(correct, bool):
        problems.append("correct: true or false is required")
    hard = body.get("hard_turns_before")
    if isinstance(hard, float) and hard.is_integer():
        hard = int(hard)  # JSON has one number type: 2.0 is the integer 2
    if hard is not None and (
        isinstance(hard, bool) or not isinstance(hard, int) or not 0 <= hard <= MAX_HARD_TURNS
    ):
        problems.append(f"hard_turns_before: an integer from 0 to {MAX_HARD_TURNS}")
    note = body.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > 500):
        problems.append("note: a string of at most 500 characters")
    unknown = sorted(set(body) - {"correct", "hard_turns_before", "note"})
    problems += [f"{k}: unknown field" for k in unknown]
    if problems:
        raise invalid("Invalid label", problems)
    assert isinstance(correct, bool)
    return correct, hard, note


async def label_shadow(ctx: AdminContext, request: Request) -> Response:
    """POST /admin/api/shadow/{id}/label {"correct": bool, "hard_turns_before"?, "note"?}."""
    try:
        audit_id = int(request.path_params["id"])
    except ValueError:
        audit_id = -1
    if not 0 <= audit_id < 2**63:
        raise not_found(f"shadow decision {request.path_params['id']!r}")
    correct, hard, note = _label_body(await read_body(request))
    engine = await ctx.fresh_engine()
    a, s = audit_table, shadow_labels_table
    now = time.time()
    async with engine.begin() as conn:
        event = (
            await conn.execute(
                select(a.c.ts, a.c.router).where(a.c.id == audit_id, a.c.event == "shadow")
            )
        ).first()
        if event is None:
            raise not_found(f"shadow decision {audit_id}")
        await conn.execute(delete(s).where(s.c.audit_id == audit_id))
        await conn.execute(
            s.insert(),
            {
                "audit_id": audit_id,
                "router": event.router or "",
                "event_ts": event.ts,
                "correct": correct,
                "hard_turns_before": hard,
                "note": note,
                "actor": actor_of(request),
                "ts": now,
            },
        )
        row = (await conn.execute(_shadow_query().where(a.c.id == audit_id))).one()
    out = shadow_view(row)
    router = ctx.cfg.router(event.router or "")
    if router is not None:
        out["gate"] = (await router_gate(engine, router, now)).as_dict()
    return json_response(out)


async def router_gate_handler(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/routers/{name}/gate: the go-live gate as it stands now."""
    router = ctx.cfg.router(request.path_params["name"])
    if router is None:
        raise not_found(f"router {request.path_params['name']!r}")
    status = await router_gate(ctx.require_engine(), router, time.time())
    live = live_percent(router)
    return json_response(
        {
            **status.as_dict(),
            "live_percent": live,
            "state": gate_state(status, live),
            "summary": gate_summary(status, live),
        }
    )
