"""Bounded observation of the tool-call ids a response hands to the client.

The observer only reads: `observe_events` yields the very event objects it
receives, so the bytes the pipeline renders from them are unchanged. It keeps
at most 128 ids of at most 200 characters. Anything it cannot vouch for makes
the result unknown (None), which blocks a safe boundary until the lane expires
or the policy revision changes: more ids than the bound, an over-long or empty
id, an index that changes id, argument deltas for a call never started, a
stream that ends without its final event, or finish_reason tool_calls with no
id at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from tiergate.core.model import ChatResponse, StreamEnd, StreamEvent, ToolCallDelta, ToolCallStart
from tiergate.lanes.decide import MAX_OUTSTANDING_TOOLS, MAX_TOOL_ID_CHARS


class ToolCallObserver:
    def __init__(
        self, max_ids: int = MAX_OUTSTANDING_TOOLS, max_id_chars: int = MAX_TOOL_ID_CHARS
    ) -> None:
        self.max_ids = max_ids
        self.max_id_chars = max_id_chars
        self._by_index: dict[int, str] = {}
        self._unknown = False
        self.finished = False
        self.finish_reason: str | None = None

    def feed(self, event: StreamEvent) -> None:
        if isinstance(event, StreamEnd):
            self.finished = True
            self.finish_reason = event.finish_reason
            if event.finish_reason == "tool_calls" and not self._by_index:
                self._unknown = True
        elif self._unknown:
            return  # once unknown, always unknown for this response
        elif isinstance(event, ToolCallStart):
            seen = self._by_index.get(event.index)
            if not event.id or len(event.id) > self.max_id_chars:
                self._unknown = True
            elif seen is None:
                if len(self._by_index) >= self.max_ids:
                    self._unknown = True
                else:
                    self._by_index[event.index] = event.id
            elif seen != event.id:
                self._unknown = True  # one call index, two ids: ambiguous
        elif isinstance(event, ToolCallDelta) and event.index not in self._by_index:
            self._unknown = True  # arguments for a call whose id we never saw

    def feed_response(self, response: ChatResponse) -> None:
        """Observe a non-streaming response the same way as a whole stream."""
        for index, call in enumerate(response.tool_calls):
            self.feed(ToolCallStart(index=index, id=call.id, name=call.name))
        self.feed(StreamEnd(finish_reason=response.finish_reason, usage=response.usage))

    def result(self) -> tuple[str, ...] | None:
        """The observed ids in call order, or None when the tool state is unknown."""
        if self._unknown or not self.finished:
            return None
        return tuple(self._by_index[i] for i in sorted(self._by_index))


async def observe_events(
    events: AsyncIterator[StreamEvent], observer: ToolCallObserver
) -> AsyncIterator[StreamEvent]:
    """Pass every event through untouched, showing each to the observer first."""
    async for event in events:
        observer.feed(event)
        yield event


def observe_response(response: ChatResponse) -> tuple[str, ...] | None:
    observer = ToolCallObserver()
    observer.feed_response(response)
    return observer.result()
