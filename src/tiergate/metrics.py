"""Prometheus metrics for the whole gateway, on one private registry.

A private registry (not prometheus_client's global one) keeps `/metrics` free of
process-collector noise we did not ask for and lets tests read exact values
without interference from other imports. Every metric is namespaced `tiergate_`.

Label sets are deliberately small and bounded: router, model and channel names
come from configuration, never from the client, so cardinality stays fixed.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

NAMESPACE = "tiergate"
REGISTRY = CollectorRegistry(auto_describe=True)

#: Latency buckets covering fast cache hits up to long agent generations.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320, 600)

# ---- requests ----------------------------------------------------------------

REQUESTS_TOTAL = Counter(
    "requests",
    "Requests served, by router (empty for a concrete model), model, channel, status.",
    ["router", "model", "channel", "status"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
REQUEST_LATENCY_SECONDS = Histogram(
    "request_latency_seconds",
    "Wall time from request received to last byte sent, by router.",
    ["router"],
    buckets=LATENCY_BUCKETS,
    namespace=NAMESPACE,
    registry=REGISTRY,
)
UPSTREAM_LATENCY_SECONDS = Histogram(
    "upstream_latency_seconds",
    "Time spent in the upstream provider call, by channel and model.",
    ["channel", "model"],
    buckets=LATENCY_BUCKETS,
    namespace=NAMESPACE,
    registry=REGISTRY,
)
CACHE_READ_TOKENS_TOTAL = Counter(
    "cache_read_tokens",
    "Input tokens the provider served from its prompt cache, by channel and model.",
    ["channel", "model"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)

# ---- state storage -----------------------------------------------------------

STATE_STORE_ERRORS_TOTAL = Counter(
    "state_store_errors",
    "State-store operations that failed because the backend was unreachable.",
    ["backend", "op"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
STATE_STORE_DEGRADED = Gauge(
    "state_store_degraded",
    "1 while the state backend is considered unreachable (stateful features are no-ops).",
    ["backend"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)

# ---- affinity ----------------------------------------------------------------

AFFINITY_DEGRADED_TOTAL = Counter(
    "affinity_degraded",
    "Pin reads or writes skipped because the state backend was unavailable.",
    ["op"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
AFFINITY_PIN_DROPS_TOTAL = Counter(
    "affinity_pin_drops",
    "Channel pins found but not honoured, by reason (disabled, unhealthy, drained, ...).",
    ["reason"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)


def render() -> tuple[bytes, str]:
    """The exposition body and its content type, for the `/metrics` endpoint."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
