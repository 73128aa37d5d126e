"""The neutral request/response model every wire format maps to.

Inbound formats (OpenAI chat completions, Anthropic messages) are parsed into
these types, routing and scoring read only these types, and upstream adapters
render them into the provider's format. Keeping one model means one scorer,
one strike detector and one cost function for every client format.

Plain slotted dataclasses: cheap to build on the hot path, easy to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "tool", "system"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error"]


@dataclass(slots=True)
class TextPart:
    text: str
    cache_control: dict[str, Any] | None = None
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ImagePart:
    """An image by URL, or inline base64 data with its media type."""

    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    type: Literal["image"] = "image"


@dataclass(slots=True)
class ThinkingPart:
    """Model reasoning. Only Anthropic can carry it upstream; others drop it."""

    text: str
    signature: str | None = None
    redacted: bool = False
    type: Literal["thinking"] = "thinking"


@dataclass(slots=True)
class RawBlock:
    """A content block the neutral model does not name (a server tool's result, a
    document, a newer block type), kept verbatim. Only an upstream of the same
    format as the client (`source`) receives it; the others drop it."""

    block: dict[str, Any]
    source: str = "anthropic"
    type: Literal["raw"] = "raw"


Part = TextPart | ImagePart | ThinkingPart | RawBlock

FOLDED_SYSTEM_OPEN = "<system>\n"
FOLDED_SYSTEM_CLOSE = "\n</system>"


def folded_system_text(m: Message) -> str:
    """A mid-conversation system message as clearly marked user-turn text, for an
    upstream that has no system role inside the conversation."""
    return f"{FOLDED_SYSTEM_OPEN}{m.text()}{FOLDED_SYSTEM_CLOSE}"


@dataclass(slots=True)
class ToolCall:
    """A call the assistant made. `arguments` is the raw JSON text, kept verbatim."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class Message:
    """One conversation message.

    role "tool" is a tool result: `tool_call_id` names the call it answers,
    `is_error` marks a failed tool run (Anthropic `is_error`, or inferred).
    role "system" is an instruction the client placed inside the conversation
    (after the first user or assistant message; earlier ones join
    `ChatRequest.system`). It is not a user ask: scorers skip it, and each
    upstream renders it in place or folds it into a user turn (docs/conversion.md).
    """

    role: Role
    content: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False
    name: str | None = None
    # a system message as the client sent it (with clear_at, output_config, ...),
    # for an upstream of the client's own format; None for every other message
    raw: dict[str, Any] | None = None

    def text(self) -> str:
        """All text parts joined, the form the scorers and strike producers read."""
        content = self.content
        if len(content) == 1:  # the common case, without a join: called per message
            part = content[0]
            return part.text if isinstance(part, TextPart) else ""
        return "".join(p.text for p in content if isinstance(p, TextPart))


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    cache_control: dict[str, Any] | None = None
    strict: bool | None = None  # OpenAI strict function schemas; None = not stated
    # A provider-defined tool (Anthropic web_search, bash, ...) as the client sent
    # it: forwarded to an upstream of that format only, dropped by the others.
    native: dict[str, Any] | None = None


@dataclass(slots=True)
class ChatRequest:
    """A provider-neutral chat request.

    `system` holds system and developer instructions. `extra` carries fields a
    format has that the neutral model does not name; they are forwarded only
    when the upstream speaks the same format, which `source_format` ("openai" or
    "anthropic", set by the inbound parser) records. `parallel_tool_calls` is
    OpenAI's flag and the inverse of Anthropic's `disable_parallel_tool_use`.
    `betas` are the `anthropic-beta` values an Anthropic client sent and
    `beta_query` its `?beta=true`; both go to Anthropic upstreams only.
    """

    model: str
    messages: list[Message]
    system: list[TextPart] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    response_format: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    user: str | None = None
    prompt_cache_key: str | None = None
    thinking: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    source_format: str | None = None
    parallel_tool_calls: bool | None = None
    betas: tuple[str, ...] = ()
    beta_query: bool = False

    def system_text(self) -> str:
        return "\n".join(p.text for p in self.system)

    def has_images(self) -> bool:
        return any(isinstance(p, ImagePart) for m in self.messages for p in m.content)

    def wants_json(self) -> bool:
        rf = self.response_format
        return rf is not None and rf.get("type") != "text"


@dataclass(slots=True)
class Usage:
    """Normalised token usage.

    `input_tokens` is the whole prompt (cached + written + plain), as OpenAI
    reports `prompt_tokens`; `cache_read_tokens` and `cache_write_tokens` are
    the parts of it served from or written to the provider's prompt cache.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)


@dataclass(slots=True)
class ChatResponse:
    id: str
    model: str
    content: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    created: int = 0

    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


# ---- streaming: the neutral event sequence every SSE dialect maps to ----------


@dataclass(slots=True)
class StreamStart:
    id: str
    model: str
    input_tokens: int = 0
    type: Literal["start"] = "start"


@dataclass(slots=True)
class TextDelta:
    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ThinkingDelta:
    text: str = ""
    signature: str | None = None
    type: Literal["thinking"] = "thinking"


@dataclass(slots=True)
class ToolCallStart:
    index: int
    id: str
    name: str
    type: Literal["tool_start"] = "tool_start"


@dataclass(slots=True)
class ToolCallDelta:
    index: int
    arguments: str
    type: Literal["tool_delta"] = "tool_delta"


@dataclass(slots=True)
class StreamEnd:
    finish_reason: FinishReason
    usage: Usage
    type: Literal["end"] = "end"


@dataclass(slots=True)
class RawBlockDelta:
    """A whole content block the neutral events do not name (an Anthropic server
    tool's call or result), relayed verbatim to clients of that format."""

    block: dict[str, Any]
    type: Literal["raw"] = "raw"


StreamEvent = (
    StreamStart
    | TextDelta
    | ThinkingDelta
    | ToolCallStart
    | ToolCallDelta
    | RawBlockDelta
    | StreamEnd
)


class StreamAccumulator:
    """Folds stream events into a ChatResponse, for usage, cost and strike checks."""

    def __init__(self) -> None:
        self.response = ChatResponse(id="", model="")
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._signature: str | None = None
        self._args: dict[int, list[str]] = {}
        self._calls: dict[int, ToolCall] = {}
        self._raw: list[RawBlock] = []
        self.finished = False

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ToolCallDelta):
            self._args.setdefault(event.index, []).append(event.arguments)
        elif isinstance(event, ToolCallStart):
            self._calls[event.index] = ToolCall(id=event.id, name=event.name, arguments="")
        elif isinstance(event, ThinkingDelta):
            self._thinking.append(event.text)
            if event.signature:
                self._signature = event.signature
        elif isinstance(event, RawBlockDelta):
            self._raw.append(RawBlock(event.block))
        elif isinstance(event, StreamStart):
            self.response.id = event.id
            self.response.model = event.model
        elif isinstance(event, StreamEnd):
            self.response.finish_reason = event.finish_reason
            self.response.usage = event.usage
            self.finished = True

    def result(self) -> ChatResponse:
        r = self.response
        parts: list[Part] = []
        if self._thinking or self._signature:
            parts.append(ThinkingPart(text="".join(self._thinking), signature=self._signature))
        parts.extend(self._raw)
        if self._text:
            parts.append(TextPart(text="".join(self._text)))
        r.content = parts
        r.tool_calls = [
            ToolCall(id=c.id, name=c.name, arguments="".join(self._args.get(i, [])))
            for i, c in sorted(self._calls.items())
        ]
        return r
