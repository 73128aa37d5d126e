"""A bound on how deep a request body's JSON may nest, checked once after parsing.

orjson parses up to 1,024 levels but encodes only 255, so a tool schema,
`tool_use.input`, `response_format` or embedding input nested 254 to 1,024
levels deep used to parse, then fail when the gateway re-encoded it for the
upstream: a 500. No real schema or tool input comes near MAX_DEPTH levels, so
a body nesting deeper is refused up front with a 400 naming the field, e.g.
"tools[0].function.parameters nested deeper than 64 levels".

The check is one breadth-first pass over the parsed body's containers (no
recursion, no path bookkeeping); only a body found too deep is walked again,
to name its field. Pure.
"""

from __future__ import annotations

from typing import Any

#: Levels of objects and arrays a body may nest, counting the body itself as 1.
MAX_DEPTH = 64

#: Keys whose values are free-form JSON: the field a too-deep path is named by
#: (tool schemas, tool input and arguments, output schemas, embedding input).
FREE_FORM_KEYS = frozenset(
    {"parameters", "input_schema", "input", "schema", "arguments", "metadata"}
)
#: Path segments named when no free-form key is on the path.
FALLBACK_SEGMENTS = 4


def too_deep(body: Any, limit: int = MAX_DEPTH) -> bool:
    """True when some object or array sits more than `limit` levels deep."""
    level = [body] if isinstance(body, dict | list) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            for child in node.values() if type(node) is dict else node:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        level = below
        depth += 1
    return False


def deep_path(node: Any, limit: int = MAX_DEPTH) -> list[str | int] | None:
    """The keys and indexes down to a container more than `limit` levels deep, or
    None. Recursion stops at `limit`, so it never goes deeper than that."""
    if limit <= 0:
        return []
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in items:
        if isinstance(child, dict | list):
            below = deep_path(child, limit - 1)
            if below is not None:
                return [key, *below]
    return None


def field_name(path: list[str | int]) -> str:
    """`tools[0].function.parameters`: the path down to its first free-form key,
    or its first FALLBACK_SEGMENTS segments."""
    end = next(
        (i + 1 for i, seg in enumerate(path) if isinstance(seg, str) and seg in FREE_FORM_KEYS),
        min(len(path), FALLBACK_SEGMENTS),
    )
    out = ""
    for seg in path[:end]:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else seg)
    return out or "body"


def depth_error(body: Any, limit: int = MAX_DEPTH) -> str | None:
    """The 400 message for a body nested deeper than `limit`, or None."""
    if not too_deep(body, limit):
        return None
    path = deep_path(body, limit) or []
    return f"{field_name(path)} nested deeper than {limit} levels"
