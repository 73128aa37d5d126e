"""Secrets in admin responses: write-only, shown masked with a stable fingerprint.

Provider keys and workspace tokens go into the gateway and never come out. A
response shows a key as its vendor prefix and last four characters (only when
the key is long enough that four characters reveal little) plus the same
irreversible fingerprint channel pins use, so an operator can tell keys apart
and match them against the provider's console.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tiergate.config import GatewayConfig
from tiergate.core.upstream import ChannelState
from tiergate.routing.affinity import key_fingerprint

#: Below this length even the last four characters are too much of the key.
MIN_LEN_TO_SHOW_TAIL = 16
_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}$")
_PREFIX = re.compile(r"^([A-Za-z]{1,8}-)")


def mask_secret(secret: str) -> str:
    """`sk-…abcd` for a long key, `…` for a short one; never the whole key."""
    if len(secret) < MIN_LEN_TO_SHOW_TAIL:
        return "…"
    match = _PREFIX.match(secret)
    prefix = match.group(1) if match else ""
    return f"{prefix}…{secret[-4:]}"


def secret_source(raw: object) -> str:
    """Where a key comes from: `env:NAME` for a ${NAME} reference, else `literal`."""
    if isinstance(raw, str):
        match = _ENV_REF.match(raw.strip())
        if match:
            return f"env:{match.group(1)}"
    return "literal"


def key_view(
    channel: ChannelState | None,
    index: int,
    key: str,
    raw: object,
    disabled: Sequence[int],
    now: float,
) -> dict[str, Any]:
    """One key: masked, fingerprinted, and its live health on this instance."""
    view: dict[str, Any] = {
        "index": index,
        "masked": mask_secret(key),
        "fingerprint": key_fingerprint(key),
        "source": secret_source(raw),
        "enabled": index not in disabled,
    }
    if channel is not None and index < len(channel.keys):
        ks = channel.keys[index]
        status = ks.status(index in disabled, now)
        view["status"] = status
        view["ejected"] = ks.outlier.ejected  # by outlier detection, until its trial succeeds
        view["cooldown_remaining_seconds"] = round(ks.out_until(now), 3)
        view["consecutive_failures"] = ks.consecutive_failures
        view["last_status"] = ks.last_status or None
        if status == "auth_failed" and ks.probe_backoff > 0:
            view["next_probe_in_seconds"] = round(max(ks.probe_at - now, 0.0), 3)
    return view


def mask_url(url: str) -> str:
    """A URL with any password replaced (redis://:secret@host, postgresql://u:p@h)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "…"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:…@{host}"))


def masked_config(cfg: GatewayConfig, raw_doc: Mapping[str, Any]) -> dict[str, Any]:
    """The live config with every secret masked (keys, tokens, passwords in URLs)."""
    doc = cfg.model_dump(mode="json")
    raw_channels = {c.get("name"): c for c in raw_doc.get("channels") or [] if isinstance(c, dict)}
    for ch_doc, ch in zip(doc["channels"], cfg.channels, strict=True):
        raw_keys = (raw_channels.get(ch.name) or {}).get("keys") or []
        ch_doc["keys"] = [
            {
                "index": i,
                "masked": mask_secret(k),
                "fingerprint": key_fingerprint(k),
                "source": secret_source(raw_keys[i] if i < len(raw_keys) else None),
            }
            for i, k in enumerate(ch.keys)
        ]
    for ws_doc in doc["workspaces"]:
        ws_doc["tokens"] = [mask_secret(t) for t in ws_doc.get("tokens") or []]
        for vk in ws_doc.get("virtual_keys") or []:
            vk.pop("sha256", None)  # not reversible, but nobody needs it: id and prefix
    server = doc["server"]
    for name in ("admin_token", "metrics_token"):
        server[name] = "set" if server.get(name) else None
    doc["state"]["url"] = mask_url(doc["state"]["url"])
    doc["database"]["url"] = mask_url(doc["database"]["url"])
    return doc
