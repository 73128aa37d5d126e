"""Workspace tokens: stored hashed, compared in constant time.

Two kinds: the YAML `tokens` list (plaintext in the config file, hashed here,
in memory only) and virtual keys issued through the admin API, which live in
their own table as a keyed hash (tiergate.virtual_keys_store,
docs/virtual-keys.md). A virtual key authenticates as its workspace and carries
its own limits on top of the workspace's. A workspace's identity in state keys
is a hash of its name, never a token.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from tiergate.config import WorkspaceConfig
from tiergate.gateway.limits import WorkspaceLimits
from tiergate.virtual_keys_store import VirtualKeys


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
    """Maps token hashes to workspaces; the plaintext tokens are not kept.

    `keys` is the instance's live set of virtual keys, shared across config
    reloads (`with_workspaces`), so a key revoked anywhere is refused here as
    soon as that set has caught up, whatever the config version.
    """

    def __init__(self, workspaces: list[WorkspaceConfig], keys: VirtualKeys | None = None) -> None:
        self.keys = keys
        self._workspaces = list(workspaces)
        self._entries: list[tuple[bytes, Workspace]] = []
        self._by_name: dict[str, Workspace] = {}
        for w in workspaces:
            ws = Workspace(
                name=w.name,
                id=hashlib.sha256(b"ws:" + w.name.encode()).hexdigest()[:16],
                share_cap_percent=w.escalation_share_cap_percent,
                limits=WorkspaceLimits(w.rate_limit_rpm, w.budget_usd_per_day),
            )
            self._by_name[w.name] = ws
            for t in w.tokens:
                if t:
                    self._entries.append((token_hash(t), ws))
        self._by_hash = {h: ws for h, ws in self._entries}

    def with_workspaces(self, workspaces: list[WorkspaceConfig]) -> TokenTable:
        """The table for a new config, keeping the live virtual keys."""
        return TokenTable(workspaces, self.keys)

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
            return self._virtual(token)
        for stored, cand in self._entries:
            if cand is ws and hmac.compare_digest(stored, h):
                return ws
        return None

    def _virtual(self, token: str) -> Workspace | None:
        vk = self.keys.lookup(token) if self.keys is not None else None
        ws = self._by_name.get(vk.workspace) if vk is not None else None
        if vk is None or ws is None:
            return None
        return replace(ws, key_id=vk.id, key_limits=vk.limits)


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The caller's token: `Authorization: Bearer` (OpenAI SDK) or `x-api-key` (Anthropic SDK)."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = headers.get("x-api-key")
    return key.strip() if key else None
