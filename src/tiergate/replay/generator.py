"""The seeded default corpus: 400 coding-agent sessions in five archetypes (report §5.1).

| archetype      | sessions | shape                                                        |
|----------------|---------:|--------------------------------------------------------------|
| easy_short     |      140 | 3-6 turns of trivial edits                                   |
| long_trivial   |       60 | 20-30 turns of trivial edits (the length-bias trap)          |
| latent_hard    |      100 | routine opener; hard from a turn between 2 and 11            |
| hard_start     |       40 | hard from turn 1                                             |
| failure_loop   |       60 | a task, then the same short prompt with a new failure output |

A turn is one request, as an agent sends it: the tool results of the previous
reply, then (on a user turn) the new user text; agent-loop turns carry tool
results only. Hard turns carry a pasted dump or source excerpt of 3-8 KB.
Failure-loop turns carry failing tool output every turn. `needs_strong` is the
ground truth: the hard phase of latent_hard and hard_start, and failure_loop
from its first failing turn. About 1 % of turns are preceded by a failed
upstream attempt (429/5xx) that the client retries with the same body.

Every session draws from its own `random.Random(f"{seed}:{index}")`, so the
corpus is identical across runs and platforms for a given seed.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from tiergate.replay import texts_easy as easy
from tiergate.replay import texts_hard as hard
from tiergate.replay.corpus import ARCHETYPES, ROUTER_MODEL
from tiergate.replay.source import numbered, source_excerpt
from tiergate.replay.texts_common import TOOLSETS, Project, system_prompt
from tiergate.replay.traces import failing_run, lint_errors, stack_dump

DEFAULT_SEED = 20260814
DEFAULT_SESSIONS = 400
#: Sessions per archetype in the default 400-session corpus (report §5.1: 50 % hard).
MIX: dict[str, int] = {
    "easy_short": 140,
    "long_trivial": 60,
    "latent_hard": 100,
    "hard_start": 40,
    "failure_loop": 60,
}
UPSTREAM_FAILURE_RATE = 0.01
#: Sessions with one truncated reply (a lone response-side strike, which must not
#: escalate), and the per-easy-turn chance it lands on a given turn.
GLITCH_SESSIONS = 0.15
GLITCH_RATE = 0.1
PASTE_CHARS = (3000, 8000)

Call = tuple[str, dict[str, Any], str]
"""(tool name, arguments, the result the tool will return)."""


@dataclass
class Conversation:
    """Builds one session turn by turn, keeping the cumulative history valid."""

    rng: random.Random
    project: Project
    toolset: str
    system: str
    history: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    pending: list[tuple[str, str]] = field(default_factory=list)  # (call id, result)
    glitches_left: int = 0

    # ---- tool calls in the session's toolset -----------------------------------

    def _call_id(self) -> str:
        return "call_" + "".join(self.rng.choices(string.ascii_letters + string.digits, k=24))

    def run(self, command: str, result: str) -> Call:
        if self.toolset == "run_edit":
            return ("run_command", {"command": command}, result)
        if self.toolset == "bash_editor":
            return ("bash", {"cmd": command}, result)
        return ("shell", {"command": ["bash", "-lc", command]}, result)

    def view(self, path: str, result: str) -> Call:
        if self.toolset == "bash_editor":
            return ("str_replace_editor", {"command": "view", "path": path}, result)
        return self.run(self.rng.choice((f"cat -n {path}", f"sed -n '1,80p' {path}")), result)

    def edit(self, path: str, result: str | None = None) -> Call:
        old, new = easy.short_code_line(self.rng, self.project)
        result = result or easy.edit_ok(self.rng, path)
        if self.toolset == "run_edit":
            return ("edit_file", {"path": path, "old_str": old, "new_str": new}, result)
        if self.toolset == "bash_editor":
            args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            return ("str_replace_editor", args, result)
        patch = f"--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,1 @@\n-{old}\n+{new}\n"
        return ("apply_patch", {"patch": patch}, result)

    # ---- turns ---------------------------------------------------------------------

    def turn(
        self,
        user: str | None,
        reply: str | None,
        calls: list[Call],
        *,
        needs_strong: bool,
        idle: float,
        finish: str | None = None,
    ) -> None:
        """Emit one request (pending tool results + optional user text) and its reply."""
        new = [{"role": "tool", "tool_call_id": cid, "content": out} for cid, out in self.pending]
        if user is not None:
            new.append({"role": "user", "content": user})
        if not new:
            new.append({"role": "user", "content": "continue"})
        self.history.extend(new)
        request = {
            "model": ROUTER_MODEL,
            "messages": [{"role": "system", "content": self.system}, *self.history],
            "tools": TOOLSETS[self.toolset],
        }
        tool_calls = [
            {"id": self._call_id(), "type": "function", "function": {"name": n, "arguments": a}}
            for n, a in ((n, orjson.dumps(args).decode()) for n, args, _ in calls)
        ]
        response: dict[str, Any] = {
            "content": reply,
            "tool_calls": tool_calls,
            "finish_reason": finish or ("tool_calls" if tool_calls else "stop"),
        }
        turn: dict[str, Any] = {
            "request": request,
            "needs_strong": needs_strong,
            "idle_seconds_before": round(idle, 1),
            "response": response,
            "upstream_status": 200,
        }
        if self.turns and self.rng.random() < UPSTREAM_FAILURE_RATE:
            failed = {k: v for k, v in turn.items() if k != "response"}
            failed["upstream_status"] = self.rng.choice((429, 500, 503, 529))
            self.turns.append(failed)
            turn = {**turn, "idle_seconds_before": round(self.rng.uniform(1.0, 6.0), 1)}
        self.turns.append(turn)
        assistant: dict[str, Any] = {"role": "assistant", "content": reply}
        if tool_calls:
            assistant["tool_calls"] = tool_calls
        self.history.append(assistant)
        self.pending = [
            (str(tc["id"]), out) for tc, (_, _, out) in zip(tool_calls, calls, strict=True)
        ]


# ---- idle gaps -----------------------------------------------------------------------


def user_gap(rng: random.Random) -> float:
    """Reading the reply and typing: a few seconds to a few minutes; rare long breaks."""
    if rng.random() < 0.04:
        return rng.uniform(8 * 60, 45 * 60)
    return min(240.0, max(4.0, rng.lognormvariate(3.4, 0.7)))


def tool_gap(rng: random.Random) -> float:
    """The agent's own loop: model latency plus the tool's run time."""
    return rng.uniform(2.0, 25.0)


# ---- easy tasks ----------------------------------------------------------------------


def easy_task(c: Conversation, budget: int, first_text: str | None = None) -> int:
    """One trivial task: a user turn, then 0-3 agent-loop turns. Returns turns emitted."""
    rng, p = c.rng, c.project
    path = p.file()
    steps: list[str] = []
    roll = rng.random()
    if roll < 0.12:  # look around first: search, then read one or two files
        steps += ["grep", "view"] + (["view"] if rng.random() < 0.5 else [])
    elif roll < 0.45:
        steps += ["view"]
    steps.append("edit")
    if rng.random() < 0.5:
        steps.append("test")
    steps = steps[: max(1, budget)]
    user = first_text or easy.easy_request(rng, p)
    emitted = 0
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        if step == "view":
            size = rng.randint(500, 1800)
            call = c.view(path, numbered(source_excerpt(rng, p, size), rng.randint(1, 200)))
        elif step == "grep":
            call = c.run(
                f"grep -rn '{p.var()}' {p.file().rsplit('/', 1)[0]}", easy.grep_output(rng, p)
            )
        elif step == "edit":
            call = c.edit(path)
        else:
            call = c.run(p.test_cmd(), easy.tests_pass(rng, p))
        calls = [call]
        reply = None
        if last and rng.random() < 0.5:
            reply = easy.easy_reply(rng, p)
            calls = []
        finish = None
        if c.glitches_left and rng.random() < GLITCH_RATE:
            c.glitches_left -= 1
            reply, calls, finish = easy.easy_reply(rng, p)[:20], [], "length"
        c.turn(
            user if i == 0 else None,
            reply,
            calls,
            needs_strong=False,
            idle=user_gap(rng) if i == 0 else tool_gap(rng),
            finish=finish,
        )
        emitted += 1
    return emitted


def easy_turns(c: Conversation, count: int, opener: str | None = None) -> None:
    done = 0
    while done < count:
        done += easy_task(c, count - done, opener if done == 0 else None)


# ---- hard turns ----------------------------------------------------------------------


def paste(rng: random.Random, p: Project) -> str:
    size = rng.randint(*PASTE_CHARS)
    if rng.random() < 0.6:
        body = stack_dump(rng, p, size)
    elif rng.random() < 0.7:
        body = source_excerpt(rng, p, size)
    else:
        half = size // 2
        body = source_excerpt(rng, p, half) + "\n\n" + stack_dump(rng, p, size - half)
    fence = rng.choice(("```\n{}\n```", "```text\n{}\n```", "{}"))
    return fence.format(body)


def hard_turns(c: Conversation, count: int, *, opening: bool) -> None:
    rng, p = c.rng, c.project
    for i in range(count):
        prose = hard.hard_prose(rng, p, first=opening and i == 0)
        user = prose + "\n\n" + paste(rng, p)
        reply = hard.hard_reply(rng, p)
        path = p.file()
        roll = rng.random()
        if roll < 0.45:
            calls = [c.view(path, numbered(source_excerpt(rng, p, rng.randint(800, 2500))))]
        elif roll < 0.75:
            calls = [c.edit(path), c.run(p.test_cmd(), easy.tests_pass(rng, p))]
        else:
            calls = []
        gap = user_gap(rng) + rng.uniform(30, 240)  # collecting a dump takes a while
        c.turn(user, reply, calls, needs_strong=True, idle=gap)


# ---- archetypes ----------------------------------------------------------------------


def _easy_short(c: Conversation) -> None:
    easy_turns(c, c.rng.randint(3, 6))


def _long_trivial(c: Conversation) -> None:
    easy_turns(c, c.rng.randint(20, 30))


def _latent_hard(c: Conversation) -> None:
    rng = c.rng
    onset = rng.randint(2, 11)
    easy_turns(c, onset - 1, opener=easy.latent_opener(rng, c.project))
    hard_turns(c, rng.randint(3, 8), opening=True)
    wrap = rng.choice((0, 0, 1, 2, 3))
    if wrap:
        easy_turns(c, wrap)


def _hard_start(c: Conversation) -> None:
    hard_turns(c, c.rng.randint(4, 9), opening=True)
    wrap = c.rng.choice((0, 0, 1, 2))
    if wrap:
        easy_turns(c, wrap)


def _failure_loop(c: Conversation) -> None:
    rng, p = c.rng, c.project
    path, test_cmd = p.file(), p.test_cmd()
    prompt = rng.choice(hard.FAILURE_PROMPTS)
    attempt = 0

    def loop_calls() -> list[Call]:
        calls = [c.edit(path), c.run(test_cmd, failing_run(rng, p, attempt))]
        if rng.random() < 0.3:
            calls.append(c.run(p.build_cmd(), lint_errors(rng, p)))
        return calls

    c.turn(hard.failure_task(rng, p), None, loop_calls(), needs_strong=False, idle=user_gap(rng))
    for _ in range(rng.randint(4, 8)):
        attempt += 1
        reply = hard.failure_reply(rng, p)
        c.turn(prompt, reply, loop_calls(), needs_strong=True, idle=user_gap(rng))
    if rng.random() < 0.4:  # it finally passes
        c.pending = [(cid, easy.edit_ok(rng, path)) for cid, _ in c.pending[:1]] + [
            (cid, easy.tests_pass(rng, p)) for cid, _ in c.pending[1:]
        ]
        c.turn("Finally. Thanks.", "Glad it's green now.", [], needs_strong=False, idle=20.0)


BUILDERS: dict[str, Callable[[Conversation], None]] = {
    "easy_short": _easy_short,
    "long_trivial": _long_trivial,
    "latent_hard": _latent_hard,
    "hard_start": _hard_start,
    "failure_loop": _failure_loop,
}


def scaled_mix(sessions: int) -> dict[str, int]:
    """The default mix scaled to `sessions` (largest remainders keep the total exact)."""
    total = sum(MIX.values())
    raw = {a: n * sessions / total for a, n in MIX.items()}
    counts = {a: int(v) for a, v in raw.items()}
    short = sessions - sum(counts.values())
    for a in sorted(raw, key=lambda a: raw[a] - counts[a], reverse=True)[:short]:
        counts[a] += 1
    return counts


def generate_session(seed: int, index: int, archetype: str) -> dict[str, Any]:
    rng = random.Random(f"{seed}:{index}")
    project = Project.pick(rng)
    toolset = rng.choice(sorted(TOOLSETS))
    conv = Conversation(rng, project, toolset, system_prompt(rng, project))
    conv.glitches_left = 1 if rng.random() < GLITCH_SESSIONS else 0
    BUILDERS[archetype](conv)
    return {"session_id": f"s-{index:04d}", "archetype": archetype, "turns": conv.turns}


def generate_corpus(
    seed: int = DEFAULT_SEED, sessions: int = DEFAULT_SESSIONS
) -> list[dict[str, Any]]:
    """The deterministic default corpus, sessions in a seeded shuffled order."""
    counts = scaled_mix(sessions)
    kinds = [a for a in ARCHETYPES for _ in range(counts[a])]
    random.Random(seed).shuffle(kinds)
    return [generate_session(seed, i + 1, a) for i, a in enumerate(kinds)]
