"""The `linucb` strategy: a contextual bandit that learns which model pays off.

Disjoint LinUCB (Li et al., 2010): each arm (model) keeps a ridge regression of
reward on the request's context vector x, stored as A^-1 (updated in O(d^2) by
Sherman-Morrison, never inverted) and b. An arm's score is

    theta·x + alpha * sqrt(x^T A^-1 x),      theta = A^-1 b

the predicted reward plus an exploration bonus that shrinks as the arm sees
contexts like x.

Exploration that cannot lock in (issue 17: the plain version settled on one arm
within a few outcomes in every stream order). Each arm's ridge regression shrinks
towards a prior mean instead of 0: theta = A^-1 (b + ridge * prior), the prior
being an optimistic intercept (every arm looks as good as a perfect reply until
it has been tried) and, as warm start, a slope on the learned request score
(routing.learned) that favours the stronger arm on requests that score high. The
prior is applied when scoring, never stored, so it can change without
invalidating stored arms; its precision is the arm's ridge (PRIOR_PRECISION, stored
with the arm since format v2) and WARM_START_PRECISION on the warm-start slope.
On top, every arm is tried `MIN_PULLS` times before the UCB decides, and
`EXPLORE_SHARE` of requests after that explore (forced exploration).

The math here is pure numpy; `BanditStore` persists arms in the shared
StateStore so every gateway instance learns from every other's traffic,
and updates go through `transact` so concurrent instances never lose one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from tiergate.core.model import ChatRequest
from tiergate.routing import learned
from tiergate.routing.difficulty import FEATURE_SPECS, DifficultyFeatures, delta_score
from tiergate.routing.difficulty import full_transcript_features as _full_features
from tiergate.routing.features import AgentState, agent_state
from tiergate.state.base import StateStore, StateUnavailable, Write

log = logging.getLogger(__name__)

FEATURE_NAMES: tuple[str, ...] = (
    "bias",
    *(s.name for s in FEATURE_SPECS),
    "delta_score",
    "has_images",
    "wants_json",
    "log_turns",
    "failing",
    "learned_score",
)
"""Context vector layout. Beyond the six normalised difficulty features:
- bias: constant 1, so each arm learns its base reward (without it a context of
  all zeros predicts 0 for every arm and only exploration decides).
- delta_score: latest-turn difficulty; unlike the full-transcript features it is
  not inflated by session length (report §3.2), so it tells "this turn is hard"
  apart from "this session is long".
- has_images: vision requests are a different task whose quality gap between
  models is unrelated to lexical difficulty.
- wants_json: structured output; cheaper models fail schemas more often.
- log_turns: log(1 + user turns) / log(51), capped at 1; long agent sessions stress
  long-context handling, which differs between models at equal lexical difficulty.
- failing: the latest turn carries errored tool results or a failing test run; a
  failure loop is evidence that the model serving the session is struggling.
- learned_score: the learned request scorer's score of the latest ask (training
  quantile in [0, 1]), the one feature that ranks single questions by need.
