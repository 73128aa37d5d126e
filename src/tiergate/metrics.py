"""Prometheus metrics for the whole gateway, on one private registry.

A private registry (not prometheus_client's global one) keeps `/metrics` free of
whatever other imports register and lets tests read exact values. Every
metric is namespaced `tiergate_`, except the standard `process_*` family (CPU,
memory, open files, start time) that dashboards and alerts expect by name.

Label sets are deliberately small and bounded: router, model and channel names
come from configuration, never from the client, so cardinality stays fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tiergate.core.slot_groups import SlotMemo

if TYPE_CHECKING:
    from tiergate.core.model import Usage

NAMESPACE = "tiergate"
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes

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
    "Wall time from request received to last byte sent, by router, model, channel, status.",
    ["router", "model", "channel", "status"],
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
REQUESTS_IN_FLIGHT = Gauge(
    "requests_in_flight",
    "Completion requests received and not yet fully answered (streams until their end).",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
TOKENS_TOTAL = Counter(
    "tokens",
    "Tokens of served replies by channel, model and kind: input (the whole prompt), "
    "cached (the part read from the provider's prompt cache), cache_write, output.",
    ["channel", "model", "kind"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
COST_USD_TOTAL = Counter(
    "cost_usd",
    "Billed cost in USD (cache-aware list prices), by channel and model.",
    ["channel", "model"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
UPSTREAM_KEY_HEALTHY = Gauge(
    "upstream_key_healthy",
    "1 when the key can be used now (enabled, not cooling down, channel enabled), else 0.",
    ["channel", "key_index"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
UPSTREAM_KEY_FAILURES = Gauge(
    "upstream_key_consecutive_failures",
    "Failures in a row on the key (0 after a success).",
    ["channel", "key_index"],
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

# ---- escalation ----------------------------------------------------------------

ESCALATION_EVENTS_TOTAL = Counter(
    "escalation_events",
    "Committed escalation audit events, by router, event kind and trigger.",
    ["router", "event", "trigger"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
ESCALATION_DENIALS_TOTAL = Counter(
    "escalation_denials",
    "Escalations refused by a cap, by router and reason (session_cap, share_cap).",
    ["router", "reason"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
ESCALATED_SHARE = Gauge(
    "escalated_share",
    "Escalated share of the router's trailing-window traffic on its cap basis (0-1).",
    ["router"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
SHARE_CAP_UTILISATION = Gauge(
    "share_cap_utilisation",
    "Escalated share divided by the router's share cap (1 = at the cap).",
    ["router"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)

# ---- session tiers, feedback, config -------------------------------------------

LEASE_CONFLICTS_TOTAL = Counter(
    "session_tier_lease_conflicts",
    "Requests refused 409 session_tier_busy: another request held the lane's lease.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
SESSION_TIER_STORAGE_ERRORS_TOTAL = Counter(
    "session_tier_storage_errors",
    "Lane-store operations that failed because the store was unreachable "
    "(op: acquire, finalize, retry).",
    ["op"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
SESSION_TIER_PENDING_COMPLETIONS = Gauge(
    "session_tier_pending_completions",
    "Lane completions not yet recorded because the lane store was unreachable; "
    "retried until recorded or their lease expires.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
FEEDBACK_TOTAL = Counter(
    "feedback",
    "Client feedback calls, by result (credited, recorded, unknown).",
    ["result"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)

OUTCOMES_TOTAL = Counter(
    "session_outcomes",
    "Session outcome posts (POST /v1/outcomes), by result "
    "(recorded, replaced, refused, unavailable).",
    ["result"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
CONFIG_VERSION = Gauge(
    "config_version",
    "The shared config version live in this process.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
CONFIG_RELOADS_TOTAL = Counter(
    "config_reloads",
    "Config versions switched to (applied) or refused as invalid on this instance.",
    ["result"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
ADMIN_AUTH_FAILURES_TOTAL = Counter(
    "admin_auth_failures",
    "Admin API and /metrics requests refused for a missing or wrong token.",
    ["endpoint"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)

# ---- upstream keys -----------------------------------------------------------

UPSTREAM_KEY_STATE = Gauge(
    "upstream_key_state",
    "1 for each key's current state (ok, cooling_down, auth_failed: disabled by a "
    "401/403 and probed, disabled: by the operator), 0 for the others.",
    ["channel", "key", "state"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
KEY_PROBES_TOTAL = Counter(
    "upstream_key_probes",
    "Background probes of keys a 401/403 disabled (result: answered, refused, failed).",
    ["channel", "result"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
KEY_STATES = ("ok", "cooling_down", "auth_failed", "disabled")


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

# ---- the process ---------------------------------------------------------------

GC_PAUSE_SECONDS = Histogram(
    "gc_pause_seconds",
    "Cycle-collector passes, by generation: a full (2) pass stalls every request in flight.",
    ["generation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
    namespace=NAMESPACE,
    registry=REGISTRY,
)


# ---- the history memos (server.history_cache_mb) ---------------------------------


class HistoryCaches(Collector):
    """The history memos' size and turned-away count, read when scraped: the memos
    are pure and keep their own counts. `sources` names them (set by the app)."""

    def __init__(self) -> None:
        self.sources: Callable[[], Mapping[str, SlotMemo]] = dict

    def collect(self) -> Iterator[Metric]:
        held = GaugeMetricFamily(
            f"{NAMESPACE}_history_cache_bytes",
            "Body bytes each history memo holds (server.history_cache_mb bounds each).",
            labels=["memo"],
        )
        count = GaugeMetricFamily(
            f"{NAMESPACE}_history_cache_conversations",
            "Conversations each history memo holds.",
            labels=["memo"],
        )
        away = CounterMetricFamily(
            f"{NAMESPACE}_history_cache_turned_away",
            "New conversations a history memo did not keep: its bound was full of active"
            " ones. Rising steadily: raise server.history_cache_mb.",
            labels=["memo"],
        )
        for name, memo in self.sources().items():
            held.add_metric([name], memo.bytes_held)
            count.add_metric([name], len(memo))
            away.add_metric([name], memo.turned_away)
        yield from (held, count, away)


HISTORY_CACHES = HistoryCaches()
REGISTRY.register(HISTORY_CACHES)


def observe_request(
    router: str | None,
    model: str | None,
    channel: str | None,
    status: int,
    seconds: float,
) -> None:
    """Count one finished request and its wall time. Label values come from the
    config (the router, model and channel that served), never from the client."""
    labels = (router or "", model or "", channel or "", str(status))
    children = _REQUEST_CHILDREN.get(labels)
    if children is None:
        children = (REQUESTS_TOTAL.labels(*labels), REQUEST_LATENCY_SECONDS.labels(*labels))
        _REQUEST_CHILDREN[labels] = children
    children[0].inc()
    children[1].observe(seconds)


_REQUEST_CHILDREN: dict[tuple[str, str, str, str], tuple[Counter, Histogram]] = {}
"""Labelled children by label values, looked up once each (`labels()` validates
and locks on every call). Bounded: the values come from the config and the
status codes. These metrics are never cleared, so a cached child stays the one
the registry exports."""


def observe_upstream(channel: str, model: str, seconds: float, cache_read_tokens: int) -> None:
    key = (channel, model)
    latency = _UPSTREAM_CHILDREN.get(key)
    if latency is None:
        latency = _UPSTREAM_CHILDREN[key] = UPSTREAM_LATENCY_SECONDS.labels(channel, model)
    latency.observe(seconds)
    if cache_read_tokens > 0:
        # created on the first cache read only: no zero series before one happens
        cached = _CACHE_READ_CHILDREN.get(key)
        if cached is None:
            cached = _CACHE_READ_CHILDREN[key] = CACHE_READ_TOKENS_TOTAL.labels(channel, model)
        cached.inc(cache_read_tokens)


_UPSTREAM_CHILDREN: dict[tuple[str, str], Histogram] = {}
_CACHE_READ_CHILDREN: dict[tuple[str, str], Counter] = {}


_USAGE_CHILDREN: dict[tuple[str, str], list[Counter]] = {}


def observe_usage(channel: str, model: str, usage: Usage, cost_usd: float) -> None:
    """Count a served reply's tokens and cost. The labelled children are looked up
    once per (channel, model): both come from the config, so the cache is bounded."""
    children = _USAGE_CHILDREN.get((channel, model))
    if children is None:
        children = [TOKENS_TOTAL.labels(channel, model, k) for k in _TOKEN_KINDS]
        children.append(COST_USD_TOTAL.labels(channel, model))
        _USAGE_CHILDREN[(channel, model)] = children
    values = (
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        cost_usd,
    )
    for child, value in zip(children, values, strict=True):
        if value > 0:
            child.inc(value)


_TOKEN_KINDS = ("input", "cached", "cache_write", "output")


def observe_escalation_event(
    router: str, kind: str, trigger: str | None, header: str | None
) -> None:
    """One committed audit event; a `denied_cap` also counts as a denial by reason."""
    ESCALATION_EVENTS_TOTAL.labels(router, kind, trigger or "").inc()
    if kind == "denied_cap":
        reason = (header or "").rpartition("denied:")[2] or "unknown"
        ESCALATION_DENIALS_TOTAL.labels(router, reason).inc()


def render() -> tuple[bytes, str]:
    """The exposition body and its content type, for the `/metrics` endpoint."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
