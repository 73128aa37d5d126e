"""How a requested model name maps to a named router or a concrete model."""

from __future__ import annotations

ROUTER_PREFIXES = ("orcarouter/", "router/", "auto:", "roleplay:")


def router_name(model: str) -> str | None:
    """`orcarouter/<name>`, `router/<name>`, `auto:<name>` (and `roleplay:<name>`, the
    public session-tier form) -> name; else None."""
    for prefix in ROUTER_PREFIXES:
        if model.startswith(prefix) and len(model) > len(prefix):
            return model[len(prefix) :]
    return None