Every component is in [0, 1], so no feature dominates the ridge penalty."""

DIM = len(FEATURE_NAMES)
_LOG_TURNS_CAP = math.log(51)
_LEARNED = FEATURE_NAMES.index("learned_score")

OPTIMISTIC_INTERCEPT = 1.0
"""Prior mean of every arm's bias weight: the best reward there is."""
PRIOR_SLOPE = 0.5
"""Warm start: prior weight on learned_score for the strongest candidate (+) and the
weakest (-); the reward gap it implies, 1.0 across the score's range, is the most
the quality term can differ by."""
PRIOR_PRECISION = 10.0
"""The ridge of a fresh arm: every weight's prior counts as this many observations.
Under bandit feedback each arm learns only from the requests it served, a biased
sample of the contexts, and its free fit of twelve weights adds more noise to the
arms' difference than signal (issue 17: on the MMLU development set a prior worth one
observation scored 0.569-0.571, worth ten 0.576-0.580 over 5 stream orders). Arms
stored before it (format v1) keep the ridge of one they were built with."""
WARM_START_PRECISION = 1000.0
"""How firmly the warm start holds: the prior on learned_score's weight counts as this
many observations. With a prior worth one observation the slope washed out within the
first few dozen pulls; at 1,000 the learned scorer's ranking leads until about as many
pulls say otherwise. Applied when scoring, as a rank-one update of the stored A^-1, so
stored arms are unchanged."""
MIN_PULLS = 2 * DIM
"""Forced exploration: every arm is served this many times before the UCB ranks."""
EXPLORE_SHARE = 0.02
"""Forced exploration after that: this share of requests goes to an arm picked by a
hash of the context and the pull count, so an arm whose early estimate came out low
keeps being sampled and cannot be shut out for good (the UCB width alone does not
reopen an arm whose mean estimate sits below the others'). It is a floor, paid on
every request, so it is kept small: the warm start already sends each arm the
requests it is likeliest to win, and 2% keeps every arm sampled everywhere."""


def context_vector(
    full: DifficultyFeatures,
    *,
    delta: float = 0.0,
    has_images: bool = False,
    wants_json: bool = False,
    turns: int = 0,
    failing: bool = False,
    learned_score: float = 0.0,
) -> np.ndarray:
    """The bandit's context vector (FEATURE_NAMES order) from precomputed parts."""
    return np.array(
        [
            1.0,
            *full.normalised,
            min(max(delta, 0.0), 1.0),
            float(has_images),
            float(wants_json),
            min(math.log1p(max(turns, 0)) / _LOG_TURNS_CAP, 1.0),
            float(failing),
            min(max(learned_score, 0.0), 1.0),
        ],
        dtype=np.float64,
    )


def context_vector_for(
    req: ChatRequest,
    full: DifficultyFeatures | None = None,
    agent: AgentState | None = None,
    has_images: bool | None = None,
    learned_score: float | None = None,
) -> np.ndarray:
    """The context vector of a request, computing whatever was not passed in."""
    full = full or _full_features(req)
    if learned_score is None:
        learned_score = learned.load_scorer().score(req)
    agent = agent or agent_state(req)
    return context_vector(
        full,
        delta=delta_score(req),
        has_images=req.has_images() if has_images is None else has_images,
        wants_json=req.wants_json(),
        turns=agent.turns,
        failing=agent.tests_failed or agent.tool_errors > 0,
        learned_score=learned_score,
    )


