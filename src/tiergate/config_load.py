"""Loading a gateway config: the schema's validation, then the checks across
fields and against routing that pydantic cannot express, every problem at once.

Why its own module: those checks parse DSL rules and resolve tier pools
(routing/dsl.py, routing/tiers.py) and read the session-tier settings
(lanes/settings.py), and all of those import the schema in config.py; kept
there, the schema imported routing back at call time (an import cycle).
Here the dependency runs one way: config_load -> routing, lanes -> config.
"""

from __future__ import annotations

import copy
import fnmatch
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tiergate.config import ConfigError, GatewayConfig, RouterConfig, expand_env
from tiergate.lanes.settings import resolve_settings
from tiergate.routing import dsl
from tiergate.routing.tiers import tier_config_problems


def _format_validation(err: ValidationError) -> list[str]:
    problems = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(root)"
        problems.append(f"{loc}: {e['msg']}")
    return problems


def _has_entry(node: Any, part: int | str) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _drop_at(data: Any, loc: tuple[int | str, ...]) -> bool:
    """Delete the deepest entry of `data` that `loc` reaches (pydantic locations
    may end in type tags such as `str` that name no key). True if one was."""
    parent: Any = None
    key: int | str | None = None
    node = data
    for part in loc:
        if not _has_entry(node, part):
            break
        parent, key, node = node, part, node[part]
    if parent is None or key is None:
        return False
    if isinstance(parent, dict):
        del parent[key]
    else:
        parent[key] = {}  # keep later list indexes (and their messages) stable
    return True


def _consequences(data: Any, err: ValidationError, text: str | None) -> list[str]:
    """What else goes wrong once the invalid entries are set aside.

    A typo such as `modles:` is one schema error, but it also leaves the channel
    without models and every router that names them pointing at nothing. Each
    invalid entry is dropped (its default applies) and the rest is checked
    again, so `config check` reports every consequence in one run.
    """
    pruned = copy.deepcopy(data)
    for _ in range(5):  # each pass can only remove entries: a few passes suffice
        dropped = [_drop_at(pruned, tuple(e["loc"])) for e in err.errors()]  # all, not any()
        if not any(dropped):
            return []
        try:
            cfg = GatewayConfig.model_validate(pruned)
        except ValidationError as again:
            err = again
            continue
        return semantic_problems(cfg, text)
    return []


def _pool_refs(router: RouterConfig) -> list[tuple[str, list[str]]]:
    return [
        ("weak_pool", router.weak_pool),
        ("mid_pool", router.mid_pool),
        ("strong_pool", router.strong_pool),
        ("escalation.pool", router.escalation.pool),
        ("allowed_models", router.allowed_models),
    ]


