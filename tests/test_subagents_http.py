"""Sub-agents and side requests inside one Claude Code session, over real HTTP.

The anthropic SDK replays Claude-Code-shaped requests (its system blocks, its
Agent and Bash tools, `X-Claude-Code-Session-Id` and the JSON
`metadata.user_id`) through the gateway to the scripted simulator, and the
commands the script asks for really run in a scratch repository. Three
conversations share the session id: the main thread, a sub-agent (its own
system prompt, its own task as the first user message, no Agent tool) and side
requests (no tools, a tiny `max_tokens`: title and quota probe). What a user
expects (docs/agents.md): each conversation keeps its own evidence and a warm
cache, while the tier is the task's.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest

from agents_support import ROUTER_MODEL, STRONG, WEAK, AgentBench
from servers import TOKEN
from tiergate.routing.conversation import conversation_key

SESSION = "5d0c8f5e-2f7a-4a63-9d6e-1c2b3a4d5e6f"
USER_ID = orjson.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": SESSION}).decode()
BILLING = "x-anthropic-billing-header: cc_version=2.1.332.31a; cc_entrypoint=sdk-cli;"
GUIDE = " ".join(
    f"Rule {i}: read the code before you change it, run the tests after every edit, "
    f"and keep each change small enough to review in one sitting."
    for i in range(120)
)  # ~3,000 tokens: a prefix well over the provider's 1,024-token cache minimum

CACHE_STEP = 128

BASH = {
    "name": "Bash",
    "description": "Run a shell command in the project directory.",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "description": {"type": "string"},
        },
        "required": ["command"],
    },
}
AGENT = {
    "name": "Agent",
    "description": "Launch a sub-agent to work on a task on its own.",
    "input_schema": {
        "type": "object",
        "properties": {"description": {"type": "string"}, "prompt": {"type": "string"}},
        "required": ["description", "prompt"],
    },
}


@dataclass
class Conversation:
    """One conversation of the session, played turn by turn like Claude Code does."""

    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    first: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tiers: list[str | None] = field(default_factory=list)
    models: list[str | None] = field(default_factory=list)
    cached: list[tuple[int, int]] = field(default_factory=list)  # (prompt, cache read)

    def __post_init__(self) -> None:
        self.messages = [{"role": "user", "content": [{"type": "text", "text": self.first}]}]

    def body(self) -> dict[str, Any]:
        return {"system": self.system, "messages": self.messages}

    def cache_hit_rate(self) -> float:
        later = self.cached[1:]
        prompt = sum(p for p, _ in later)
        return sum(c for _, c in later) / prompt if prompt else 0.0

    def warm(self) -> bool:
        """Every base turn after the first read its previous turn's whole prompt from
        the cache, to the simulator's OpenAI grid (128-token steps past 1,024)."""
        return all(
            read >= prev // CACHE_STEP * CACHE_STEP
            for (prev, _), (_, read), model, before in zip(
                self.cached, self.cached[1:], self.models[1:], self.models, strict=False
            )
            if model == before == WEAK
        )


def claude_system(role: str) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": BILLING},
        {"type": "text", "text": role},
        {"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}},
    ]


def main_thread() -> Conversation:
    return Conversation(
        claude_system("You are a Claude agent, built on Anthropic's Claude Agent SDK."),
        [AGENT, BASH],
        "The test in test_calc.py fails. Fix calc.py so that it passes.",
    )


def sub_agent() -> Conversation:
    return Conversation(
        claude_system("You are a sub-agent: do the task you are given and report back."),
        [BASH],
        "Find out why test_calc.py fails and try to fix calc.py; report what you did.",
    )


