"""Router strategies: rank a router's candidate models, best first.

Every strategy returns *all* candidates in preference order, so the distributor
can fall back down the list when a model's channels fail. Selection order per
request (report §4, "the gate runs first"): resolve the tier, narrow the
candidates to that tier's pool (`tier_candidates`), rank them (`rank`), and only
then move the session's sticky pin to the front *if it is in that ranked list*
(`apply_pin`). `select` does the three steps. A pin outside the candidate set is
ignored, with or without escalation, so a pin can never drag a session out of
its tier or onto a model the request cannot use.

Pure: no I/O. Bandit arms arrive already loaded (linucb.BanditStore.load).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from tiergate.config import ModelConfig, RouterConfig, Thresholds
from tiergate.core.model import ChatRequest
from tiergate.routing import bands, dsl, learned, linucb
from tiergate.routing.difficulty import DifficultyFeatures, full_transcript_features, score
from tiergate.routing.features import AgentState
from tiergate.routing.tiers import (
    PoolReferenceError,
    TierPools,
    expand_model_refs,
    resolve_tier_pools,
)
from tiergate.routing.transcript import TranscriptSummary, summarize

Band = Literal["weak", "mid", "strong"]
Tier = Literal["base", "strong"]

BLEND_INPUT_SHARE = 0.75
"""Blended price weighting: 3 input tokens per output token, the common convention
for comparing model prices with one number (agent traffic is input-heavy)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A model the router may use, with its configured facts."""

    name: str
    model: ModelConfig

    @property
    def quality(self) -> float:
        return self.model.quality

    @property
    def input_price(self) -> float:
        return self.model.price.input

    @property
    def output_price(self) -> float:
        return self.model.price.output

    @property
    def cached_input_price(self) -> float:
        cached = self.model.price.cached_input
        return 0.1 * self.input_price if cached is None else cached

    @property
    def blended_price(self) -> float:
        """USD per 1M tokens at a 3:1 input:output mix (BLEND_INPUT_SHARE)."""
        return BLEND_INPUT_SHARE * self.input_price + (1 - BLEND_INPUT_SHARE) * self.output_price

    def estimated_cost(
        self, input_tokens: int, output_tokens: int, cached_tokens: int = 0
    ) -> float:
        """USD for a request of this shape (ignores cache-write premiums; see billing)."""
        plain = max(input_tokens - cached_tokens, 0)
        return (
            plain * self.input_price
            + cached_tokens * self.cached_input_price
            + output_tokens * self.output_price
        ) / 1e6


@dataclass(slots=True)
class StrategyContext:
    """Everything a strategy may read about the request being routed.

    `features` are the full-transcript features (the bandit's context). `score` is
    the difficulty the router gates on (gated_adaptive bands, the DSL's
    `difficulty` field); when None it is the full-transcript score, the
    distribution the gated_adaptive thresholds were tuned on (report §6.2).
    A router banding on the learned score (routing.bands) gets the learned score
    instead. `thresholds` are the band edges in force (percentile edges resolved
    by the planner); None means the router's absolute edges.
    `bandit_x` overrides the bandit context vector (linucb.context_vector_for).
    `transcript`, when given, supplies the whole-transcript facts from the session's
    running summary instead of a pass over every message (routing.transcript).
    """

    request: ChatRequest
    router: RouterConfig
    features: DifficultyFeatures | None = None
    score: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    prompt_tokens: int = 0
    agent: AgentState | None = None
    bandit_arms: Mapping[str, linucb.LinUCBArm] | None = None
    bandit_x: np.ndarray | None = None
    rules: Sequence[dsl.Rule] | None = None
    transcript: TranscriptSummary | None = None
    thresholds: Thresholds | None = None

    def summary(self) -> TranscriptSummary:
        """The whole-transcript facts: the session's summary, or one full pass."""
        if self.transcript is None:
            self.transcript = summarize(self.request)
        return self.transcript

    def full_features(self) -> DifficultyFeatures:
        """`features`, or the full-transcript features computed once."""
        if self.features is None:
            self.features = self.summary().features(self.request)
        return self.features

    def gate_score(self) -> float:
        """`score`, or the full-transcript score computed once when none was given."""
        if self.score is None:
            if bands.uses_learned_score(self.router):
                chars = self.transcript.chars if self.transcript is not None else None
                self.score = learned.load_scorer().score(self.request, chars)
            else:
                self.score = score(self.full_features())
        return self.score

    def band_thresholds(self) -> Thresholds:
        """The band edges in force for this request."""
        if self.thresholds is None:
            self.thresholds = bands.static_thresholds(self.router)
        return self.thresholds

    def agent_state(self) -> AgentState:
        """`agent`, or the request's agent state computed once."""
        if self.agent is None:
            self.agent = self.summary().agent_state(self.request)
        return self.agent

    def has_images(self) -> bool:
        return self.summary().images

    def bandit_context(self) -> np.ndarray:
        """The bandit's context vector for this request (`bandit_x` when given)."""
        if self.bandit_x is None:
            self.bandit_x = linucb.context_vector_for(
                self.request, self.full_features(), self.agent_state(), self.has_images()
            )
        return self.bandit_x

    @classmethod
    def build(
        cls,
        req: ChatRequest,
        router: RouterConfig,
        *,
        headers: Mapping[str, str] | None = None,
        bandit_arms: Mapping[str, linucb.LinUCBArm] | None = None,
        rules: Sequence[dsl.Rule] | None = None,
    ) -> StrategyContext:
        features = full_transcript_features(req)
        return cls(
            request=req,
            router=router,
            features=features,
            score=None if bands.uses_learned_score(router) else score(features),
            headers=headers or {},
            prompt_tokens=features.prompt_tokens,
            bandit_arms=bandit_arms,
            rules=rules,
        )


# ---- candidates, pools, tiers ------------------------------------------------------------


def allowed(router: RouterConfig, name: str) -> bool:
    """The model name matches one of the router's allowed_models globs."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in router.allowed_models)


def capable(
    model: ModelConfig, req: ChatRequest, prompt_tokens: int, has_images: bool | None = None
) -> bool:
    """The model can serve this request: tools, images, JSON mode, context window.

    `has_images` saves a pass over the messages when the caller already knows.
    """
    return supports_features(model, req, has_images) and fits_context(model, req, prompt_tokens)


def supports_features(model: ModelConfig, req: ChatRequest, has_images: bool | None = None) -> bool:
    """Tools, JSON mode and images: what the request needs besides room."""
    if req.tools and not model.supports_tools:
        return False
    if req.wants_json() and not model.supports_json:
        return False
    return model.supports_vision or not (req.has_images() if has_images is None else has_images)


def fits_context(model: ModelConfig, req: ChatRequest, prompt_tokens: int) -> bool:
    """The prompt plus the requested output fit the model's context window."""
    return prompt_tokens + (req.max_tokens or 0) <= model.context_window


def allowed_models(
    router: RouterConfig, models: Mapping[str, ModelConfig]
) -> dict[str, ModelConfig]:
    """The router's allowed models among `models`, in `models` order."""
    return {name: m for name, m in models.items() if allowed(router, name)}


def capable_candidates(
    models: Mapping[str, ModelConfig],
    req: ChatRequest,
    prompt_tokens: int,
    has_images: bool | None = None,
) -> list[Candidate]:
    """The models of `models` that can serve `req`, in `models` order."""
    return [
        Candidate(name, m)
        for name, m in models.items()
        if capable(m, req, prompt_tokens, has_images)
    ]


def build_candidates(
    router: RouterConfig,
    models: Mapping[str, ModelConfig],
    req: ChatRequest,
    prompt_tokens: int,
    has_images: bool | None = None,
) -> list[Candidate]:
    """Allowed and capable models, in `models` order."""
    return capable_candidates(allowed_models(router, models), req, prompt_tokens, has_images)


def _band_pools(router: RouterConfig) -> dict[str, list[str]]:
    return {"weak": router.weak_pool, "mid": router.mid_pool, "strong": router.strong_pool}


def resolve_pool(refs: Iterable[str], router: RouterConfig, names: Sequence[str]) -> list[str]:
    """Expand pool refs into names from `names`, in ref order, without duplicates.

    A ref is a model name, a glob ("openai/*") or "@pool:<name>" (router.pools, then
    weak/mid/strong), expanded by tiers.expand_model_refs. Ref order is the
    operator's preference order, so it is kept; names matched by one glob follow
    `names` order. An unknown or cyclic pool (caught at config load) expands to
    nothing here rather than failing a request.
    """
    out: list[str] = []
    for ref in refs:
        try:
            expanded = expand_model_refs(router, [ref], names)
        except PoolReferenceError:
            continue
        out.extend(n for n in expanded if n not in out)
    return out


def tier_candidates(
    candidates: Sequence[Candidate],
    router: RouterConfig,
    tier: Tier,
    pools: TierPools | None = None,
) -> list[Candidate]:
    """Narrow candidates to a tier's pool (tiers.resolve_tier_pools, report §4).

    Pass the `TierPools` resolved at config load when available. May return []
    (e.g. every strong model is down): what to do then is the escalation engine's
    decision, not the strategy's.
    """
    if pools is None:
        try:
            pools = resolve_tier_pools(router, [c.name for c in candidates])
        except PoolReferenceError:
            return []
    keep = set(pools.pool(tier))
    return [c for c in candidates if c.name in keep]


def apply_pin(ranked: Sequence[str], pinned: str | None) -> list[str]:
    """Move the sticky pin to the front, only if it is among the ranked candidates."""
    if pinned is None or pinned not in ranked:
        return list(ranked)
    return [pinned, *(n for n in ranked if n != pinned)]


# ---- the strategies ------------------------------------------------------------------------


def _cheapest(cands: list[Candidate], ctx: StrategyContext) -> list[str]:
    return [c.name for c in sorted(cands, key=lambda c: (c.blended_price, -c.quality))]


def _quality(cands: list[Candidate], ctx: StrategyContext) -> list[str]:
    return [c.name for c in sorted(cands, key=lambda c: (-c.quality, c.blended_price))]


def balanced_utility(cands: Sequence[Candidate], quality_weight: float) -> dict[str, float]:
    """log of (q / q_max)^w / (p / p_max)^(1 - w), per candidate.

    Quality and blended price are normalised by the best/most expensive candidate so
    the trade-off is scale-free: w = 1 is `quality`, w = 0 is `cheapest`, and with
    the default 0.7 a model at half the price must keep about 74 % of the quality
    ((0.5)^(0.3/0.7)). Floors (0.1 % of the maximum) keep free or zero-quality
    models finite; when every price is zero only quality counts.
    """
    q_max = max((c.quality for c in cands), default=0.0) or 1.0
    p_max = max((c.blended_price for c in cands), default=0.0)
    out = {}
    for c in cands:
        q = max(c.quality / q_max, 1e-3)
        p = max(c.blended_price / p_max, 1e-3) if p_max > 0 else 1.0
        out[c.name] = quality_weight * math.log(q) - (1 - quality_weight) * math.log(p)
    return out


def _balanced(cands: list[Candidate], ctx: StrategyContext) -> list[str]:
    utility = balanced_utility(cands, ctx.router.balanced_quality_weight)
    return [c.name for c in sorted(cands, key=lambda c: (-utility[c.name], c.blended_price))]


def gated_band(score_value: float, thresholds: Thresholds) -> Band:
    """score < t1: weak; t1 <= score < t2: mid; score >= t2: strong."""
    if score_value >= thresholds.t2:
        return "strong"
    if score_value >= thresholds.t1:
        return "mid"
    return "weak"


def pool_for_band(router: RouterConfig, band: Band) -> list[str]:
    """The pool refs configured for a band."""
    return list(_band_pools(router)[band])


_BAND_FALLBACK: dict[Band, tuple[Band, ...]] = {
    "weak": ("weak", "mid", "strong"),
    "mid": ("mid", "strong", "weak"),
    "strong": ("strong", "mid", "weak"),
}
"""Band order to try: the scored band first, then the nearest, erring stronger."""


def _gated_adaptive(cands: list[Candidate], ctx: StrategyContext) -> list[str]:
    """The scored band's pool (config order) first, then nearer bands, then the rest.

    With tier narrowing the strong pool is often absent from the base tier; a
    strong-band score then lands on the mid pool, which is the design (§4).
    """
    names = [c.name for c in cands]
    ordered: list[str] = []
    for band in _BAND_FALLBACK[gated_band(ctx.gate_score(), ctx.band_thresholds())]:
        for n in resolve_pool(pool_for_band(ctx.router, band), ctx.router, names):
            if n not in ordered:
                ordered.append(n)
    rest = [c for c in cands if c.name not in ordered]
    return ordered + _balanced(rest, ctx)


def _linucb(cands: list[Candidate], ctx: StrategyContext) -> list[str]:
    """Arms still under linucb.MIN_PULLS first (fewest pulls first: forced
    exploration), then highest UCB under the arm priors (linucb.arm_prior, strength
    by configured quality; each weight's prior worth the arm's ridge, linucb.PRIOR_PRECISION
    for new arms, the learned-score slope linucb.WARM_START_PRECISION); ties keep
    balanced order. On linucb.EXPLORE_SHARE of requests one arm, picked by
    linucb.exploration_pick, goes first instead."""
    x = ctx.bandit_context()
    arms = ctx.bandit_arms or {}
    fresh = linucb.LinUCBArm.fresh(x.shape[0])
    alpha = ctx.router.linucb_alpha
    base_order = _balanced(cands, ctx)
    q = {c.name: c.quality for c in cands}
    q_lo, q_hi = min(q.values(), default=0.0), max(q.values(), default=0.0)

    def strength(name: str) -> float:
        return 0.0 if q_hi <= q_lo else 2.0 * (q[name] - q_lo) / (q_hi - q_lo) - 1.0

    pulls = {n: arms.get(n, fresh).pulls for n in base_order}
    ucb = {
        n: arms.get(n, fresh).ucb(x, alpha, linucb.arm_prior(strength(n), x.shape[0]))
        for n in base_order
    }
    ranked = sorted(base_order, key=lambda n: (min(pulls[n], linucb.MIN_PULLS), -ucb[n]))
    if min(pulls.values(), default=0) >= linucb.MIN_PULLS:
        k = linucb.exploration_pick(x, sum(pulls.values()), len(base_order))
        if k is not None:
            ranked.insert(0, ranked.pop(ranked.index(base_order[k])))
    return ranked


_RULES_CACHE: dict[int, tuple[RouterConfig, tuple[dsl.Rule, ...]]] = {}


def compiled_rules(router: RouterConfig) -> Sequence[dsl.Rule]:
    """The router's rules, parsed once per router config object.

    Keyed by identity (config models are not hashable); the entry keeps the router
    alive so its id cannot be reused. Validate rules at config load with
    dsl.parse_rules / parse_rules_yaml: a bad rule raises RuleError here too.
    """
    entry = _RULES_CACHE.get(id(router))
    if entry is None or entry[0] is not router:
        if len(_RULES_CACHE) >= 256:
            _RULES_CACHE.clear()
        entry = (router, tuple(dsl.parse_rules(router.rules)))
        _RULES_CACHE[id(router)] = entry
    return entry[1]


def _dsl(cands: list[Candidate], ctx: StrategyContext) -> list[str]:
    """First matching rule whose target has a candidate wins; then default, then balanced.

    A rule whose model or pool has no usable candidate (down, incapable, outside
    the tier) is passed over, so the next matching rule can still route.
    """
    rules = ctx.rules if ctx.rules is not None else compiled_rules(ctx.router)
    facts = dsl.RuleFacts(
        ctx.request,
        ctx.headers,
        score=ctx.score,  # None: computed only if a rule reads `difficulty`
        prompt_tokens=ctx.prompt_tokens or None,
        # from the session summary it is cheap; otherwise only if a rule reads it
        agent=ctx.agent_state() if ctx.transcript is not None else ctx.agent,
    )
    names = [c.name for c in cands]
    chosen: list[str] = []
    for rule in rules:
        if rule.when.holds(facts):
            chosen = resolve_pool([rule.use], ctx.router, names)
            if chosen:
                break
    default = ctx.router.default_model
    if default in names and default not in chosen:
        chosen.append(default)
    return chosen + [n for n in _balanced(cands, ctx) if n not in chosen]


StrategyFn = Callable[[list[Candidate], StrategyContext], list[str]]

STRATEGIES: dict[str, StrategyFn] = {
    "cheapest": _cheapest,
    "quality": _quality,
    "balanced": _balanced,
    "gated_adaptive": _gated_adaptive,
    "learned": _gated_adaptive,  # the same bands on the learned score (routing.bands)
    "linucb": _linucb,
    "dsl": _dsl,
}


def rank(strategy_name: str, candidates: Sequence[Candidate], ctx: StrategyContext) -> list[str]:
    """Candidate names best-first under a strategy (duplicates dropped, first kept)."""
    try:
        strategy = STRATEGIES[strategy_name]
    except KeyError:
        raise ValueError(f"unknown strategy {strategy_name!r}") from None
    unique: dict[str, Candidate] = {}
    for c in candidates:
        unique.setdefault(c.name, c)
    return strategy(list(unique.values()), ctx)


def pin_applies(router: RouterConfig, strategy_name: str) -> bool:
    """Session pins apply to session-aware routers on every strategy but dsl, whose
    rules are meant to re-decide every request (report §3)."""
    return router.session_aware and strategy_name != "dsl"


def select(
    candidates: Sequence[Candidate],
    ctx: StrategyContext,
    *,
    tier: Tier | None = None,
    pools: TierPools | None = None,
    pinned: str | None = None,
    strategy_name: str | None = None,
) -> list[str]:
    """Tier narrowing, then ranking, then the pin inside the ranked set (report §4).

    `tier` None means no escalation: the candidates are ranked as given and the pin
    still only applies if it is one of them.
    """
    name = strategy_name or ctx.router.strategy
    if tier is None:
        pool = list(candidates)
    else:
        pool = tier_candidates(candidates, ctx.router, tier, pools)
    ranked = rank(name, pool, ctx)
    return apply_pin(ranked, pinned) if pin_applies(ctx.router, name) else ranked
