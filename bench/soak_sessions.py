"""The agent sessions the soak test plays: what each turn sends, and what a correct
answer must look like. No I/O here: bench/soak.py sends the steps.

Three kinds of session, each a multi-turn conversation that grows like an agent's:
- coding (orcarouter/coding, auto escalation): text turns, tool calls answered
  with tool results, pairs of hard turns (pasted goroutine dumps + reasoning
  asks: difficulty escalation), failure loops (the same two commands failing
  the same way, turn after turn: strikes), and explicit `X-OrcaRouter-Tier:
  strong` / `Escalate: once`;
- lane (auto:coding + top-level `session_tier`): sticky session tiers; the
  approval changes at some user-turn boundary, and every answer must come from
  the approved model. One worker owns a (session, lane), so no 409 is expected;
- direct (a concrete model): never escalated, never carries a tier header.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from soak_wire import ANTHROPIC, CHAT, RESPONSES

STRONG = "anthropic/claude-sonnet-4-5"
BASE = "openai/gpt-5-mini"
APPROVALS = [("openai:gpt-5-mini", 1), ("openai:gpt-5", 3), ("anthropic:claude-sonnet-4-5", 3)]
TIER_HEADERS = {
    "base",
    "strong",
    "strong; reason=explicit",
    "strong; reason=once",
    "strong; reason=difficulty",
    "strong; reason=strikes",
    "base; reason=reset",
    "base; reason=de_escalated",
    "base; reason=strong_unavailable",
    "base; reason=denied:session_cap",
    "base; reason=denied:share_cap",
}

WIRE_SHARES = (0.5, 0.3, 0.2)
"""Shares of sessions sent as Chat Completions, Anthropic Messages and Responses."""

SYSTEMS = [
    f"You are coding agent #{n} working in a large monorepo. "
    + " ".join(f"Rule {i}: keep diffs small, explain risky changes, run tests." for i in range(120))
    for n in range(4)
]


def _tool(name: str, props: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the workspace",
            "parameters": {
                "type": "object",
                "properties": {k: {"type": v} for k, v in props.items()},
                "required": list(props),
            },
        },
    }


TOOLS = [
    _tool("read_file", {"path": "string"}),
    _tool("run_command", {"cmd": "string"}),
    _tool("edit_file", {"path": "string", "patch": "string"}),
]


def text_turn(rng: random.Random, sid: str, t: int) -> str:
    lines = "\n".join(
        f"{sid}:{t}:{i} ok  pkg/mod_{rng.randrange(99)}/file_{i}.py::test_{t}_{i} passed"
        for i in range(rng.randrange(8, 30))
    )
    return f"Step {t}: continue with the refactor and keep it green. Output:\n{lines}"


def hard_turn(rng: random.Random, t: int) -> str:
    frames = "\n".join(
        f"goroutine {40 + k} [chan receive, {k} minutes]:\n"
        f"main.(*Pool).worker(0xc0000{k:04x}, 0x{k + t:x})\n"
        f"\t/src/pool/worker.go:{100 + k * 7} +0x{k * 16 + rng.randrange(9):x}\n"
        f"sync.(*Mutex).Lock(0xc00012{k:04x})\n\t/usr/local/go/src/sync/mutex.go:81 +0x45"
        for k in range(30)
    )
    return (
        "The scheduler deadlocks intermittently under load. I suspect a race condition "
        "between the worker pool shutdown and the channel close: why does the invariant "
        "that every job is acknowledged exactly once break? Prove the lock ordering is "
        "consistent, analyse the complexity of the retry path, and explain step by step "
        f"which interleaving causes it (case {t}). Here is the goroutine dump:\n{frames}"
    )


@dataclass
class Step:
    kind: str
    body: dict[str, Any]
    headers: dict[str, str]
    expect_tools: bool = False
    expect_model: str | None = None  # the model that must answer (lanes, direct)
    asked_strong: bool = False
    wire: str = CHAT  # the client wire format it is sent in (soak_wire.py)


@dataclass
class AgentSession:
    mode: str  # coding | lane | direct
    sid: str
    rng: random.Random
    plan: list[str]
    messages: list[dict[str, Any]] = field(default_factory=list)
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    lane: str = "main"
    approval: tuple[str, int] = APPROVALS[0]
    turns_sent: int = 0
    alive: bool = True
    wire: str = CHAT  # chat | anthropic | responses, for the whole session

    # ---- what to send next -------------------------------------------------------

    def next_step(self) -> Step | None:
        if not self.alive:
            return None
        if self.pending_calls:
            return self._tool_results()
        if not self.plan:
            return None
        kind = self.plan.pop(0)
        headers: dict[str, str] = {}
        t = self.turns_sent
        if kind == "hard":
            self._user(hard_turn(self.rng, t) + " [[sim:text]]")
        elif kind == "fail":
            self._failure_loop(t)
        elif kind == "tool":
            self._user(text_turn(self.rng, self.sid, t) + "\nInspect the code. [[sim:tool]]")
        else:
            self._user(text_turn(self.rng, self.sid, t) + " [[sim:text]]")
        if kind == "strong":
            headers["X-OrcaRouter-Tier"] = "strong"
        elif kind == "once":
            headers["X-OrcaRouter-Escalate"] = "once"
        elif kind == "switch":  # a new approval at a safe user-turn boundary
            self.approval = self.rng.choice([a for a in APPROVALS if a != self.approval])
        return self._step(kind, headers, expect_tools=kind == "tool")

    def _user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def _failure_loop(self, t: int) -> None:
        """The agent ran two commands and both failed as before: from the second such
        turn on, a request-side strike (the same command, the same error, no edit)."""
        ids = [f"call_{self.sid}_{t}_{k}" for k in range(2)]
        cmds = ["go build ./...", "go test ./pool/..."]
        calls = [
            {
                "id": i,
                "type": "function",
                "function": {"name": "run_command", "arguments": f'{{"cmd": "{c}"}}'},
            }
            for i, c in zip(ids, cmds, strict=True)
        ]
        last = self.messages[-1]
        if last["role"] == "assistant" and not last.get("tool_calls"):
            self.messages[-1] = {**last, "tool_calls": calls}  # roles keep alternating
        else:
            self.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        err = f"./pool/worker.go:{40 + t}:2: undefined: jobQueue\nexit status 2"
        self.messages.append({"role": "tool", "tool_call_id": ids[0], "content": f"error: {err}"})
        self.messages.append({"role": "tool", "tool_call_id": ids[1], "content": f"FAIL\n{err}"})

    def _tool_results(self) -> Step:
        for call in self.pending_calls:
            out = "\n".join(
                f"{self.sid} line {i}: value = {self.rng.random():.6f}" for i in range(12)
            )
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": out})
        self.pending_calls = []
        return self._step("tool_result", {})

    def _step(self, kind: str, headers: dict[str, str], expect_tools: bool = False) -> Step:
        self.turns_sent += 1
        stream = self.rng.random() < 0.3
        body: dict[str, Any] = {"messages": list(self.messages), "stream": stream}
        if stream and self.wire == CHAT and self.rng.random() < 0.5:
            body["stream_options"] = {"include_usage": True}
        expect_model = None
        if self.mode == "direct":
            body["model"] = BASE
            expect_model = BASE
        else:
            body["tools"] = TOOLS
            body["model"] = "orcarouter/coding" if self.mode == "coding" else "auto:coding"
            headers["X-OrcaRouter-Session-Id"] = self.sid
        if self.mode == "lane":
            model, tier = self.approval
            body["session_tier"] = {
                "session": self.sid,
                "lane": self.lane,
                "approved_model": model,
                "approved_tier": tier,
            }
            expect_model = model.replace(":", "/", 1)
        if self.rng.random() < 0.2:
            headers["X-OrcaRouter-Include-Cost"] = "true"
        return Step(
            kind=f"{self.mode}:{kind}",
            body=body,
            headers=headers,
            expect_tools=expect_tools,
            expect_model=expect_model,
            asked_strong="X-OrcaRouter-Tier" in headers or "X-OrcaRouter-Escalate" in headers,
            wire=self.wire,
        )

    # ---- what a correct answer looks like ----------------------------------------

    def observe(
        self, step: Step, msg: dict[str, Any] | None, headers: dict[str, str]
    ) -> str | None:
        """Check a 200 answer; extend the conversation. A problem name, or None."""
        problem = self._check(step, msg, headers)
        if problem is not None or msg is None:
            self.alive = False
            return problem or "protocol:no_message"
        calls = msg.get("tool_calls") or []
        if calls:
            self.pending_calls = calls
            self.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        else:
            self.messages.append({"role": "assistant", "content": msg.get("content") or "ok"})
        return None

    def _check(self, step: Step, msg: dict[str, Any] | None, headers: dict[str, str]) -> str | None:
        if msg is None:
            return "protocol:no_message"
        resolved = headers.get("x-orca-resolved-model")
        tier = headers.get("x-orca-session-tier")
        if not headers.get("x-orca-request-id"):
            return "protocol:no_request_id"
        if bool(msg.get("tool_calls")) != step.expect_tools:
            return "protocol:tool_calls" if step.expect_tools else "protocol:unexpected_tool_calls"
        if not step.expect_tools and not msg.get("content"):
            return "protocol:empty_content"
        if step.expect_model is not None and resolved != step.expect_model:
            return f"{self.mode}:served_{resolved}_not_{step.expect_model}"
        if self.mode == "direct" and tier is not None:
            return "direct:tier_header_on_concrete_model"
        if self.mode == "coding":
            if tier not in TIER_HEADERS:
                return "coding:bad_tier_header"
            if step.asked_strong and tier == "base":
                return "coding:strong_ask_ignored"
            if tier.startswith("strong") and resolved != STRONG:
                return "coding:strong_tier_not_served_strong"
        return None

    def failed(self) -> None:
        """An error answer ends the session (the next worker turn starts a new one)."""
        self.alive = False


def _coding_plan(rng: random.Random) -> list[str]:
    plan: list[str] = []
    for _ in range(rng.randrange(3, 9)):
        r = rng.random()
        if r < 0.40:
            plan.append("text")
        elif r < 0.72:
            plan.append("tool")
        elif r < 0.82:
            plan += ["hard", "hard"]  # two in a row: the difficulty streak
        elif r < 0.92:
            # the same failure three times, unchanged: the first is work, the two repeats
            # strike (repeated_failing_command), which is the strike threshold
            plan += ["fail", "fail", "fail"]
        elif r < 0.96:
            plan.append("strong")
        else:
            plan.append("once")
    return plan


def new_session(rng: random.Random, worker: int) -> AgentSession:
    """A fresh session of a random kind; ids are unique per worker and session."""
    r = rng.random()
    mode = "coding" if r < 0.6 else "lane" if r < 0.85 else "direct"
    sid = f"soak-w{worker}-{rng.getrandbits(48):012x}"
    if mode == "coding":
        plan = _coding_plan(rng)
        if plan[0] == "fail":  # a failure loop needs an answer to hang its tool calls on
            plan.insert(0, "text")
    elif mode == "lane":
        plan = [rng.choice(["text", "tool"]) for _ in range(rng.randrange(3, 8))]
        plan.insert(rng.randrange(1, len(plan)), "switch")
    else:
        plan = ["text"] * rng.randrange(2, 7)
    # the client's wire format: Chat Completions, Anthropic Messages, or Responses
    w = rng.random()
    wire = CHAT if w < WIRE_SHARES[0] else ANTHROPIC if w < sum(WIRE_SHARES[:2]) else RESPONSES
    session = AgentSession(mode, sid, rng, plan, wire=wire)
    session.messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
    if mode == "lane":
        session.lane = rng.choice(["main", "delegation", "aux"])
        session.approval = rng.choice(APPROVALS)
    return session