def exploration_pick(x: np.ndarray, total_pulls: int, arms: int) -> int | None:
    """The index of the arm to explore with on this request, or None (most requests).

    Deterministic (crc32 of the context and the running pull count), so a decision
    can be replayed, yet spread evenly over requests and arms.
    """
    if arms < 2:
        return None
    # rounded: the learned score sums a set, whose order (and last bits) vary by process
    key = np.round(x, 6).tobytes() + total_pulls.to_bytes(8, "little", signed=False)
    h = zlib.crc32(key)
    if (h % 10_000) >= EXPLORE_SHARE * 10_000:
        return None
    return (h // 10_000) % arms


def arm_prior(strength: float, dim: int = DIM) -> np.ndarray:
    """Prior mean of an arm's weights; `strength` in [-1, 1] places the candidate
    between the weakest (-1) and the strongest (+1) of the ranked set."""
    prior = np.zeros(dim)
    prior[0] = OPTIMISTIC_INTERCEPT
    if dim == DIM:
        prior[_LEARNED] = PRIOR_SLOPE * min(max(strength, -1.0), 1.0)
    return prior


@dataclass(slots=True)
class LinUCBArm:
    """One arm's ridge regression state: A^-1 (d x d), b (d), its pull count, and the
    ridge it started from (A = ridge * I + sum of x x^T)."""

    a_inv: np.ndarray
    b: np.ndarray
    pulls: int = 0
    ridge: float = 1.0

    @classmethod
    def fresh(cls, dim: int = DIM, ridge: float = PRIOR_PRECISION) -> LinUCBArm:
        """A = ridge * I: no data yet, the prior's uncertainty in every direction."""
        return cls(a_inv=np.eye(dim) / ridge, b=np.zeros(dim), pulls=0, ridge=ridge)

    @property
    def dim(self) -> int:
        return int(self.b.shape[0])

    @property
    def theta(self) -> np.ndarray:
        return np.asarray(self.a_inv @ self.b)

    def ucb(
        self,
        x: np.ndarray,
        alpha: float,
        prior: np.ndarray | None = None,
        ridge: float | None = None,
        warm_start: float | None = None,
    ) -> float:
        """Predicted reward plus alpha times its standard-error-like width; with a
        prior, the ridge fit shrinks towards `prior` instead of 0 (`ridge`, by
        default the arm's own, is the prior's precision).

        `warm_start` (default WARM_START_PRECISION for a DIM-sized arm with a prior)
        is the prior precision of the learned_score weight: A gains
        (warm_start - ridge) on that diagonal entry (loses it, when below), applied
        to the stored A^-1 by Sherman-Morrison, so the arm's fit is the ridge
        posterior under that prior.
        """
        u = self.a_inv @ x
        if prior is None:
            return float(self.b @ u) + alpha * math.sqrt(max(float(x @ u), 0.0))
        if ridge is None:
            ridge = self.ridge
        b = self.b + ridge * prior
        if warm_start is None:
            warm_start = WARM_START_PRECISION if self.dim == DIM else ridge
        extra = warm_start - ridge
        if extra != 0 and self.dim == DIM:
            g = self.a_inv[:, _LEARNED]  # A^-1 e, e the learned_score axis; g.x = u[e]
            u = u - g * (extra * float(u[_LEARNED]) / (1.0 + extra * float(g[_LEARNED])))
            b[_LEARNED] += extra * prior[_LEARNED]  # b is a fresh array here
        return float(b @ u) + alpha * math.sqrt(max(float(x @ u), 0.0))

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {"v": 2, "a_inv": self.a_inv, "b": self.b, "pulls": self.pulls, "ridge": self.ridge},
            option=orjson.OPT_SERIALIZE_NUMPY,
        )

    @classmethod
    def from_bytes(cls, raw: bytes, dim: int = DIM) -> LinUCBArm:
        """Decode a stored arm; ValueError if it is corrupt or of another dimension.

        Format v1 (before the ridge was stored) was always built on a ridge of 1.
        """
        try:
            data = orjson.loads(raw)
            a_inv = np.array(data["a_inv"], dtype=np.float64)
            b = np.array(data["b"], dtype=np.float64)
            pulls = int(data.get("pulls", 0))
            ridge = float(data.get("ridge", 1.0))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"corrupt bandit arm: {err}") from None
        if a_inv.shape != (dim, dim) or b.shape != (dim,):
            raise ValueError(f"bandit arm has dimension {b.shape}, expected ({dim},)")
        if not (np.isfinite(a_inv).all() and np.isfinite(b).all()):
            raise ValueError("bandit arm holds non-finite numbers")
        if not (math.isfinite(ridge) and ridge > 0):
            raise ValueError(f"bandit arm has ridge {ridge}, expected > 0")
        return cls(a_inv=a_inv, b=b, pulls=pulls, ridge=ridge)


def update(arm: LinUCBArm, x: np.ndarray, reward: float) -> LinUCBArm:
    """A new arm after observing `reward` for context `x` (the input is not mutated).

    Sherman-Morrison: (A + x x^T)^-1 = A^-1 - (A^-1 x)(A^-1 x)^T / (1 + x^T A^-1 x),
    using that A^-1 is symmetric; re-symmetrised to stop rounding drift.
    """
    u = arm.a_inv @ x
    a_inv = arm.a_inv - np.outer(u, u) / (1.0 + float(x @ u))
    a_inv = (a_inv + a_inv.T) / 2.0
    return LinUCBArm(a_inv=a_inv, b=arm.b + reward * x, pulls=arm.pulls + 1, ridge=arm.ridge)


