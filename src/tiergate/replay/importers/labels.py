"""A label per session, joined from a file: e.g. SWE-bench instance id -> fix-time estimate.

Accepted files: CSV with a header (`--label-key` and `--label-column` name
the columns; by default the first and second), a JSON object
`{key: label}`, or JSONL rows holding both columns. A label becomes the
session's `label`; its `archetype` (the bucket the report breaks figures
down by) is the label's bucket where one is given, else the label itself;
and every turn of a session whose label is hard is marked `needs_strong`
(session-level ground truth: the logs do not say which turn needed it).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson


@dataclass
class Labels:
    by_key: dict[str, str]
    hard: frozenset[str] = frozenset()
    buckets: Mapping[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        return self.by_key.get(key)

    def is_hard(self, label: str) -> bool:
        return label in self.hard or self.buckets.get(label) in self.hard

    def fields(self, label: str) -> dict[str, Any]:
        return {"label": label, "archetype": self.buckets.get(label, label)}


def _rows(path: Path) -> Iterable[Mapping[str, Any]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("{") and "\n{" not in stripped:
        doc = orjson.loads(text)
        return [{"key": k, "label": v} for k, v in doc.items()]
    if stripped.startswith("{"):
        return [orjson.loads(line) for line in text.splitlines() if line.strip()]
    return list(csv.DictReader(text.splitlines()))


def load_labels(
    path: str | Path,
    key_column: str | None = None,
    label_column: str | None = None,
    hard: Iterable[str] = (),
    buckets: Mapping[str, str] | None = None,
    include: Mapping[str, str] | None = None,
) -> Labels:
    """Labels from a file; rows whose `include` columns differ are left out.

    `include={"in_verified": "false"}` keeps a held-out split out of a
    development corpus at the join, before any session is read.
    """
    rows = list(_rows(Path(path)))
    if not rows:
        raise ValueError(f"{path}: no labels")
    columns = list(rows[0])
    key = key_column or ("key" if "key" in columns else columns[0])
    label = label_column or ("label" if "label" in columns else columns[1])
    for c in (key, label, *(include or {})):
        if c not in columns:
            raise ValueError(f"{path}: no column {c!r} (columns: {', '.join(columns)})")
    by_key = {
        str(r[key]): str(r[label])
        for r in rows
        if all(str(r.get(c)) == v for c, v in (include or {}).items())
    }
    return Labels(by_key, frozenset(hard), dict(buckets or {}))