def semantic_problems(cfg: GatewayConfig, text: str | None = None) -> list[str]:
    """Cross-field checks pydantic cannot express: names, references, pools."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, ch in enumerate(cfg.channels):
        if ch.name in seen:
            problems.append(f"channels.{i}.name: duplicate channel name {ch.name!r}")
        seen.add(ch.name)
        if ch.type == "openai_compatible" and not ch.base_url:
            problems.append(f"channels.{i}.base_url: required for type openai_compatible")
        if not ch.keys:
            problems.append(f"channels.{i}.keys: at least one API key is required")
        if any(not k for k in ch.keys):
            problems.append(f"channels.{i}.keys: a key is empty (unset environment variable?)")
        if not ch.models:
            problems.append(f"channels.{i}.models: a channel must expose at least one model")
    models = set(cfg.exposed_models())
    rnames: set[str] = set()
    for i, r in enumerate(cfg.routers):
        where = f"routers.{i}"
        if r.name in rnames:
            problems.append(f"{where}.name: duplicate router name {r.name!r}")
        rnames.add(r.name)
        if r.thresholds.t1 > r.thresholds.t2:
            problems.append(f"{where}.thresholds: t1 must be <= t2")
        t1p, t2p = r.thresholds.t1_percentile, r.thresholds.t2_percentile
        if t1p is not None and t2p is not None and t1p > t2p:
            problems.append(f"{where}.thresholds: t1_percentile must be <= t2_percentile")
        for field_name, pool in _pool_refs(r):
            for ref in pool:
                if ref.startswith("@pool:"):
                    if ref[6:] not in r.pools and ref[6:] not in ("weak", "mid", "strong"):
                        problems.append(f"{where}.{field_name}: unknown pool {ref!r}")
                elif not any(fnmatch.fnmatchcase(m, ref) for m in models):
                    problems.append(f"{where}.{field_name}: {ref!r} matches no exposed model")
        if r.default_model and r.default_model not in models:
            problems.append(f"{where}.default_model: unknown model {r.default_model!r}")
        if r.strategy in ("gated_adaptive", "learned") and not (
            r.weak_pool or r.mid_pool or r.strong_pool
        ):
            problems.append(f"{where}: {r.strategy} needs weak_pool, mid_pool or strong_pool")
        if r.strategy == "dsl" and not r.rules:
            problems.append(f"{where}.rules: the dsl strategy needs at least one rule")
        problems.extend(_router_problems(r, sorted(models), where, i, text))
    wnames = [w.name for w in cfg.workspaces]
    if len(set(wnames)) != len(wnames):
        problems.append("workspaces: duplicate workspace name")
    keys = [k for w in cfg.workspaces for k in w.virtual_keys]
    if len({k.id for k in keys}) != len(keys):
        problems.append("workspaces: duplicate virtual key id")
    if len({k.sha256 for k in keys}) != len(keys):
        problems.append("workspaces: two virtual keys have the same token")
    return problems


def _router_problems(
    router: RouterConfig, exposed: list[str], where: str, index: int, text: str | None
) -> list[str]:
    """Tier pools that resolve to nothing, and DSL rules that do not parse (by
    line and column when the config's YAML text is at hand)."""
    problems = tier_config_problems(router, exposed, where)
    if router.strategy == "dsl" and router.rules:
        try:
            if text is not None:
                dsl.parse_rules_yaml(
                    text,
                    ("routers", index, "rules"),
                    known_models=exposed,
                    known_pools=router.pools,
                )
            else:
                dsl.parse_rules(router.rules, known_models=exposed, known_pools=router.pools)
        except dsl.RuleError as err:
            problems.extend(f"{where}.rules: {p}" for p in err.problems)
    return problems


def config_warnings(
    cfg: GatewayConfig, env: dict[str, str] | None = None, *, session_tiers: bool = True
) -> list[str]:
    """Settings that `serve` accepts but switches off or ignores, one line each.

    `config check` prints these and `serve` logs them, so the two agree on what
    a config will actually do (`session_tiers=False` leaves out the lane
    settings' warning, which the session-tier setup logs itself).
    """
    env = dict(os.environ) if env is None else env
    out: list[str] = []
    if session_tiers:
        tiers = cfg.session_tiers
        _, lanes_warning = resolve_settings(env, tiers.mode, tiers.ttl_seconds, tiers.lease_seconds)
        if lanes_warning is not None:
            out.append(lanes_warning)
    for i, r in enumerate(cfg.routers):
        if r.strategy == "dsl" and r.escalation.mode != "off":
            out.append(
                f"routers.{i}.escalation.mode: ignored for the dsl strategy (its rules pick"
                " models directly; no tier engine, no X-Orca-Session-Tier header)"
            )
    return out


def parse_config(
    data: dict[str, Any], env: dict[str, str] | None = None, text: str | None = None
) -> GatewayConfig:
    """Validate a parsed YAML tree; raise ConfigError listing every problem."""
    if not isinstance(data, dict):
        raise ConfigError(["(root): the config file must be a YAML mapping"])
    expanded = expand_env(data, env)
    try:
        cfg = GatewayConfig.model_validate(expanded)
    except ValidationError as err:
        problems = _format_validation(err)
        problems += [p for p in _consequences(expanded, err, text) if p not in problems]
        raise ConfigError(problems) from None
    problems = semantic_problems(cfg, text)
    if problems:
        raise ConfigError(problems)
    cfg._source = copy.deepcopy(data)
    return cfg


def load_config(path: str | Path, env: dict[str, str] | None = None) -> GatewayConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError([f"{path}: cannot read ({err.strerror})"]) from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ConfigError([f"{path}: YAML syntax error at {where}"]) from None
    return parse_config(data, env, text)
