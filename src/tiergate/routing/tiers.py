"""Tier pools: which exposed models form a router's base tier and its strong tier.

A session is pinned to a model *within a tier* (report §4). The strong tier is
the router's escalation pool (`escalation.pool`, defaulting to `strong_pool`);
the base tier is the router's allowed models minus the strong tier, so a model
listed in both belongs to the strong tier ("The base tier is AllowedModels \\
strong-tier pool"). There is no exception: a strong-tier model is served only
through the strong tier, where the caps bind it. gated_adaptive's banding runs
inside the base tier, so with the strong pool reserved its strong band lands
on the mid pool (report §4).

Everything here is pure and runs once per config load (and in tests); the
request path receives ready `TierPools`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tiergate.config import RouterConfig

POOL_REF_PREFIX = "@pool:"
_BUILTIN_POOLS = ("weak", "mid", "strong")
_MAX_REF_DEPTH = 8


@dataclass(frozen=True, slots=True)
class TierPools:
    """The models of each tier, in exposed-model order, duplicates removed."""

    base: tuple[str, ...]
    strong: tuple[str, ...]

    def pool(self, tier: str) -> tuple[str, ...]:
        return self.strong if tier == "strong" else self.base


class PoolReferenceError(ValueError):
    """A `@pool:` reference is unknown or cyclic."""


def _named_pool(router: RouterConfig, name: str) -> list[str] | None:
    """`pools` entries win over the built-in weak/mid/strong names."""
    if name in router.pools:
        return router.pools[name]
    if name in _BUILTIN_POOLS:
        pool: list[str] = getattr(router, f"{name}_pool")
        return pool
    return None


def expand_model_refs(
    router: RouterConfig, refs: Iterable[str], exposed: Sequence[str], _depth: int = 0
) -> list[str]:
    """Expand globs and `@pool:<name>` references into exposed model names.

    The order follows `exposed` (the config's channel order) so every process
    resolves the same pool in the same order.
    """
    if _depth > _MAX_REF_DEPTH:
        raise PoolReferenceError("pool references nest too deeply (a cycle?)")
    patterns: list[str] = []
    nested: list[str] = []
    for ref in refs:
        if ref.startswith(POOL_REF_PREFIX):
            name = ref[len(POOL_REF_PREFIX) :]
            members = _named_pool(router, name)
            if members is None:
                raise PoolReferenceError(f"unknown pool {ref!r}")
            nested.extend(expand_model_refs(router, members, exposed, _depth + 1))
        else:
            patterns.append(ref)
    chosen = set(nested)
    chosen.update(m for m in exposed if any(fnmatch.fnmatchcase(m, p) for p in patterns))
    return [m for m in exposed if m in chosen]


def resolve_tier_pools(router: RouterConfig, exposed: Sequence[str]) -> TierPools:
    """The base and strong tier pools of `router` over the exposed model names.

    Raises PoolReferenceError for an unknown or cyclic `@pool:` reference
    (load-time validation reports those through `tier_config_problems`).
    """
    esc_refs = router.escalation.pool or router.strong_pool
    strong = expand_model_refs(router, esc_refs, exposed)
    allowed = expand_model_refs(router, router.allowed_models, exposed)
    strong_set = set(strong)
    base = [m for m in allowed if m not in strong_set]
    return TierPools(base=tuple(base), strong=tuple(strong))


def tier_config_problems(
    router: RouterConfig, exposed: Sequence[str], where: str | None = None
) -> list[str]:
    """Load-time problems with a router's tiers, one message each.

    `where` prefixes each message (e.g. "routers.0"). Only routers that
    escalate are checked: with mode off, or for the DSL strategy (whose rules
    pick models directly), tiers are never used.
    """
    where = where or f"routers[{router.name}]"
    if router.escalation.mode == "off" or router.strategy == "dsl":
        return []
    try:
        pools = resolve_tier_pools(router, exposed)
    except PoolReferenceError as err:
        return [f"{where}.escalation.pool: {err}"]
    if not pools.strong and not pools.base:
        return [f"{where}.escalation: neither the base nor the strong tier resolves to any model"]
    problems: list[str] = []
    if not pools.strong:
        problems.append(
            f"{where}.escalation: mode is {router.escalation.mode!r} but the strong tier is empty;"
            " set escalation.pool or strong_pool"
        )
    if not pools.base:
        problems.append(
            f"{where}.escalation: the base tier is empty (every allowed model is in the"
            " strong tier); narrow escalation.pool or widen allowed_models"
        )
    return problems
