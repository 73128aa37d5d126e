"""One request's usage record: the usage table's row and the access log line.

Never prompt text: identifiers, token counts, cost and timing only. Every row
has every column, served or failed, because the recorder inserts a batch with
one statement, which needs the same keys in every row.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class UsageRecord:
    request_id: str
    ts: float
    workspace: str
    router: str | None
    model: str | None
    channel: str | None = None
    key_index: int | None = None
    tier: str | None = None
    status: int = 200
    stream: bool = False
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    uncached_cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: int = 1
    session_hash: str | None = None
    error_type: str | None = None
    #: the virtual key presented, if any: its public id (vk_...), never the token
    #: or its hash; None for the workspace's YAML tokens
    virtual_key: str | None = None
    #: the request's path (/v1/chat/completions, /v1/messages, ...): the access log
    #: line's only, not a usage column
    path: str | None = None

    def row(self) -> dict[str, Any]:
        """The usage table's row (`stream` as 0/1, like every integer column)."""
        row = {name: getattr(self, name) for name in _FIELDS}
        row["stream"] = int(self.stream)
        return row

    def log_fields(self) -> dict[str, Any]:
        """The access log line's fields, served or failed, rounded for reading
        (`error_type` None when served). `session_hash` is the usage row's and the
        audit events' (the session's scope), so one session joins across all three."""
        return {
            "request_id": self.request_id,
            "path": self.path,
            "workspace": self.workspace,
            "router": self.router,
            "model": self.model,
            "channel": self.channel,
            "key_index": self.key_index,
            "tier": self.tier,
            "session_hash": self.session_hash,
            "status": self.status,
            "stream": self.stream,
            "latency_ms": round(self.latency_ms, 2),
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 8),
            "error_type": self.error_type,
            "virtual_key": self.virtual_key,
        }


_FIELDS = tuple(f.name for f in dataclasses.fields(UsageRecord) if f.name != "path")