def ucb_scores(arms: Mapping[str, LinUCBArm], x: np.ndarray, alpha: float) -> dict[str, float]:
    return {name: arm.ucb(x, alpha) for name, arm in arms.items()}


def choose(arms: Mapping[str, LinUCBArm], x: np.ndarray, alpha: float) -> str:
    """The arm with the highest UCB; ties go to the first arm in mapping order."""
    if not arms:
        raise ValueError("choose() needs at least one arm")
    scores = ucb_scores(arms, x, alpha)
    return max(scores, key=lambda name: scores[name])


DEFAULT_COST_WEIGHT = 0.3
DEFAULT_COST_REF_USD = 0.01
DEFAULT_PRICE_REF_USD_PER_M = 10.0
"""Reference price for the per-token penalty: a model charging this much per 1M tokens
(input and output together, as billed) pays half the cost weight. It sits at a
frontier model's price, so the penalty separates cheap models from frontier ones
instead of saturating for both."""


def reward(
    success: bool,
    cost_usd: float,
    feedback: float | None = None,
    *,
    tokens: int | None = None,
    cost_weight: float = DEFAULT_COST_WEIGHT,
    cost_ref_usd: float = DEFAULT_COST_REF_USD,
    price_ref_usd_per_m: float = DEFAULT_PRICE_REF_USD_PER_M,
) -> float:
    """Reward of one outcome, in [-cost_weight, 1].

    quality is 1 for a successful reply and 0 for a failed one; client feedback in
    [0, 1], when given, replaces that proxy (a verdict beats a 200 OK). Late feedback
    (a feedback endpoint called after the reply was billed) is one more observation
    for the same context: `reward(True, 0.0, feedback)`, which is just the feedback.

    The cost penalty saturates towards 1, so a cheap model wins only when it is about
    as good, and one outlier request cannot swamp the estimate. With `tokens` (the
    request's billed input + output tokens, what the gateway passes) it prices the
    request per token: p = cost / tokens per 1M, penalty p / (p + price_ref). That is
    what the arms differ by. Without `tokens` it is the request's USD,
    cost / (cost + cost_ref), which grows with the prompt: it then charges the strong
    arm most on exactly the long asks that need it (issue 17: per-token pricing held
    linucb at random on MMLU), so the gateway no longer uses it.
    """
    quality = 1.0 if success else 0.0
    if feedback is not None:
        quality = min(max(float(feedback), 0.0), 1.0)
    cost = max(float(cost_usd), 0.0)
    if tokens is not None:
        if tokens <= 0 or cost == 0:
            return quality
        price = cost / tokens * 1e6
        ref = price_ref_usd_per_m
        penalty = price / (price + ref) if ref > 0 else float(price > 0)
    else:
        penalty = cost / (cost + cost_ref_usd) if cost_ref_usd > 0 else float(cost > 0)
    return quality - cost_weight * penalty


