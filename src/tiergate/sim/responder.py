"""What the simulated model answers: deterministic, format-neutral replies.

The reply is a pure function of the request. A seed taken from the hash of the
whole prompt picks words from a fixed vocabulary, tool-call ids and argument
values, so a replayed conversation gets the same answers on every run.

Default behaviour: when the request offers tools and its last message is a
user turn (not a tool result), call the first tool with arguments synthesised
from its JSON schema; otherwise answer with text. Tests steer it with
directives in the latest user text:

  [[sim:text]]      answer with text even though tools are offered
  [[sim:tool]]      call a tool (only on a user turn, so agent loops end)
  [[sim:tools=N]]   N parallel tool calls
  [[sim:length]]    run into the output limit (finish "length")
  [[sim:empty]]     an empty completion
  [[sim:bad_args]]  tool-call arguments that are not valid JSON
  [[sim:output=N]]  N output tokens of text
  [[sim:thinking]]  reasoning first (formats that can carry it)

Every vocabulary word, with its leading space, is exactly one token of
tiergate.core.tokens, and so is ".", so `output_tokens` is exact.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from tiergate.core.tokens import count_tokens, tokenize
from tiergate.sim.prompt import SimCall, ToolDef

Finish = Literal["stop", "length", "tool_calls"]

_WORDS = """
the a model route cache session tier agent token prompt reply answer test file
change result value state check pin key turn cost price read write build run
deploy query review plan step task code patch branch merge lint type field
record signal budget window limit share cap strong base fast clear simple
steady quiet bright useful careful small large next first final every other
works holds keeps moves finds shows needs makes gives takes
"""
# One token each, with or without a leading space: at most 7 ASCII letters.
VOCABULARY = tuple(_WORDS.split())

THINKING_TOKENS = 24
_DIRECTIVE_RE = re.compile(r"\[\[sim:([a-z_]+)(?:=(\d+))?\]\]")


@dataclass(slots=True)
class ToolCallOut:
    id: str
    """Provider-neutral suffix; each format adds its own prefix (call_, toolu_)."""
    name: str
    arguments: str
    """JSON text, possibly malformed or truncated."""
    input: dict[str, Any] | None
    """The parsed arguments; None when `arguments` is not a JSON object."""


@dataclass(slots=True)
class Reply:
    text: str = ""
    thinking: str = ""
    signature: str = ""
    tool_calls: list[ToolCallOut] = field(default_factory=list)
    finish: Finish = "stop"
    output_tokens: int = 0
    thinking_tokens: int = 0
    seed: int = 0


def parse_directives(text: str) -> dict[str, int]:
    """`[[sim:name]]` -> {name: 1}; `[[sim:name=N]]` -> {name: N}."""
    return {m.group(1): int(m.group(2) or 1) for m in _DIRECTIVE_RE.finditer(text)}


def plan_reply(call: SimCall, digest: bytes, default_output_tokens: int) -> Reply:
    seed = int.from_bytes(digest[:8], "big")
    rng = random.Random(seed)
    directives = parse_directives(call.directive_text)
    reply = Reply(seed=seed)
    if "empty" in directives:
        return reply
    budget = call.max_tokens if call.max_tokens is not None else 1 << 62

    if call.can_think and (call.thinking or "thinking" in directives):
        words = _words(rng, THINKING_TOKENS)
        used = min(len(words), budget)
        reply.thinking = "".join(words[:used])
        reply.thinking_tokens = used
        reply.signature = digest.hex() + f"{seed:016x}"
        budget -= used
        if used < len(words):
            reply.finish = "length"
            reply.output_tokens = used
            return reply

    tools = _tools_to_call(call, directives)
    if tools:
        _add_tool_calls(reply, tools, rng, budget, bad="bad_args" in directives)
    else:
        _add_text(reply, call, directives, rng, budget, default_output_tokens)
    reply.output_tokens += reply.thinking_tokens
    return reply


def _tools_to_call(call: SimCall, directives: dict[str, int]) -> list[ToolDef]:
    if not call.tools or call.tool_choice == "none":
        return []
    forced = call.tool_choice != "auto"
    on_user_turn = call.last_turn == "user"
    wants = on_user_turn and "text" not in directives
    if on_user_turn and ("tool" in directives or "tools" in directives):
        wants = True
    if not (wants or forced):
        return []
    count = max(1, directives.get("tools", 1)) if call.parallel_tools else 1
    if call.tool_choice not in ("auto", "required"):
        named = [t for t in call.tools if t.name == call.tool_choice]
        return named * count if named else []
    return [call.tools[i % len(call.tools)] for i in range(count)]


def _add_tool_calls(
    reply: Reply, tools: list[ToolDef], rng: random.Random, budget: int, *, bad: bool
) -> None:
    reply.finish = "tool_calls"
    for index, tool in enumerate(tools):
        value = synthesize(tool.schema, rng)
        arguments = orjson.dumps(value).decode()
        parsed: dict[str, Any] | None = value if isinstance(value, dict) else None
        if bad:
            arguments, parsed = arguments[:-1] + ',"', None
        cost = count_tokens(tool.name) + count_tokens(arguments)
        if cost > budget:
            keep = max(0, budget - count_tokens(tool.name))
            arguments, parsed = "".join(tokenize(arguments)[:keep]), None
            cost = count_tokens(tool.name) + count_tokens(arguments)
            reply.finish = "length"
        reply.tool_calls.append(
            ToolCallOut(f"{reply.seed:016x}{index:04d}", tool.name, arguments, parsed)
        )
        reply.output_tokens += cost
        budget -= cost
        if reply.finish == "length":
            return


def _add_text(
    reply: Reply,
    call: SimCall,
    directives: dict[str, int],
    rng: random.Random,
    budget: int,
    default_output_tokens: int,
) -> None:
    if call.json_schema is not None or call.json_mode:
        schema = call.json_schema or {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        }
        tokens = tokenize(orjson.dumps(synthesize(schema, rng)).decode())
    else:
        wanted = directives.get("output", default_output_tokens)
        if "length" in directives and call.max_tokens is not None:
            wanted = max(wanted, call.max_tokens + 1)
        tokens = _words(rng, wanted)
    if len(tokens) > budget:
        tokens = tokens[:budget]
        reply.finish = "length"
    if "length" in directives:
        reply.finish = "length"
    reply.text = "".join(tokens)
    reply.output_tokens += len(tokens)


def _words(rng: random.Random, count: int) -> list[str]:
    """`count` tokens of sentence-like text: words, with "." ending each sentence."""
    tokens: list[str] = []
    sentence = 0
    for i in range(count):
        last = i == count - 1
        if sentence and ((last and count > 1) or (sentence >= 6 and rng.random() < 0.3)):
            tokens.append(".")
            sentence = 0
            continue
        word = rng.choice(VOCABULARY)
        if sentence == 0:
            word = word.capitalize()
        tokens.append(word if i == 0 else " " + word)
        sentence += 1
    return tokens


def synthesize(schema: Any, rng: random.Random, depth: int = 0, name: str = "") -> Any:
    """A plausible value for a JSON schema: required properties, right types."""
    if not isinstance(schema, dict) or depth > 6:
        return rng.choice(VOCABULARY)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            return synthesize(options[0], rng, depth + 1, name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = kind.lower() if isinstance(kind, str) else None
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required")
        keys = [k for k in required if isinstance(k, str)] if required else list(props)
        return {k: synthesize(props.get(k, {}), rng, depth + 1, k) for k in keys}
    if kind == "array":
        items = max(1, int(schema.get("minItems") or 1))
        return [synthesize(schema.get("items", {}), rng, depth + 1, name) for _ in range(items)]
    if kind == "integer":
        low = int(schema.get("minimum", 1))
        return rng.randint(low, max(low, int(schema.get("maximum", low + 99))))
    if kind == "number":
        floor = float(schema.get("minimum", 0.0))
        return round(rng.uniform(floor, max(floor, float(schema.get("maximum", floor + 100)))), 2)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string_for(name, rng)


def _string_for(name: str, rng: random.Random) -> str:
    lowered = name.lower()
    if "path" in lowered or "file" in lowered:
        return f"src/{rng.choice(VOCABULARY)}.py"
    if "url" in lowered:
        return f"https://example.com/{rng.choice(VOCABULARY)}"
    return " ".join(rng.choice(VOCABULARY) for _ in range(2))
