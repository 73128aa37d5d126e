"""`tiergate replay explain`: why a replayed session went to the strong tier, turn by turn.

After `tiergate replay import` of a team's own agent logs, the question an
operator asks is not the aggregate but "why did *this* session escalate, and
at which turn?". This reads one policy's replay (records, per-turn facts and
the audit events each commit wrote) and lays out, per session, every billed
turn: the tier that served it, the learned and lexical scores the engine
read, the strikes the turn raised, and what the engine decided (trigger, cap
denial, the audit event's top score reasons). Numbers, strike kinds and
feature names only: no prompt text (the audit events' own rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tiergate.replay.harness import RunResult

#: Learned-score reasons shown per audit event.
REASONS_SHOWN = 3


@dataclass(frozen=True, slots=True)
class TurnTrace:
    """One billed turn as the engine saw and decided it."""

    turn: int
    tier: str
    learned: float
    lexical: float
    strikes: tuple[str, ...]
    decision: str
    needs_strong: bool


@dataclass(frozen=True, slots=True)
class SessionTrace:
    session_id: str
    archetype: str
    escalated: bool
    first_strong_turn: int | None
    turns: tuple[TurnTrace, ...]


def _decision(trigger: str | None, reason: str | None, audit: Sequence[Any]) -> str:
    """What the engine did on a turn, in a few words (empty when it just served base)."""
    words = []
    for event in audit:
        why = ", ".join(f"{k} {v:+.2f}" for k, v in event.score_reasons[:REASONS_SHOWN])
        words.append(f"{event.kind}({event.trigger})" + (f" [{why}]" if why else ""))
    if not audit and reason:
        words.append(reason)
    elif not audit and trigger:
        words.append(f"stays strong ({trigger})")
    return "; ".join(words)


def session_traces(run: RunResult) -> list[SessionTrace]:
    """Every session of the run, its billed turns in order."""
    out = []
    for sess, records in zip(run.facts.sessions, run.by_session(), strict=True):
        facts = {t.served_index: t for t in sess.turns if t.served_index is not None}
        turns = []
        for rec in records:
            if rec.served_index is None or rec.tier is None:
                continue  # a failed upstream attempt: not a turn
            f = facts[rec.served_index]
            strikes = tuple(s.reason for s in (*f.request_strikes, *f.response_strikes))
            turns.append(
                TurnTrace(
                    turn=rec.served_index,
                    tier=rec.tier,
                    learned=f.learned,
                    lexical=f.delta,
                    strikes=strikes,
                    decision=_decision(rec.trigger, rec.reason, rec.audit),
                    needs_strong=rec.needs_strong,
                )
            )
        first = next((t.turn for t in turns if t.tier == "strong"), None)
        out.append(
            SessionTrace(sess.session_id, sess.archetype, first is not None, first, tuple(turns))
        )
    return out


def select(
    traces: Sequence[SessionTrace], ids: Sequence[str], every: bool, limit: int
) -> list[SessionTrace]:
    """Sessions whose id contains one of `ids`; else the escalated ones (all with
    `every`); at most `limit`."""
    if ids:
        chosen = [t for t in traces if any(i in t.session_id for i in ids)]
    else:
        chosen = [t for t in traces if every or t.escalated]
    return chosen[:limit]


def render(traces: Sequence[SessionTrace], total: int, escalated: int) -> str:
    """A plain-text table per session (what the CLI prints)."""
    lines = [f"{escalated} of {total} sessions escalated; showing {len(traces)}."]
    for s in traces:
        first = f"first strong turn {s.first_strong_turn}" if s.escalated else "never escalated"
        lines += ["", f"session {s.session_id} ({s.archetype}): {len(s.turns)} turns, {first}"]
        lines.append(
            f"  {'turn':>4}  {'tier':<6} {'learned':>7} {'lexical':>7}  strikes / decision"
        )
        for t in s.turns:
            mark = "*" if t.needs_strong else " "
            what = " ".join(filter(None, (",".join(t.strikes), t.decision)))
            lines.append(
                f"  {t.turn:>4}{mark} {t.tier:<6} {t.learned:>7.3f} {t.lexical:>7.3f}  {what}"
            )
    lines += ["", "* a turn the corpus labels needs_strong"]
    return "\n".join(lines)


def as_json(traces: Sequence[SessionTrace]) -> list[dict[str, Any]]:
    return [
        {
            "session_id": s.session_id,
            "archetype": s.archetype,
            "escalated": s.escalated,
            "first_strong_turn": s.first_strong_turn,
            "turns": [
                {
                    "turn": t.turn,
                    "tier": t.tier,
                    "learned": round(t.learned, 4),
                    "lexical": round(t.lexical, 4),
                    "strikes": list(t.strikes),
                    "decision": t.decision,
                    "needs_strong": t.needs_strong,
                }
                for t in s.turns
            ],
        }
        for s in traces
    ]