class BanditStore:
    """Bandit arms in a StateStore: one key per (router, model), orjson lists.

    Reads degrade: an unreachable or corrupt store yields fresh arms (routing
    never fails for the bandit's sake). Writes are read-modify-write inside
    `transact`, so two instances updating the same arm both land; within one
    process, updates of an arm queue on a local lock so they never make each other
    retry, leaving optimistic retries for contention between instances.
    """

    def __init__(
        self,
        store: StateStore,
        *,
        prefix: str = "bandit:",
        dim: int = DIM,
        ridge: float = PRIOR_PRECISION,
        ttl: float | None = None,
        retries: int = 32,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.dim = dim
        self.ridge = ridge
        self.ttl = ttl
        self.retries = retries
        self._locks: dict[str, asyncio.Lock] = {}

    def key(self, router: str, arm: str) -> str:
        return f"{self.prefix}{router}:{arm}"

    def _decode(self, raw: bytes | None, where: str) -> LinUCBArm:
        if raw is None:
            return LinUCBArm.fresh(self.dim, self.ridge)
        try:
            return LinUCBArm.from_bytes(raw, self.dim)
        except ValueError as err:
            log.warning("bandit arm %s reset: %s", where, err)
            return LinUCBArm.fresh(self.dim, self.ridge)

    async def load(self, router: str, arms: Sequence[str]) -> dict[str, LinUCBArm]:
        """Every named arm of a router in one round trip; missing ones start fresh."""
        keys = [self.key(router, a) for a in arms]
        try:
            raws = await self.store.get_many(keys)
        except StateUnavailable as err:
            log.warning("bandit state unavailable, exploring from scratch: %s", err)
            raws = [None] * len(keys)
        return {a: self._decode(r, k) for a, k, r in zip(arms, keys, raws, strict=True)}

    async def update(
        self, router: str, arm: str, x: np.ndarray, reward_value: float
    ) -> LinUCBArm | None:
        """Apply one observation on fresh state; None if the store is unavailable."""
        key = self.key(router, arm)

        def apply(current: list[bytes | None]) -> tuple[list[Write], LinUCBArm]:
            updated = update(self._decode(current[0], key), x, reward_value)
            return [Write(key, updated.to_bytes(), self.ttl)], updated

        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self.store.transact([key], apply, retries=self.retries)
        except StateUnavailable as err:  # includes losing every retry to other instances
            log.warning("bandit update for %s dropped: %s", key, err)
            return None

    # ---- late client feedback -------------------------------------------------------

    def _pending_key(self, request_id: str) -> str:
        return f"{self.prefix}pending:{request_id}"

    async def remember(
        self, request_id: str, router: str, arm: str, x: np.ndarray, ttl: float = 3600.0
    ) -> None:
        """Keep a served request's context so client feedback can credit its arm later.

        Best effort: with the store down the feedback window is simply lost.
        """
        record = orjson.dumps(
            {"router": router, "arm": arm, "x": x}, option=orjson.OPT_SERIALIZE_NUMPY
        )
        try:
            await self.store.set(self._pending_key(request_id), record, ttl)
        except StateUnavailable as err:
            log.warning("bandit feedback context not stored: %s", err)

    async def feedback(self, request_id: str, value: float) -> LinUCBArm | None:
        """Credit client feedback (in [0, 1]) to the arm that served `request_id`.

        Exactly once: the pending record is deleted in the same transaction as the
        arm update, so a repeated or concurrent feedback call is a no-op. Returns
        the updated arm, or None when the request is unknown, expired, already
        rated, or the store is unavailable.
        """
        pending = self._pending_key(request_id)
        try:
            raw = await self.store.get(pending)
            if raw is None:
                return None
            info = orjson.loads(raw)
            key = self.key(str(info["router"]), str(info["arm"]))
            x = np.array(info["x"], dtype=np.float64)
        except StateUnavailable as err:
            log.warning("bandit feedback dropped: %s", err)
            return None
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("bandit feedback record for a request is corrupt; ignored")
            return None
        if x.shape != (self.dim,):
            return None
        r = reward(True, 0.0, value)

        def apply(current: list[bytes | None]) -> tuple[list[Write], LinUCBArm | None]:
            if current[0] is None:  # already consumed by a concurrent call
                return [], None
            updated = update(self._decode(current[1], key), x, r)
            return [Write(pending, None), Write(key, updated.to_bytes(), self.ttl)], updated

        try:
            async with self._locks.setdefault(key, asyncio.Lock()):
                return await self.store.transact([pending, key], apply, retries=self.retries)
        except StateUnavailable as err:
            log.warning("bandit feedback for %s dropped: %s", key, err)
            return None
