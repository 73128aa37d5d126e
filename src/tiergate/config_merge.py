"""Merging an edited YAML seed over the stored config: the file seeds what it
declares and never deletes what the admin API made.

Why: storing an edited file as the new config, whole, silently dropped every
channel, router and workspace setting created or edited through the admin API.

A three-way merge per object, keyed by section and name (`channels`,
`routers`, `workspaces`: one object per `name`; every other section, such as
`affinity` or `session_tiers`, is one object). With S the stored object, O the
one the previous file declared and N the one the edited file declares:

- N differs from O (the operator edited, or added, it in the file): the file wins.
- N equals O (the file did not touch it): the stored object wins, with every
  admin edit (and an object the admin deleted stays deleted).
- the file removed it (O, no N): deleted if S still equals O (nobody edited it
  through the API), else kept as the admin left it.
- neither file declares it (an object the admin API created): kept.

Pure: no I/O (tiergate.config_store calls it at start-up).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

NAMED_SECTIONS = ("channels", "routers", "workspaces")
_ABSENT = object()


def _named(items: Any) -> dict[str, Any] | None:
    """A list of named objects by name; None when it is not one."""
    if not isinstance(items, list):
        return None
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        out[item["name"]] = item
    return out


def _pick(stored: Any, old: Any, new: Any) -> Any:
    """One object's three-way rule (see the module docstring); _ABSENT = none."""
    if new is not _ABSENT:
        return new if new != old else stored
    if old is not _ABSENT:
        return _ABSENT if stored == old else stored
    return stored


def merge_seed(
    stored: Mapping[str, Any], old_seed: Mapping[str, Any], new_seed: Mapping[str, Any]
) -> dict[str, Any]:
    """The document an edited seed `new_seed` makes of `stored` (see the module docstring)."""
    out: dict[str, Any] = {}
    for section in dict.fromkeys([*stored, *new_seed, *old_seed]):
        s, o, n = (d.get(section, _ABSENT) for d in (stored, old_seed, new_seed))
        picked = _merge_named(s, o, n) if section in NAMED_SECTIONS else _pick(s, o, n)
        if picked is not _ABSENT:
            out[section] = copy.deepcopy(picked)
    return out


def _merge_named(s: Any, o: Any, n: Any) -> Any:
    by = [_named([] if x is _ABSENT else x) for x in (s, o, n)]
    if any(b is None for b in by):  # not a list of named objects: one object
        return _pick(s, o, n)
    ss, oo, nn = (b or {} for b in by)
    merged = []
    for name in dict.fromkeys([*ss, *nn]):  # stored order, then the file's new objects
        item = _pick(ss.get(name, _ABSENT), oo.get(name, _ABSENT), nn.get(name, _ABSENT))
        if item is not _ABSENT:
            merged.append(item)
    return merged
