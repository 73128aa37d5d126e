"""Strike producers: post-success quality signals that a session is failing.

Class C of the escalation triggers (report §4.1, §7). Agent sessions fail by
looping, not by getting lexically harder, so these signals catch what the
difficulty gate cannot see. Nothing here reads state or logs text.

Request-side strikes report how the previous turn's work went: evidence of *no
progress* (routing.progress) raised by the observations of the request's latest
turn (everything after the last assistant message). A failure alone is not
evidence: agents run a failing reproduction on purpose, edit, then run tests.
What strikes is the same failure surviving edits, the same command failing the
same way again, edits undone and redone, and failures multiplying after edits
with nothing passing. Observations are read protocol-agnostically
(routing.observations): tool results, and user messages that are command
output from a text agent.

Response-side producers read the upstream response and are applied at commit,
affecting the next turn. Infrastructure failure is never capability failure:
429s, 5xx and channel fallbacks are not strikes, so callers feed
`response_strikes` only the final, successful response.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tiergate.core.model import ChatRequest, ChatResponse, Message
from tiergate.routing.actions import is_edit_call, parse_args
from tiergate.routing.observations import latest_turn_bounds
from tiergate.routing.output_shapes import looks_like_error, looks_like_test_failure
from tiergate.routing.progress import Progress
from tiergate.routing.transcript import fingerprint

__all__ = [
    "REQUEST_REASONS",
    "RESPONSE_PRODUCERS",
    "ProgressCache",
    "Strike",
    "is_edit_call",
    "latest_turn",
    "looks_like_error",
    "looks_like_test_failure",
    "request_strikes",
    "response_strikes",
    "turn_id",
]

StrikeSide = Literal["request", "response"]


@dataclass(frozen=True, slots=True)
class Strike:
    """One quality signal. `detail` is a count or tool name, never prompt text."""

    reason: str
    side: StrikeSide
    detail: str = ""


# ---- request side -------------------------------------------------------------


def latest_turn(req: ChatRequest) -> list[Message]:
    """Messages after the last assistant message (all of them on turn one);
    a trailing prefill is skipped (observations.latest_turn_bounds)."""
    start, end = latest_turn_bounds(req.messages)
    return list(req.messages[start:end])


REQUEST_REASONS = (
    "failure_survives_edits",
    "repeated_failing_command",
    "edit_revert_cycle",
    "diverging_failures",
)
"""Request-side strike reasons (routing.progress), in the order they are reported."""


class ProgressCache:
    """The latest fold of each recent conversation, found again by its content.

    An agent's next request is its previous request plus the reply and the new
    turn, so the previous request's fold is the one over the messages before the
    latest assistant reply; extending it reads only the new messages, with no
    session id needed. Keyed by the message count and a few message fingerprints
    (`_prefix_key`); a rewritten history misses and is folded from scratch. One
    entry per conversation (extending pops the old one), bounded, oldest first
    out. A miss only costs a full fold.
    """

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._by_prefix: dict[tuple[int, int], Progress] = {}

    def fold(self, messages: Sequence[Message]) -> Progress:
        n = len(messages)
        if n == 0:
            return Progress()
        key = _prefix_key(messages, n)
        progress = self._by_prefix.get(key)  # a retry of the same request
        if progress is not None:
            return progress
        start, _ = latest_turn_bounds(messages)
        previous = start - 1  # the reply to the previous request, which ended before it
        progress = None
        if previous > 0:
            progress = self._by_prefix.pop(_prefix_key(messages, previous), None)
        if progress is None:
            progress, previous = Progress(), 0
        for i in range(previous, n):
            progress.add(messages[i], i)
        if len(self._by_prefix) >= self.limit:
            with contextlib.suppress(StopIteration, RuntimeError):
                self._by_prefix.pop(next(iter(self._by_prefix)), None)
        self._by_prefix[key] = progress
        return progress


def _prefix_key(messages: Sequence[Message], count: int) -> tuple[int, int]:
    """The identity of `messages[:count]`, from five of its messages: the first
    (often a system prompt every session of an agent shares), the second (the
    task), the middle one and the last two. Sessions of one agent that share a
    prompt and end on the same boilerplate observation still differ in the task or
    the replies; two conversations equal at all five positions but different
    elsewhere would share a fold (the blind spot routing.transcript documents)."""
    picks = {0, min(1, count - 1), count // 2, max(count - 2, 0), count - 1}
    return count, hash(tuple(fingerprint(messages[i]) for i in sorted(picks)))


_progress_cache = ProgressCache()


def request_strikes(req: ChatRequest, progress: Progress | None = None) -> list[Strike]:
    """The request-side strikes of this request's latest turn, one per reason.

    `progress` is the fold over exactly `req.messages` when the caller has one
    (the session's transcript summary keeps it); without it the fold comes from
    the process-wide ProgressCache, so a deep turn still reads only its new
    messages.
    """
    if progress is None:
        progress = _progress_cache.fold(req.messages)
    start, _ = latest_turn_bounds(req.messages)
    found: dict[str, str] = {}
    for stuck in progress.stuck_since(start):
        found.setdefault(stuck.reason, stuck.detail)
    return [Strike(r, "request", found[r]) for r in REQUEST_REASONS if r in found]


def turn_id(req: ChatRequest) -> str:
    """A stable id for this request's turn, for strike deduplication.

    A client retry re-sends the same body and gets the same id, so it cannot
    count twice; the same failure text at a later position in the transcript
    is a new turn and gets a new id. Callers without a client-supplied
    idempotency key pass this as the turn's request id.
    """
    h = hashlib.blake2b(digest_size=8)
    h.update(str(len(req.messages)).encode())
    for m in latest_turn(req):
        h.update(b"\x00" + m.role.encode() + b"\x00" + (m.tool_call_id or "").encode())
        h.update(b"\x01" if m.is_error else b"\x02")
        h.update(m.text().encode("utf-8", "surrogatepass"))
    return h.hexdigest()


# ---- response-side producers --------------------------------------------------


def malformed_tool_arguments(resp: ChatResponse) -> Strike | None:
    """A tool call whose arguments are not a JSON object."""
    for call in resp.tool_calls:
        if not isinstance(parse_args(call.arguments), dict):
            return Strike("malformed_tool_arguments", "response", call.name)
    return None


def empty_completion(resp: ChatResponse) -> Strike | None:
    """The model finished without text or tool calls (thinking alone is empty).

    A content-filter stop is a policy block, not a capability failure, and a
    length stop is `truncated_by_length`'s signal, so neither counts here.
    """
    if resp.finish_reason in ("content_filter", "length"):
        return None
    if resp.tool_calls or resp.text().strip():
        return None
    return Strike("empty_completion", "response")


def truncated_by_length(resp: ChatResponse) -> Strike | None:
    """The completion was cut off by the token limit."""
    if resp.finish_reason == "length":
        return Strike("truncated_by_length", "response")
    return None


RESPONSE_PRODUCERS = (malformed_tool_arguments, empty_completion, truncated_by_length)


def response_strikes(resp: ChatResponse) -> list[Strike]:
    """Every response-side strike of a successful upstream response."""
    return [s for p in RESPONSE_PRODUCERS if (s := p(resp)) is not None]
