"""A lane lease as its holder keeps it: the data type shared by the request flow
(lanes/flow.py) and the background renewals (lanes/renew.py), below both."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of holding a lane for one request, kept in memory by its holder."""

    scope: str
    lease_id: str
    expires_at: float
    resolved: frozenset[str]  # outstanding tool hashes this request answers
    user_turns: int
    turn_mark: str | None = None  # the request's last user turn (decide._turn_mark)
