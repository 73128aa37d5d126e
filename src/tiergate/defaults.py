"""Zero-config start: channels from provider keys in the environment, or demo mode.

`tiergate serve` with no config file builds its config here. Provider keys
(`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `DEEPSEEK_API_KEY`,
comma-separated for several keys) each create a channel with that provider's
current models. With none of them set, every channel points at the built-in
provider simulator instead (demo mode).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from tiergate.config import GatewayConfig
from tiergate.config_load import parse_config

ENV_KEYS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
}

#: Exposed models per provider with list prices (USD per 1M tokens).
CATALOGUE: dict[str, dict[str, dict[str, Any]]] = {
    "openai": {
        "openai/gpt-5-mini": {
            "upstream": "gpt-5-mini",
            "quality": 0.62,
            "quality_tier": 1,
            "price": {"input": 0.25, "cached_input": 0.025, "output": 2.0},
        },
        "openai/gpt-5": {
            "upstream": "gpt-5",
            "quality": 0.86,
            "quality_tier": 3,
            "price": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
        },
    },
    "anthropic": {
        "anthropic/claude-haiku-4-5": {
            "upstream": "claude-haiku-4-5",
            "quality": 0.66,
            "quality_tier": 1,
            "price": {"input": 1.0, "output": 5.0},
        },
        # claude-sonnet-4-5 reached end of life on 2026-11-30 (the anthropic SDK warns)
        "anthropic/claude-sonnet-4-6": {
            "upstream": "claude-sonnet-4-6",
            "quality": 0.9,
            "quality_tier": 3,
            "price": {"input": 3.0, "output": 15.0},
        },
    },
    "gemini": {
        "gemini/gemini-2.5-flash": {
            "upstream": "gemini-2.5-flash",
            "quality": 0.64,
            "quality_tier": 1,
            "price": {"input": 0.30, "cached_input": 0.03, "output": 2.5},
        },
    },
    "deepseek": {
        "deepseek/deepseek-chat": {
            "upstream": "deepseek-chat",
            "quality": 0.6,
            "quality_tier": 1,
            "price": {"input": 0.28, "cached_input": 0.028, "output": 0.42},
        },
    },
}

WEAK = [
    "openai/gpt-5-mini",
    "anthropic/claude-haiku-4-5",
    "gemini/gemini-2.5-flash",
    "deepseek/deepseek-chat",
]
STRONG = ["anthropic/claude-sonnet-4-6", "openai/gpt-5"]


def provider_keys(env: Mapping[str, str]) -> dict[str, list[str]]:
    """Provider type -> its keys, from the environment (comma-separated)."""
    out = {}
    for ptype, var in ENV_KEYS.items():
        keys = [k.strip() for k in env.get(var, "").split(",") if k.strip()]
        if keys:
            out[ptype] = keys
    return out


#: The zero-config routers, configured alike: the README's name (`auto`) and the
#: one docs/agents.md's agent setups use (`coding`), so a copy-pasted setup finds
#: its router in demo mode (tests/test_docs_demo.py reads the docs' names).
ROUTER_NAMES = ("auto", "coding")


def _router(models: list[str], name: str) -> dict[str, Any]:
    weak = [m for m in WEAK if m in models]
    strong = [m for m in STRONG if m in models]
    router: dict[str, Any] = {
        "name": name,
        "allowed_models": models,
        "strategy": "gated_adaptive",
        "weak_pool": weak or models[:1],
        "mid_pool": weak or models[:1],
        "strong_pool": strong or models[-1:],
        "default_model": (weak or models)[0],
        "escalation": {"mode": "auto" if strong else "off"},
    }
    return router


def auto_config(
    env: Mapping[str, str],
    *,
    sim_url: str | None = None,
    token: str | None = None,
    admin_token: str | None = None,
) -> GatewayConfig:
    """Config from provider keys; with `sim_url`, demo channels on the simulator."""
    keys = provider_keys(env)
    channels = []
    if sim_url is not None:
        for ptype in ("openai", "anthropic", "gemini", "deepseek"):
            base = sim_url + ("/v1" if ptype in ("openai", "deepseek") else "")
            channels.append(
                {
                    "name": f"sim-{ptype}",
                    "type": ptype,
                    "base_url": base,
                    "keys": [f"demo-{ptype}-key-{i}" for i in (1, 2, 3)],
                    "models": CATALOGUE[ptype],
                }
            )
    else:
        for ptype, pkeys in keys.items():
            channels.append(
                {"name": ptype, "type": ptype, "keys": pkeys, "models": CATALOGUE[ptype]}
            )
    models = [m for ch in channels for m in ch["models"]]
    data: dict[str, Any] = {
        "workspaces": [{"name": "default", "tokens": [token or env.get("TIERGATE_TOKEN", "")]}],
        "channels": channels,
        "routers": [_router(models, name) for name in ROUTER_NAMES] if models else [],
        "demo": sim_url is not None,
    }
    server: dict[str, Any] = {}
    if admin_token:
        server["admin_token"] = admin_token
    if env.get("TIERGATE_CODEX_INSTRUCTIONS_FILE"):
        # the only way to give a config-less gateway Codex's model catalog, which
        # silences Codex's "model metadata not found" warning (docs/agents.md)
        server["codex_instructions_file"] = env["TIERGATE_CODEX_INSTRUCTIONS_FILE"]
    if server:
        data["server"] = server
    if env.get("TIERGATE_DATABASE_URL"):
        data["database"] = {"url": env["TIERGATE_DATABASE_URL"]}
    if env.get("TIERGATE_REDIS_URL"):
        data["state"] = {"backend": "redis", "url": env["TIERGATE_REDIS_URL"]}
    return parse_config(data)


def new_token(prefix: str = "tg-") -> str:
    return prefix + secrets.token_urlsafe(24)
