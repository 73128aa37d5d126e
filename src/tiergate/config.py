"""Typed gateway configuration: the schema of the YAML file, every key with a
documented default (see docs/configuration.md).

Loading and the checks across fields live in config_load.py, which raises
ConfigError carrying one message per problem, so `tiergate serve` and
`tiergate config check` can print them all at once. This module imports nothing
of tiergate's: everything else may import it.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
)

from tiergate.core.slot_groups import HISTORY_CACHE_MB

ChannelType = Literal["openai", "anthropic", "gemini", "deepseek", "openai_compatible"]
StrategyName = Literal[
    "cheapest", "quality", "balanced", "linucb", "gated_adaptive", "learned", "dsl"
]

#: Provider prompt-cache windows in seconds, per channel type (report §2).
DEFAULT_CACHE_WINDOWS: dict[str, int] = {
    "openai": 300,
    "anthropic": 300,
    "gemini": 300,
    "deepseek": 3600,
    "openai_compatible": 300,
}
UNMAPPED_CACHE_WINDOW = 300

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "deepseek": "https://api.deepseek.com/v1",
}


def _yaml_off(words: tuple[str, ...]) -> Callable[[Any], Any]:
    """YAML 1.1 reads an unquoted `off` (and `no`, `false`) as false and `on`,
    `yes`, `true` as true. The docs write `mode: off` unquoted, so false means
    "off"; true names no mode, so it is an error that lists the valid words."""

    def convert(value: Any) -> Any:
        if value is False:
            return "off"
        if value is True:
            valid = ", ".join(repr(w) for w in words)
            raise ValueError(
                f"a boolean is not a mode (YAML reads unquoted on/yes/true as true); use {valid}"
            )
        return value

    return convert


EscalationMode = Annotated[
    Literal["off", "manual", "auto"], BeforeValidator(_yaml_off(("off", "manual", "auto")))
]
#: Kept raw (str): a malformed mode disables session tiers with one warning.
SessionTierMode = Annotated[str | None, BeforeValidator(_yaml_off(("off", "sticky")))]


class ConfigError(Exception):
    """Configuration is invalid. `problems` lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OutlierConfig(_Strict):
    """Outlier detection of upstream keys (routing/outlier.py, docs/reliability.md):
    a 5xx, timeout or connection failure ejects a key only on evidence, never more
    than max_ejection_percent of a model's keys, and a trial request brings it back."""

    consecutive_failures: int = Field(5, ge=0)  # failures in a row that eject; 0 = off
    failure_rate_percent: float = Field(50.0, ge=0, le=100)  # in the window; 0 = off
    failure_rate_min_requests: int = Field(10, ge=1)
    window_seconds: float = Field(10.0, gt=0)
    base_ejection_seconds: float = Field(5.0, ge=0)  # x times ejected, up to the max
    max_ejection_seconds: float = Field(300.0, ge=0)
    max_ejection_percent: float = Field(50.0, ge=0, le=100)  # 100 = even the last key


class ServerConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(4000, ge=1, le=65535)
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    request_timeout_seconds: float = Field(600.0, gt=0)
    connect_timeout_seconds: float = Field(10.0, gt=0)
    max_attempts: int = Field(3, ge=1, le=10)
    retry_budget_seconds: float = Field(30.0, gt=0)
    cooldown_seconds: float = Field(30.0, ge=0)
    # a key disabled by a 401/403 is probed after this long, then with doubling
    # back-off up to key_probe_max_seconds; 0 = never probe (operator re-enables)
    key_probe_seconds: float = Field(30.0, ge=0)
    key_probe_max_seconds: float = Field(1800.0, gt=0)
    outlier: OutlierConfig = Field(default_factory=OutlierConfig)
    admin_token: str | None = None  # env TIERGATE_ADMIN_TOKEN wins; unset = admin API off
    metrics_token: str | None = None  # unset = /metrics needs no token
    config_poll_seconds: float = Field(1.0, gt=0, le=60)  # live-reload poll interval
    # MiB of live conversations' last requests each history memo keeps, so a turn
    # decodes, parses and encodes only what it adds (docs/configuration.md); 0 = off
    history_cache_mb: int = Field(HISTORY_CACHE_MB, ge=0, le=65536)
    # Codex CLI's instructions, served in its model catalog (GET /v1/models?client_version=);
    # unset = no catalog (docs/agents.md)
    codex_instructions_file: str | None = None

    @field_validator("codex_instructions_file")
    @classmethod
    def _instructions_readable(cls, path: str | None) -> str | None:
        if path is not None and not (os.path.isfile(path) and os.access(path, os.R_OK)):
            raise ValueError(f"codex_instructions_file {path!r} is not a readable file")
        if path is not None and os.path.getsize(path) == 0:  # Codex would send none at all
            raise ValueError(f"codex_instructions_file {path!r} is empty")
        return path

    @property
    def history_cache_bytes(self) -> int:
        return self.history_cache_mb * 1024 * 1024


class StateConfig(_Strict):
    backend: Literal["memory", "redis"] = "memory"
    url: str = "redis://127.0.0.1:6379/0"
    key_prefix: str = "tg:"
    cluster: bool = False  # url names a seed node of a Redis/Valkey Cluster (docs/deploy.md)