class Session:
    """The SDK client of one session, and the commands it runs for real."""

    def __init__(self, bench: AgentBench) -> None:
        self.bench = bench
        self.client = anthropic.Anthropic(
            base_url=bench.url,
            auth_token=TOKEN,
            default_headers={"X-Claude-Code-Session-Id": SESSION},
            max_retries=0,
            timeout=60.0,  # explicit: the SDK refuses a non-streamed 32k budget without one
        )

    def turn(self, conv: Conversation) -> None:
        raw = self.client.messages.with_raw_response.create(
            model=ROUTER_MODEL,
            max_tokens=32000,
            system=conv.system,  # type: ignore[arg-type]
            tools=conv.tools,  # type: ignore[arg-type]
            messages=conv.messages,  # type: ignore[arg-type]
            metadata={"user_id": USER_ID},
        )
        msg = raw.parse()
        conv.tiers.append(raw.headers.get("x-orca-session-tier"))
        conv.models.append(raw.headers.get("x-orca-resolved-model"))
        usage = msg.usage
        read = usage.cache_read_input_tokens or 0
        conv.cached.append(
            (usage.input_tokens + read + (usage.cache_creation_input_tokens or 0), read)
        )
        conv.messages.append(
            {"role": "assistant", "content": [b.model_dump() for b in msg.content]}
        )
        results = [self._run(b.id, b.input) for b in msg.content if b.type == "tool_use"]
        assert results, f"the script stopped: {msg.content}"
        conv.messages.append({"role": "user", "content": results})

    def _run(self, call_id: str, args: Any) -> dict[str, Any]:
        """Run the command like Claude Code's Bash tool: an error result on a non-zero exit."""
        command = args["command"]
        done = subprocess.run(
            ["bash", "-c", command], cwd=self.bench.repo, capture_output=True, text=True, timeout=30
        )
        out = (done.stdout + done.stderr).strip()
        if done.returncode:
            out = f"Exit code {done.returncode}\n{out}"
        return {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": out,
            "is_error": bool(done.returncode),
        }

    def side(self, system: str, text: str, max_tokens: int) -> tuple[str | None, int]:
        """A side request: no tools, a tiny budget. Returns its tier header and status."""
        raw = self.client.messages.with_raw_response.create(
            model=ROUTER_MODEL,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": text}],
            metadata={"user_id": USER_ID},
        )
        return raw.headers.get("x-orca-session-tier"), raw.status_code


def keys_served(bench: AgentBench) -> list[tuple[str | None, str | None]]:
    """(conversation key, key index) of every request, from the usage rows and the tap."""
    report = bench.session_report()
    return [(conversation_key(t.body), f"{t.model}#{t.key_index}") for t in report.turns]


@pytest.fixture
def bench(tmp_path: Path) -> Any:
    b = AgentBench(tmp_path, "loop")
    with b.running():
        yield b


def test_a_sub_agent_strike_and_a_main_thread_strike_do_not_add_up(bench: AgentBench) -> None:
    """Each conversation strikes once in its first six requests (alone, the loop
    script's conversation escalates on its seventh, at its second strike): one
    session, two conversations, never two strikes in one of them, so nothing
    escalates. With one evidence record per session this escalated."""
    s = Session(bench)
    main, sub = main_thread(), sub_agent()
    s.turn(main)  # the main thread starts, then delegates
    for _ in range(6):
        s.turn(sub)
    for _ in range(5):
        s.turn(main)
    assert main.tiers == ["base"] * 6 and sub.tiers == ["base"] * 6, (main.tiers, sub.tiers)
    assert set(main.models) == set(sub.models) == {WEAK}
    # each conversation is warm on the session's key after its own first turn
    assert main.warm() and sub.warm(), (main.cached, sub.cached)
    assert main.cache_hit_rate() > 0.94 and sub.cache_hit_rate() > 0.94
    served = keys_served(bench)
    assert len({k for _, k in served}) == 1, served
    assert len({c for c, _ in served}) == 2


def test_a_sub_agent_failure_loop_escalates_the_task(bench: AgentBench) -> None:
    """Two strikes inside the sub-agent: corroborated evidence, the session's tier
    ratchets, and the main thread is served strong from its next turn on."""
    s = Session(bench)
    main, sub = main_thread(), sub_agent()
    s.turn(main)
    for _ in range(7):
        s.turn(sub)
    assert "strong; reason=strikes" in sub.tiers, sub.tiers
    s.turn(main)
    assert main.tiers == ["base", "strong"] and main.models[-1] == STRONG


def test_a_side_request_may_start_the_session_pins(bench: AgentBench) -> None:
    """Claude Code's quota probe can be a session's first request: the key it was
    served on becomes the session's, and the main thread stays on it."""
    s = Session(bench)
    assert s.side("", "quota", 1) == ("base", 200)
    main = main_thread()
    for _ in range(3):
        s.turn(main)
    served = keys_served(bench)
    assert len({k for _, k in served}) == 1, served
    assert main.warm(), main.cached


def test_side_requests_leave_the_main_thread_alone(bench: AgentBench) -> None:
    """Title and quota requests between the main thread's turns: served on the
    session's tier, but the main thread keeps its key, its cache and its evidence
    (its loop escalates on its seventh request, as without them; with the side
    requests' evidence recorded, a title cut off at its token limit struck and
    it escalated one turn early)."""
    s = Session(bench)
    main = main_thread()
    side = []
    for i in range(7):
        s.turn(main)
        side.append(s.side("Write a 3-7 word title for this conversation.", main.first, 64))
        if i % 2:
            side.append(s.side("", "quota", 1))
    assert all(status == 200 for _, status in side)
    assert main.tiers == ["base"] * 6 + ["strong; reason=strikes"], main.tiers
    assert main.warm(), main.cached
    served = keys_served(bench)
    main_key = conversation_key(main.body())
    assert len({k for c, k in served if c == main_key and k and WEAK in k}) == 1, served
