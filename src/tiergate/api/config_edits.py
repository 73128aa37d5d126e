"""Edits of the shared config document, one function per admin operation.

Pure: each function mutates the document it is given (a copy of the newest
stored version) or raises AdminError; `ConfigSync.change` then validates the
whole result with `parse_config`, so these functions check only what the
validator cannot know (which entity a path names, write-only fields).

PATCH merges objects one level deep for nested settings (`escalation`,
`thresholds`, `price` inside a model is replaced whole) and replaces lists;
an explicit null sets null (for `escalation.delta_t2` null is meaningful).
"""

from __future__ import annotations

from typing import Any

from tiergate.api.admin_common import AdminError, invalid, not_found
from tiergate.config import MAX_KEY_LENGTH

Doc = dict[str, Any]

#: Channel fields a PATCH may not touch: identity and write-only secrets.
_CHANNEL_PATCH_FORBIDDEN = {
    "name": "a channel cannot be renamed (pins refer to it); create a new one",
    "keys": "keys are write-only: use the keys endpoints",
    "disabled_keys": "use the keys' enable and disable endpoints",
}
_ROUTER_MERGED = ("escalation", "thresholds")


def _entities(doc: Doc, section: str) -> list[dict[str, Any]]:
    items = doc.setdefault(section, [])
    if not isinstance(items, list):
        raise invalid(f"{section}: the stored config is not a list")
    return items


def _find(doc: Doc, section: str, name: str, what: str) -> dict[str, Any]:
    for item in _entities(doc, section):
        if isinstance(item, dict) and item.get("name") == name:
            return item
    raise not_found(f"{what} {name!r}")


def _new_entity(doc: Doc, section: str, body: dict[str, Any], what: str) -> dict[str, Any]:
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise invalid(f"{what} needs a non-empty string 'name'")
    if any(isinstance(i, dict) and i.get("name") == name for i in _entities(doc, section)):
        raise AdminError(409, f"{what} {name!r} already exists", "already_exists")
    entity = dict(body)
    _entities(doc, section).append(entity)
    return entity


# ---- channels ----------------------------------------------------------------------


def find_channel(doc: Doc, name: str) -> dict[str, Any]:
    return _find(doc, "channels", name, "channel")


def add_channel(doc: Doc, body: dict[str, Any]) -> str:
    keys = body.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
        raise invalid("keys: a list of non-empty strings")
    return str(_new_entity(doc, "channels", body, "channel")["name"])


def patch_channel(doc: Doc, name: str, body: dict[str, Any]) -> None:
    channel = find_channel(doc, name)
    problems = [f"{k}: {why}" for k, why in _CHANNEL_PATCH_FORBIDDEN.items() if k in body]
    if problems:
        raise invalid("This channel change is not allowed", problems)
    channel.update(body)


def delete_channel(doc: Doc, name: str) -> None:
    channel = find_channel(doc, name)
    _entities(doc, "channels").remove(channel)


def set_channel_field(doc: Doc, name: str, field: str, value: Any) -> None:
    find_channel(doc, name)[field] = value


# ---- keys ----------------------------------------------------------------------------


def _keys(channel: dict[str, Any]) -> list[Any]:
    keys = channel.setdefault("keys", [])
    if not isinstance(keys, list):
        raise invalid("keys: the stored config is not a list")
    return keys


def _key_index(channel: dict[str, Any], index: int) -> int:
    if not 0 <= index < len(_keys(channel)):
        raise not_found(f"key {index} of channel {channel.get('name')!r}")
    return index


def _valid_key(body: dict[str, Any]) -> str:
    key = body.get("key")
    if not isinstance(key, str) or not key.strip():
        raise invalid("key: a non-empty string is required")
    if key != key.strip():
        raise invalid("key: leading or trailing whitespace")
    if len(key) > MAX_KEY_LENGTH:
        raise invalid(f"key: at most {MAX_KEY_LENGTH} characters")
    return key


def add_key(doc: Doc, name: str, body: dict[str, Any]) -> int:
    """Append a key; returns its index. The key may be a ${VAR} reference."""
    keys = _keys(find_channel(doc, name))
    keys.append(_valid_key(body))
    return len(keys) - 1


def replace_key(doc: Doc, name: str, index: int, body: dict[str, Any]) -> None:
    """Rotate a key in place: the index (and so every pin to it) stays."""
    channel = find_channel(doc, name)
    _keys(channel)[_key_index(channel, index)] = _valid_key(body)


def delete_key(doc: Doc, name: str, index: int) -> str:
    """Remove a key; later keys shift down one index. Returns the removed key."""
    channel = find_channel(doc, name)
    removed = _keys(channel).pop(_key_index(channel, index))
    disabled = [int(i) for i in channel.get("disabled_keys") or []]
    channel["disabled_keys"] = sorted({i - 1 if i > index else i for i in disabled if i != index})
    return str(removed)


def set_key_enabled(doc: Doc, name: str, index: int, enabled: bool) -> str:
    """Returns the key (the caller fingerprints it to clear runtime auth failures)."""
    channel = find_channel(doc, name)
    key = _keys(channel)[_key_index(channel, index)]
    disabled = {int(i) for i in channel.get("disabled_keys") or []}
    if enabled:
        disabled.discard(index)
    else:
        disabled.add(index)
    channel["disabled_keys"] = sorted(disabled)
    return str(key)


# ---- routers and pools ------------------------------------------------------------------


def find_router(doc: Doc, name: str) -> dict[str, Any]:
    return _find(doc, "routers", name, "router")


def add_router(doc: Doc, body: dict[str, Any]) -> str:
    return str(_new_entity(doc, "routers", body, "router")["name"])


def patch_router(doc: Doc, name: str, body: dict[str, Any]) -> None:
    router = find_router(doc, name)
    if "name" in body and body["name"] != name:
        raise invalid("name: a router cannot be renamed (clients call it by name)")
    for key, value in body.items():
        current = router.get(key)
        if key in _ROUTER_MERGED and isinstance(value, dict) and isinstance(current, dict):
            current.update(value)
        else:
            router[key] = value


def delete_router(doc: Doc, name: str) -> None:
    _entities(doc, "routers").remove(find_router(doc, name))


def set_router_enabled(doc: Doc, name: str, enabled: bool) -> None:
    find_router(doc, name)["enabled"] = enabled


def put_pool(doc: Doc, router: str, pool: str, body: dict[str, Any]) -> None:
    models = body.get("models")
    if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
        raise invalid("models: a list of model names, globs or @pool: references")
    pools = find_router(doc, router).setdefault("pools", {})
    pools[pool] = list(models)


def delete_pool(doc: Doc, router: str, pool: str) -> None:
    pools = find_router(doc, router).get("pools") or {}
    if pool not in pools:
        raise not_found(f"pool {pool!r} of router {router!r}")
    del pools[pool]
