"""Workspace tokens: stored hashed, compared in constant time.

Two kinds: the YAML `tokens` list (plaintext in the config file, hashed here)
and virtual keys issued through the admin API (only their SHA-256 is ever
stored; docs/virtual-keys.md). A virtual key authenticates as its workspace
and carries its own limits on top of the workspace's. A workspace's identity
in state keys is a hash of its name, never a token.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from tiergate.config import WorkspaceConfig
from tiergate.gateway.limits import WorkspaceLimits


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True, slots=True)
class Workspace:
    name: str
    id: str  # short stable hash used in state keys and usage rows
    share_cap_percent: float
    limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)
    key_id: str | None = None  # the virtual key presented, if it was one
    key_limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)


class TokenTable:
    """Maps token hashes to workspaces; the plaintext tokens are not kept."""

    def __init__(self, workspaces: list[WorkspaceConfig]) -> None:
        self._entries: list[tuple[bytes, Workspace]] = []
        for w in workspaces:
            ws = Workspace(
                name=w.name,
                id=hashlib.sha256(b"ws:" + w.name.encode()).hexdigest()[:16],
                share_cap_percent=w.escalation_share_cap_percent,
                limits=WorkspaceLimits(w.rate_limit_rpm, w.budget_usd_per_day),
            )
            for t in w.tokens:
                if t:
                    self._entries.append((token_hash(t), ws))
            for vk in w.virtual_keys:
                if vk.revoked is None:
                    limits = WorkspaceLimits(
                        vk.rate_limit_rpm, vk.budget_usd_per_day, vk.budget_usd_per_month
                    )
                    keyed = replace(ws, key_id=vk.id, key_limits=limits)
                    self._entries.append((bytes.fromhex(vk.sha256), keyed))
        self._by_hash = {h: ws for h, ws in self._entries}

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, token: str | None) -> Workspace | None:
        """Constant-time over the presented token's digest: the dict lookup keys
        on a SHA-256 digest, then the match is confirmed with compare_digest."""
        if not token:
            return None
        h = token_hash(token)
        ws = self._by_hash.get(h)
        if ws is None:
            return None
        for stored, cand in self._entries:
            if cand is ws and hmac.compare_digest(stored, h):
                return ws
        return None


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The caller's token: `Authorization: Bearer` (OpenAI SDK) or `x-api-key` (Anthropic SDK)."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = headers.get("x-api-key")
    return key.strip() if key else None
