"""What the simulator served and billed, per API key and model.

The replay end-to-end mode compares the gateway's computed cost with these
counters, so they use billing categories rather than wire fields:
`input_tokens` is uncached input billed at the full price, `cache_read_tokens`
at the cache-read price, `cache_write_tokens` at the cache-write price (its
`cache_write_1h_tokens` part at Anthropic's 1-hour rate), `output_tokens` at
the output price. A request is billed once its usage is decided, before its
reply is sent: a later injected disconnect or malformed body does not refund it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(slots=True)
class Billed:
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    output_tokens: int = 0
    faults: int = 0

    def add(self, other: Billed) -> None:
        for name in Billed.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class SimStats:
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str, str], Billed] = {}

    def clear(self) -> None:
        self._rows.clear()

    def _row(self, provider: str, api_key: str, model: str) -> Billed:
        key = (provider, api_key, model)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = Billed()
        return row

    def record(
        self,
        provider: str,
        api_key: str,
        model: str,
        *,
        prompt_tokens: int,
        cache_read: int,
        cache_write: int,
        cache_write_1h: int,
        output_tokens: int,
    ) -> None:
        row = self._row(provider, api_key, model)
        row.requests += 1
        row.prompt_tokens += prompt_tokens
        row.cached_tokens += cache_read
        row.input_tokens += prompt_tokens - cache_read - cache_write
        row.cache_read_tokens += cache_read
        row.cache_write_tokens += cache_write
        row.cache_write_1h_tokens += cache_write_1h
        row.output_tokens += output_tokens

    def record_fault(self, provider: str, api_key: str, model: str) -> None:
        self._row(provider, api_key, model).faults += 1

    def snapshot(self) -> dict[str, Any]:
        total = Billed()
        entries = []
        for (provider, api_key, model), row in sorted(self._rows.items()):
            total.add(row)
            entries.append(
                {"provider": provider, "api_key": api_key, "model": model, **asdict(row)}
            )
        return {"entries": entries, "totals": asdict(total)}
