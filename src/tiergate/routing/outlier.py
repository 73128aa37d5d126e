"""Outlier detection for upstream keys, in the manner of Envoy's: pure decisions.

Why: one failure used to cool a key (and, once every key was cooling, the whole
channel) for the full cooldown. A 0.3 s provider restart under load then failed
every request, for every tenant, for 10-30 s after the provider was back. Here a
key is ejected only on evidence (`consecutive_failures` in a row, or a failure
rate over a short window), never beyond `max_ejection_percent` of a model's keys
(so a blip never takes the last key out), and comes back through one trial
request (half-open) instead of a timer alone. Each repeat ejection lasts longer:
`base_ejection_seconds` x times ejected, at most `max_ejection_seconds`.

Only the decisions live here, over immutable values and an explicit clock; the
distributor (routing/distributor.py) holds one `Health` per key and applies them.
A 429 is not an outlier signal: rate limits keep their cooldown (Retry-After).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class OutlierPolicy:
    """The thresholds (config: `server.outlier`, docs/configuration.md)."""

    consecutive_failures: int = 5  # 0 = this trigger is off
    failure_rate_percent: float = 50.0  # 0 = this trigger is off
    failure_rate_min_requests: int = 10  # outcomes in the window before the rate counts
    window_seconds: float = 10.0
    base_ejection_seconds: float = 5.0
    max_ejection_seconds: float = 300.0
    max_ejection_percent: float = 50.0  # below 100, one key of a model always stays in


@dataclass(frozen=True, slots=True)
class Health:
    """One key's outlier state. An ejected key is out of rotation until
    `ejected_until`, after which one trial request at a time may go (half-open)."""

    ejected: bool = False
    consecutive: int = 0
    window_start: float = 0.0
    window_requests: int = 0
    window_failures: int = 0
    ejections: int = 0  # times ejected, for the growing ejection time
    ejected_until: float = 0.0
    trial_until: float = 0.0  # a trial is in flight until then (a lost one expires)
    restored_at: float = 0.0  # when the last ejection ended


def admits(h: Health) -> bool:
    """Whether ordinary traffic may use the key."""
    return not h.ejected


def trial_due(h: Health, now: float) -> bool:
    """An ejected key whose ejection time is over and that has no trial in flight."""
    return h.ejected and now >= h.ejected_until and now >= h.trial_until


def claim_trial(p: OutlierPolicy, h: Health, now: float) -> Health:
    """The trial request is on its way: no other until it reports (or expires after
    one ejection period, when its outcome was lost, e.g. a client disconnect)."""
    return replace(h, trial_until=now + ejection_seconds(p, max(h.ejections, 1)))


def ejection_seconds(p: OutlierPolicy, ejections: int) -> float:
    return min(p.base_ejection_seconds * ejections, p.max_ejection_seconds)


def may_eject(p: OutlierPolicy, total: int, ejected: int, usable_others: int) -> bool:
    """Whether one more of a model's `total` keys may be ejected while `ejected` of
    them already are and `usable_others` others would still serve. Below 100 %,
    never the last usable key, whatever the percentage says."""
    if p.max_ejection_percent >= 100:
        return True
    if usable_others < 1:
        return False
    allowed = math.floor(total * p.max_ejection_percent / 100 + 1e-9)
    return ejected + 1 <= allowed


def _count(p: OutlierPolicy, h: Health, now: float, failed: bool) -> Health:
    """One outcome counted. Built by the constructor, not `replace` (which walks
    the fields each call): this runs on every served request."""
    fresh = now - h.window_start >= p.window_seconds or now < h.window_start
    return Health(
        ejected=h.ejected,
        consecutive=h.consecutive + 1 if failed else 0,
        window_start=now if fresh else h.window_start,
        window_requests=1 if fresh else h.window_requests + 1,
        window_failures=int(failed) if fresh else h.window_failures + int(failed),
        ejections=h.ejections,
        ejected_until=h.ejected_until,
        trial_until=h.trial_until,
        restored_at=h.restored_at,
    )


def record_success(p: OutlierPolicy, h: Health, now: float) -> Health:
    """A success resets the run of failures and ends an ejection (a trial, or a
    request that was in flight when the key was ejected: either shows it works)."""
    h = _count(p, h, now, failed=False)
    if h.ejected:
        h = replace(h, ejected=False, ejected_until=0.0, trial_until=0.0, restored_at=now)
    return h


def over_threshold(p: OutlierPolicy, h: Health) -> bool:
    """Whether the counts (after this failure) call for an ejection."""
    if p.consecutive_failures > 0 and h.consecutive >= p.consecutive_failures:
        return True
    if p.failure_rate_percent <= 0 or h.window_requests < p.failure_rate_min_requests:
        return False
    return h.window_failures * 100 >= p.failure_rate_percent * h.window_requests


def record_failure(p: OutlierPolicy, h: Health, now: float, *, allowed: bool) -> Health:
    """Count a failure and eject when a threshold is crossed and `allowed` (the
    max-ejection share, from `may_eject`). A failed trial ejects again, longer.
    A failure of an ejected key outside a trial (a request that was already in
    flight) only counts."""
    was_trial = h.ejected and h.trial_until > now and now >= h.ejected_until
    h = _count(p, h, now, failed=True)
    if h.ejected:
        return _eject(p, h, now) if was_trial else h
    if allowed and over_threshold(p, h):
        return _eject(p, h, now)
    return h


def _eject(p: OutlierPolicy, h: Health, now: float) -> Health:
    ejections = h.ejections
    if not h.ejected and h.restored_at > 0 and now - h.restored_at >= p.max_ejection_seconds:
        ejections = 0  # healthy for a long while: start from the base time again
    ejections += 1
    return replace(
        h,
        ejected=True,
        ejections=ejections,
        ejected_until=now + ejection_seconds(p, ejections),
        trial_until=0.0,
        consecutive=0,
        window_start=now,
        window_requests=0,
        window_failures=0,
    )
