"""The model catalog Codex CLI reads from `GET /v1/models?client_version=...`.

Codex looks up metadata (context window, shell tool, output truncation,
reasoning levels, instructions) for the model it is told to use; for a name
it does not know, such as `orcarouter/coding`, it warns "Model metadata for
... not found" and falls back to built-in defaults. It fetches a catalog from
a custom provider's `{base_url}/models` (query `client_version`, answer
`{"models": [ModelInfo, ...]}`) only when that provider's token comes from a
command (`[model_providers.<id>.auth]`; with `env_key` it never asks).

A catalog entry replaces Codex's instructions with its `base_instructions`
(an empty one makes Codex send none), and tiergate cannot ship Codex's own.
So the catalog is served only when the operator names the instructions
(`server.codex_instructions_file`); without it the answer is the plain
OpenAI list and Codex keeps its fallback (and its warning). The answer
always keeps the OpenAI list (`object`, `data`) beside `models`, so the same
URL still serves the OpenAI SDK's `models.list()`. See docs/agents.md.
"""

from __future__ import annotations

import fnmatch
import logging
from pathlib import Path
from typing import Any

from tiergate.config import GatewayConfig, RouterConfig

log = logging.getLogger(__name__)

#: Codex's own output-truncation default for tool results, kept as it is.
TRUNCATION_BYTES = 10_000

_cache: dict[str, tuple[float, str]] = {}


def instructions(cfg: GatewayConfig) -> str | None:
    """The configured instructions text (re-read when the file changes), or None."""
    path = cfg.server.codex_instructions_file
    if not path:
        return None
    try:
        mtime = Path(path).stat().st_mtime
        cached = _cache.get(path)
        if cached is None or cached[0] != mtime:
            _cache[path] = (mtime, Path(path).read_text(encoding="utf-8"))
        return _cache[path][1]
    except OSError as err:  # checked at load; a file removed since must not fail /v1/models
        log.warning("codex_instructions_file unreadable", extra={"error": type(err).__name__})
        return None


def catalog_entry(
    slug: str, description: str, priority: int, context_window: int, base_instructions: str
) -> dict[str, Any]:
    """One Codex ModelInfo (its fields as Codex CLI 0.171 reads them)."""
    return {
        "slug": slug,
        "display_name": slug,
        "description": description,
        "default_reasoning_level": None,
        "supported_reasoning_levels": [],
        "shell_type": "shell_command",
        "visibility": "list",
        "supported_in_api": True,
        "priority": priority,
        "upgrade": None,
        "base_instructions": base_instructions,
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
        "default_verbosity": None,
        "apply_patch_tool_type": None,
        "truncation_policy": {"mode": "bytes", "limit": TRUNCATION_BYTES},
        "supports_parallel_tool_calls": False,
        "context_window": context_window,
        "experimental_supported_tools": [],
        "input_modalities": ["text"],
    }


def router_context_window(router: RouterConfig, cfg: GatewayConfig) -> int | None:
    """The smallest context window among the models the router may serve: any of
    them can answer a turn of the session."""
    windows = [
        m.context_window
        for name, m in cfg.exposed_models().items()
        if any(fnmatch.fnmatchcase(name, g) for g in router.allowed_models)
    ]
    return min(windows) if windows else None


def codex_catalog(cfg: GatewayConfig, base_instructions: str) -> list[dict[str, Any]]:
    """Routers first (what an agent is pointed at), then the concrete models."""
    entries: list[dict[str, Any]] = []
    for r in cfg.routers:
        window = router_context_window(r, cfg) if r.enabled else None
        if window is not None:
            name = f"orcarouter/{r.name}"
            text = "tiergate router: the model is chosen per request"
            entries.append(catalog_entry(name, text, len(entries), window, base_instructions))
    for name, m in cfg.exposed_models().items():
        entries.append(
            catalog_entry(name, "tiergate model", len(entries), m.context_window, base_instructions)
        )
    return entries
