"""Literal secrets never reach `config_versions`: stored documents hold a redaction
marker in their place, and each instance restores them from what it knows.

A provider key or workspace token written as a `${VAR}` reference is stored as
that reference (each instance expands it from its own environment). A literal
one is replaced by `redacted:hmac:<64 hex>`, HMAC-SHA256 under the server secret
(tiergate.server_secret), before the row is written, and the literal stays in
the process's vault: the instance's own seed file, plus every literal an admin
change on this instance supplied. Reading a row puts the literals back from the
vault. Keyed, so a database reader cannot test guesses of a token offline; an
older release's `redacted:sha256:<16 hex>` markers are rewritten at start-up
(tiergate.state_upgrade) to the keyed form of that digest, which the vault
knows as well.

A marker no vault entry matches (an admin added a literal key on another
instance) cannot be used here: the key is kept as the marker (the provider refuses
it, so the first 401 disables it at runtime; the document itself is not changed,
so a later change here cannot disable it for the instance that knows it), the
token is dropped (a marker must never authenticate), and one warning says so.
Use `${VAR}` references for secrets managed through the admin API on a fleet.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import logging
import re
from collections.abc import Mapping
from typing import Any

from tiergate.config_store import ConfigRepository, ConfigVersion

log = logging.getLogger(__name__)

#: Every marker starts so; a value starting so is never a usable secret.
MARKER_PREFIX = "redacted:"
KEYED_PREFIX = "redacted:hmac:"
LEGACY_PREFIX = "redacted:sha256:"  # an older release's unkeyed 16-hex markers
_REF = re.compile(r"^\s*\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}\s*$")


def _hmac(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def marker(key: bytes, secret: str) -> str:
    return KEYED_PREFIX + _hmac(key, b"v2:" + secret.encode("utf-8", "surrogatepass"))


def legacy_marker(secret: str) -> str:
    return LEGACY_PREFIX + hashlib.sha256(secret.encode()).hexdigest()[:16]


def upgraded_marker(key: bytes, legacy: str) -> str:
    """What an older release's marker becomes at rest (no literal needed)."""
    return KEYED_PREFIX + _hmac(key, b"v1:" + legacy[len(LEGACY_PREFIX) :].encode())


def is_literal(value: Any) -> bool:
    return isinstance(value, str) and not _REF.match(value) and not value.startswith(MARKER_PREFIX)


def redact(doc: Mapping[str, Any], vault: dict[str, str], key: bytes) -> dict[str, Any]:
    """A copy of `doc` with every literal key and token replaced by its marker;
    the literals are added to `vault` (under their upgraded legacy marker too)."""
    out = copy.deepcopy(dict(doc))
    for section, field in (("channels", "keys"), ("workspaces", "tokens")):
        for item in out.get(section) or []:
            if not isinstance(item, dict) or not isinstance(item.get(field), list):
                continue
            values = []
            for value in item[field]:
                if is_literal(value):
                    vault[upgraded_marker(key, legacy_marker(value))] = value
                    vault[marker(key, value)] = value
                    value = marker(key, value)
                values.append(value)
            item[field] = values
    return out


def restore(doc: Mapping[str, Any], vault: Mapping[str, str]) -> dict[str, Any]:
    """A copy of `doc` with markers replaced from `vault`; an unknown marker's key
    is disabled and its token dropped (see the module docstring)."""
    out = copy.deepcopy(dict(doc))
    for ch in out.get("channels") or []:
        if not isinstance(ch, dict) or not isinstance(ch.get("keys"), list):
            continue
        for i, value in enumerate(ch["keys"]):
            if isinstance(value, str) and value.startswith(MARKER_PREFIX):
                if value in vault:
                    ch["keys"][i] = vault[value]
                else:
                    _warn_once(f"channel {ch.get('name')!r} key {i}")
    for ws in out.get("workspaces") or []:
        if not isinstance(ws, dict) or not isinstance(ws.get("tokens"), list):
            continue
        tokens = []
        for value in ws["tokens"]:
            if isinstance(value, str) and value.startswith(MARKER_PREFIX):
                if value not in vault:
                    _warn_once(f"workspace {ws.get('name')!r} token")
                    continue
                value = vault[value]
            tokens.append(value)
        ws["tokens"] = tokens
    return out


_warned: set[str] = set()


def _warn_once(what: str) -> None:
    if what not in _warned:
        _warned.add(what)
        log.warning(
            "%s is a literal stored redacted by another instance; it is unusable here "
            "(use a ${VAR} reference for secrets managed through the admin API)",
            what,
        )


class SecretsAtRest:
    """A ConfigRepository that stores documents redacted and reads them restored."""

    def __init__(self, inner: ConfigRepository, vault: dict[str, str], key: bytes) -> None:
        self.inner = inner
        self.vault = vault
        self.key = key
        self.persistent = inner.persistent

    @classmethod
    def for_seed(
        cls, inner: ConfigRepository, seed: Mapping[str, Any], key: bytes
    ) -> SecretsAtRest:
        """The vault starts with the literals of this instance's own seed file."""
        vault: dict[str, str] = {}
        redact(seed, vault, key)
        return cls(inner, vault, key)

    def _in(self, row: ConfigVersion) -> ConfigVersion:
        change = self._change(row, self._restored)
        return _with_document(row, restore(row.document, self.vault), change)

    def _change(self, row: ConfigVersion, how: Any) -> dict[str, Any]:
        """The change, its seed row's file document passed through `how` too."""
        seed = row.change.get("seed_document")
        if not isinstance(seed, dict):
            return row.change
        return {**row.change, "seed_document": how(seed)}

    def _restored(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        return restore(doc, self.vault)

    def _redacted(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        return redact(doc, self.vault, self.key)

    async def latest(self) -> ConfigVersion | None:
        row = await self.inner.latest()
        return self._in(row) if row is not None else None

    async def newer_than(self, version: int) -> list[ConfigVersion]:
        return [self._in(r) for r in await self.inner.newer_than(version)]

    async def max_version(self) -> int:
        return await self.inner.max_version()

    async def has_seed(self, seed_hash: str) -> bool:
        return await self.inner.has_seed(seed_hash)

    async def latest_seed(self) -> ConfigVersion | None:
        row = await self.inner.latest_seed()
        return self._in(row) if row is not None else None

    async def insert(self, row: ConfigVersion) -> bool:
        change = self._change(row, self._redacted)
        return await self.inner.insert(_with_document(row, self._redacted(row.document), change))

    async def history(self, limit: int) -> list[ConfigVersion]:
        return [self._in(r) for r in await self.inner.history(limit)]


def _with_document(
    row: ConfigVersion, document: dict[str, Any], change: dict[str, Any]
) -> ConfigVersion:
    return ConfigVersion(
        version=row.version,
        ts=row.ts,
        source=row.source,
        seed_hash=row.seed_hash,
        document=document,
        actor=row.actor,
        change=change,
    )
