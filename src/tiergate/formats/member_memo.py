"""Top-level members a conversation resends unchanged (its tools), checked and
parsed once.

Why: a coding agent sends its whole tool list with every request (Claude
Code's tools and system prompt are about 60 KB, issue #30; Codex's and
opencode's lists are alike in kind). The body-decode memo
(formats/body_decode.py) already hands back the *same* objects for members
whose bytes did not change since the conversation's last body, yet the depth
bound walked every schema again and the codec parsed every tool again: 0.64 M
of the 5.44 M instructions of a 100 KB agent request carrying a tool list
shaped like Claude Code's (bench/agent_tools.py, `bench/count_instructions.py
--body-kb 100 --tools claude-code`). Keyed by the member's identity,
the result of the first walk or parse is exact for the next: the decoded
objects are never mutated (the decode memo's rule), and an entry holds its
object, so the identity cannot be reused by another while the entry lives.

Only members of bodies the decode memo works on (`body_decode.MIN_BYTES` and
up) are remembered: a smaller body is decoded afresh each time, so its members
never come back. Bounded by entry count, by the bytes of the bodies they came
from (an upper bound of the members' own) and by idle time. Not thread-safe (one
event loop per process). Pure: no I/O.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from tiergate.core.slot_groups import HISTORY_CACHE_BYTES
from tiergate.formats.body_decode import MIN_BYTES

T = TypeVar("T")

DEFAULT_ENTRIES = 128
DEFAULT_IDLE_SECONDS = 600.0
#: What an entry records about its member: passed the depth bound, or a parse.
CHECKED = "checked"


class MemberMemo:
    """Results about body members, by the member object's identity."""

    __slots__ = ("_bytes", "_clock", "_items", "idle_seconds", "limit", "max_bytes", "min_bytes")

    def __init__(
        self,
        limit: int = DEFAULT_ENTRIES,
        max_bytes: int = HISTORY_CACHE_BYTES,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        min_bytes: int = MIN_BYTES,
    ) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self.idle_seconds = idle_seconds
        self.min_bytes = min_bytes
        self._clock = clock
        self._bytes = 0
        #: (kind, id) -> (last use, the member, the result, the body's bytes)
        self._items: OrderedDict[tuple[str, int], tuple[float, Any, Any, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def get(self, kind: str, member: Any) -> Any | None:
        """The result recorded for this very object, or None."""
        key = (kind, id(member))
        held = self._items.get(key)
        if held is None or held[1] is not member:
            return None
        now = self._clock()
        if now - held[0] > self.idle_seconds:
            self._drop(key)
            return None
        self._items[key] = (now, member, held[2], held[3])
        self._items.move_to_end(key)
        return held[2]

    def put(self, kind: str, member: Any, result: Any, size: int) -> None:
        """Record `result` for `member`, which came in a body of `size` bytes."""
        if size < self.min_bytes or size > self.max_bytes:
            return
        key = (kind, id(member))
        self._drop(key)
        now = self._clock()
        self._items[key] = (now, member, result, size)
        self._bytes += size
        items = self._items
        cutoff = now - self.idle_seconds
        while items:
            used, _, _, _ = next(iter(items.values()))
            if used >= cutoff and len(items) <= self.limit and self._bytes <= self.max_bytes:
                break
            self._drop(next(iter(items)))

    def checked(self, member: Any) -> bool:
        """Did this object pass the depth bound before?"""
        return self.get(CHECKED, member) is not None

    def parsed(self, kind: str, member: Any, size: int, parse: Callable[[], T]) -> T:
        """`parse()`, or what it returned for this very object before."""
        found = self.get(kind, member)
        if found is not None:
            return found
        result = parse()
        self.put(kind, member, result, size)
        return result

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def _drop(self, key: tuple[str, int]) -> None:
        held = self._items.pop(key, None)
        if held is not None:
            self._bytes -= held[3]