class DatabaseConfig(_Strict):
    url: str = "sqlite:///tiergate.db"


class VirtualKeyConfig(_Strict):
    """A workspace token issued through the admin API (docs/virtual-keys.md). Only
    its SHA-256 is stored; the token itself is shown once, at creation."""

    id: str = Field(pattern=r"^vk_[0-9a-f]{16}$")
    name: str = Field("", max_length=128)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    prefix: str = Field("", max_length=16)  # the token's first characters, to recognise it
    created: float = Field(0.0, ge=0)
    revoked: float | None = Field(None, ge=0)  # when it was revoked; None = valid
    rate_limit_rpm: int | None = Field(None, ge=1)
    budget_usd_per_day: float | None = Field(None, ge=0)  # billed USD per UTC day
    budget_usd_per_month: float | None = Field(None, ge=0)  # billed USD per UTC month


class WorkspaceConfig(_Strict):
    name: str = Field(min_length=1, max_length=128)  # fits the usage/audit columns
    tokens: list[str] = Field(default_factory=list)
    escalation_share_cap_percent: float = Field(30.0, ge=0, le=100)
    rate_limit_rpm: int | None = Field(None, ge=1)  # requests per minute, all instances
    budget_usd_per_day: float | None = Field(None, ge=0)  # billed USD per UTC day
    virtual_keys: list[VirtualKeyConfig] = Field(default_factory=list)


class Price(_Strict):
    """USD per 1M tokens. cached_input defaults to 0.1x input; cache_write to
    the provider type's write multiplier x input (Anthropic 1.25x, else 1x)."""

    input: float = Field(0.0, ge=0)
    output: float = Field(0.0, ge=0)
    cached_input: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


class ModelConfig(_Strict):
    upstream: str | None = None
    quality: float = Field(0.5, ge=0, le=1)
    quality_tier: int = Field(1, ge=0, le=100)
    price: Price = Field(default_factory=Price)
    context_window: int = Field(128_000, ge=1)
    supports_tools: bool = True
    supports_vision: bool = True
    supports_json: bool = True


#: A channel's weight is a relative share of a weighted random pick: 0 drains it,
#: and a thousandfold ratio between two channels is already all-or-nothing.
MAX_CHANNEL_WEIGHT = 1000.0
#: Provider keys are tens to a few hundred characters; a longer "key" is a paste
#: mistake, and it would be sent on every upstream request.
MAX_KEY_LENGTH = 4096


class ChannelConfig(_Strict):
    name: str = Field(min_length=1, max_length=128)  # fits the usage/audit columns
    type: ChannelType
    base_url: str | None = None
    keys: list[Annotated[str, Field(max_length=MAX_KEY_LENGTH)]] = Field(default_factory=list)
    disabled_keys: list[int] = Field(default_factory=list)
    weight: float = Field(1.0, ge=0, le=MAX_CHANNEL_WEIGHT, allow_inf_nan=False)
    priority: int = 0
    enabled: bool = True
    cache_window_seconds: int | None = Field(None, ge=1)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    # PEM file of extra CAs trusted for this channel's origin (docs/deploy.md)
    ca_bundle: str | None = None

    @field_validator("ca_bundle")
    @classmethod
    def _ca_bundle_readable(cls, path: str | None) -> str | None:
        if path is not None and not os.access(path, os.R_OK):
            raise ValueError(f"ca_bundle {path!r} is not a readable file")
        return path

    def resolved_base_url(self) -> str:
        return (self.base_url or DEFAULT_BASE_URLS.get(self.type, "")).rstrip("/")


class EscalationConfig(_Strict):
    mode: EscalationMode = "off"
    pool: list[str] = Field(default_factory=list)
    rollout_percent: float = Field(100.0, ge=0, le=100)
    delta_t2: float | None = Field(0.55, ge=0, le=1)  # explicit null = thresholds.t2
    # what the difficulty trigger reads: the learned session scorer (routing.session_scorer,
    # floored at the lexical score; the default because it measured best on data it was
    # not trained on, docs/session-scorer.md) or the lexical delta score of the latest turn
    scorer: Literal["lexical", "learned"] = "learned"
    percentile: float | None = Field(None, gt=0, lt=100)
    percentile_warmup: int = Field(200, ge=1)
    max_per_session: int = Field(1, ge=0)
    share_cap_percent: float = Field(20.0, ge=0, le=100)
    # requests: the report's basis ("296 of 1,439 requests served strong"); spend
    # for operators who budget money rather than traffic (docs/escalation.md)
    share_cap_basis: Literal["requests", "spend"] = "requests"
    # at the cap: admit refuses NEW escalations by a forecast and never cuts an escalated
    # session off; suppress serves every strong request base (the report's literal rule)
    share_cap_mode: Literal["admit", "suppress"] = "admit"
    share_window_days: int = Field(2, ge=1, le=7)
    share_warmup_requests: int = Field(20, ge=0)
    strike_threshold: int = Field(2, ge=1)
    strike_decay_seconds: float = Field(900.0, gt=0)
    tier_ttl_seconds: float = Field(4 * 3600.0, gt=0)
    deescalate_clean_turns: int = Field(3, ge=1)
    # go-live gate: labelled shadow precision needed before rollout_percent > 0
    gate_min_labels: int = Field(20, ge=1)
    gate_min_precision: float = Field(0.70, ge=0, le=1)
    gate_window_days: int = Field(30, ge=1, le=365)


