"""How many leading items two lists share by identity, in as few passes as possible.

Why: the per-conversation memos (formats/render_memo.py, body_encode.py,
anthropic/render.py) reuse what they did for the previous request's messages
when this request holds the *same objects* (the message memo hands a
conversation's next body the last one's decoded messages). Finding that shared
prefix is a pass over the whole history, several times a request, so its cost
grows with the session (issue #30). The old form, `all(map(is_, ...))` and, when
that failed, `list(map(is_, ...)).index(False)`, made three passes whenever the
last item differed, which is every request whose latest message is edited in
place (Claude Code moves its cache marker; a client retries its tail): 14 us
at 400 messages against 6-7 us here (docs/performance.md, session 24).

Identity, never `==`: equal but distinct objects can render differently (1, 1.0
and True are equal; so are two dicts with their keys in another order). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count
from operator import is_, is_not
from typing import Any

__all__ = ["identical_prefix"]


def identical_prefix(old: Sequence[Any], new: Sequence[Any]) -> int:
    """The number of leading positions at which `old` and `new` hold the same object.

    The usual answers cost one pass in C each: all of the shorter list (a
    conversation that only grew), or all but its last item (one whose latest
    message was replaced). Anything else falls back to a pass that stops at the
    first difference."""
    shorter = min(len(old), len(new))
    if not shorter:
        return 0
    if old[shorter - 1] is new[shorter - 1]:
        if all(map(is_, old, new)):  # map stops at the shorter list
            return shorter
    elif all(map(is_, old[: shorter - 1], new)):
        return shorter - 1
    return next(compress(count(), map(is_not, old, new)), shorter)
