"""Background probes of keys a 401/403 disabled, so a key that works again (a
provider-side incident, a billing hold lifted, a transient auth error injected by a
proxy) comes back without an operator.

Before, three faulted 401s disabled every key of a channel and the gateway answered
503 for good. Now the distributor schedules each such key for a probe after
`server.key_probe_seconds`, doubling the wait after every refusal up to
`server.key_probe_max_seconds` (as LiteLLM's cooldown does, but only for keys, never
for the operator's own `disabled_keys`). A probe is one non-streaming request of one
output token to the channel's first model: an answer re-enables the key; another
401/403 backs off further; any other failure (5xx, timeout) says nothing about the
key and is tried again after the same wait. Probes never carry client data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from tiergate import metrics
from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.core.upstream import Target
from tiergate.providers.base import Provider, UpstreamError
from tiergate.routing.distributor import Distributor

log = logging.getLogger(__name__)

#: How often the prober looks for due probes; each probe has its own back-off.
TICK_SECONDS = 1.0


def probe_request(target: Target) -> ChatRequest:
    return ChatRequest(
        model=target.model,
        messages=[Message(role="user", content=[TextPart("ping")])],
        max_tokens=1,
    )


class KeyProber:
    """`current` returns the live distributor and providers (a reload swaps them)."""

    def __init__(
        self,
        current: Callable[[], tuple[Distributor, dict[str, Provider]]],
        tick: float = TICK_SECONDS,
    ) -> None:
        self.current = current
        self.tick = tick
        self._task: asyncio.Task[None] | None = None

    async def probe_due(self) -> None:
        """Probe every key whose probe is due, one after another (few keys, rarely)."""
        distributor, providers = self.current()
        for target in distributor.due_probes():
            channel = target.channel.name
            provider = providers.get(target.channel.config.type)
            if provider is None:
                continue
            try:
                await provider.complete(probe_request(target), target)
            except UpstreamError as err:
                distributor.probe_failed(target, refused=err.disables_key)
                result = "refused" if err.disables_key else "failed"
                metrics.KEY_PROBES_TOTAL.labels(channel, result).inc()
                continue
            distributor.probe_answered(target)
            metrics.KEY_PROBES_TOTAL.labels(channel, "answered").inc()
            log.warning(
                "key re-enabled: it answers again after an auth failure",
                extra={"channel": channel, "key_index": target.key_index},
            )

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self.probe_due()
            except Exception:  # the prober must outlive any one failure
                log.exception("key probe pass failed")

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