class Thresholds(_Strict):
    """gated_adaptive's band edges. `t1_percentile` / `t2_percentile`, when set, put
    an edge at that percentile of the router's own recent gate scores (as
    escalation.percentile does); t1 / t2 apply until `percentile_warmup` scores are
    in the window (docs/request-level-benchmarks.md, "Bands")."""

    t1: float = Field(0.35, ge=0, le=1)
    t2: float = Field(0.70, ge=0, le=1)
    t1_percentile: float | None = Field(None, gt=0, lt=100)
    t2_percentile: float | None = Field(None, gt=0, lt=100)
    percentile_warmup: int = Field(200, ge=1)


GateScore = Literal["lexical", "learned"]


class RouterConfig(_Strict):
    name: str = Field(min_length=1, max_length=128)  # fits the usage/audit columns
    enabled: bool = True  # a disabled router answers 503 router_disabled
    allowed_models: list[str] = Field(default_factory=lambda: ["*"])
    strategy: StrategyName = "balanced"
    weak_pool: list[str] = Field(default_factory=list)
    mid_pool: list[str] = Field(default_factory=list)
    strong_pool: list[str] = Field(default_factory=list)
    pools: dict[str, list[str]] = Field(default_factory=dict)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    # the score gated_adaptive bands on; strategy "learned" always uses the learned one
    gate_score: GateScore = "lexical"
    default_model: str | None = None
    session_aware: bool = True
    escalation: EscalationConfig = Field(default_factory=EscalationConfig)
    rules: list[dict[str, Any]] = Field(default_factory=list)
    linucb_alpha: float = Field(0.5, ge=0)
    balanced_quality_weight: float = Field(0.7, ge=0, le=1)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", v):
            raise ValueError("router name may use letters, digits, '_', '.', '-'")
        return v


class SessionTiersConfig(_Strict):
    """Raw mode/TTL on purpose: a malformed value disables the feature with one
    warning (tiergate.lanes.settings), exactly as a malformed environment value."""

    mode: SessionTierMode = None  # off | sticky; env SESSION_TIER_MODE wins
    ttl_seconds: int | str | None = None  # 1-86400; env SESSION_TIER_TTL_SECONDS wins
    lease_seconds: int | str | None = None  # in-flight lease, default 60; env wins
    backend: Literal["memory", "sqlite", "redis"] = "memory"
    sqlite_path: str = "tiergate-session-tiers.db"


class AffinityConfig(_Strict):
    enabled: bool = True
    cache_windows: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_CACHE_WINDOWS))
    unmapped_window_seconds: int = Field(UNMAPPED_CACHE_WINDOW, ge=1)
    long_pin_seconds: int = Field(30 * 24 * 3600, ge=1)


class GatewayConfig(_Strict):
    server: ServerConfig = Field(default_factory=ServerConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    workspaces: list[WorkspaceConfig] = Field(default_factory=list)
    channels: list[ChannelConfig] = Field(default_factory=list)
    routers: list[RouterConfig] = Field(default_factory=list)
    affinity: AffinityConfig = Field(default_factory=AffinityConfig)
    session_tiers: SessionTiersConfig = Field(default_factory=SessionTiersConfig)
    demo: bool = False
    #: The document this config was parsed from, before ${VAR} expansion.
    _source: dict[str, Any] | None = PrivateAttr(default=None)

    # ---- lookups -------------------------------------------------------------

    def exposed_models(self) -> dict[str, ModelConfig]:
        """Every exposed model name -> its facts (first channel that lists it wins)."""
        out: dict[str, ModelConfig] = {}
        for ch in self.channels:
            for name, m in ch.models.items():
                out.setdefault(name, m)
        return out

    def router(self, name: str) -> RouterConfig | None:
        for r in self.routers:
            if r.name == name:
                return r
        return None


_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, env: dict[str, str] | None = None) -> Any:
    """Replace ${VAR} and ${VAR:-default} in every string of a parsed YAML tree."""
    env = os.environ if env is None else env  # type: ignore[assignment]
    assert env is not None
    if isinstance(value, str):
        return _ENV_RE.sub(lambda m: env.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [expand_env(v, env) for v in value]
    if isinstance(value, dict):
        return {k: expand_env(v, env) for k, v in value.items()}
    return value


def source_document(cfg: GatewayConfig) -> dict[str, Any]:
    """The document `cfg` was parsed from, before ${VAR} expansion, so secrets that
    come from the environment stay references when the config is persisted.

    A config built without `parse_config` falls back to its explicitly set fields
    (`exclude_unset` keeps "explicit null" distinct from "left out").
    """
    if cfg._source is not None:
        return copy.deepcopy(cfg._source)
    return cfg.model_dump(mode="json", exclude_unset=True)
