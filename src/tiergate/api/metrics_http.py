"""GET /metrics: Prometheus text exposition.

Open by default, as scrapers expect; with `server.metrics_token` set it needs
`Authorization: Bearer <metrics token>` (the admin token works too). Before
rendering, the share-cap gauges are refreshed from the state store's day
buckets, so every instance reports the fleet-wide share (best effort: a store
outage leaves the last values and counts as a state-store error), and every
key's health is read from this instance's distributor.
"""

from __future__ import annotations

import asyncio
import logging
import time

from starlette.requests import Request
from starlette.responses import Response

from tiergate import metrics
from tiergate.api.admin_common import AdminContext
from tiergate.api.admin_stats import share_status
from tiergate.gateway.auth import bearer_token
from tiergate.routing.distributor import Distributor
from tiergate.state.base import StateUnavailable

log = logging.getLogger(__name__)

#: A scrape must not hang on a slow store.
REFRESH_TIMEOUT_SECONDS = 2.0


async def metrics_endpoint(ctx: AdminContext, request: Request) -> Response:
    if ctx.metrics_token.configured:
        presented = bearer_token(request.headers)
        if not (ctx.metrics_token.matches(presented) or ctx.admin.matches(presented)):
            metrics.ADMIN_AUTH_FAILURES_TOTAL.labels("metrics").inc()
            return Response("metrics token required\n", 401, media_type="text/plain")
    try:
        await asyncio.wait_for(
            share_status(ctx.cfg, ctx.state.store, time.time()), REFRESH_TIMEOUT_SECONDS
        )
    except (StateUnavailable, TimeoutError):
        log.debug("share gauges not refreshed: state store unavailable")
    _observe_key_health(ctx.state.gateway.distributor)
    body, content_type = metrics.render()
    return Response(body, 200, media_type=content_type)


def _observe_key_health(distributor: Distributor) -> None:
    """Every configured key's health now, at scrape time (not per request)."""
    now = distributor.clock()
    metrics.UPSTREAM_KEY_HEALTHY.clear()  # a removed channel or key must disappear
    metrics.UPSTREAM_KEY_FAILURES.clear()
    metrics.UPSTREAM_KEY_STATE.clear()
    for channel, index, current in distributor.key_health():
        for state in metrics.KEY_STATES:
            metrics.UPSTREAM_KEY_STATE.labels(channel, str(index), state).set(int(state == current))
    for ch in distributor.channels:
        usable = ch.config.enabled and ch.cooldown_until <= now
        for i, key in enumerate(ch.keys):
            labels = (ch.name, str(i))
            metrics.UPSTREAM_KEY_HEALTHY.labels(*labels).set(int(usable and ch.key_usable(i, now)))
            metrics.UPSTREAM_KEY_FAILURES.labels(*labels).set(key.consecutive_failures)
