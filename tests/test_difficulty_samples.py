"""Shared builders (no tests here) for difficulty tests and the benchmark.

The traces follow the real output formats of Python, Go and Java; the prose is
ordinary engineering English. Nothing here is tuned to the scorer's vocabulary
lists beyond being the kind of text the report calls a hard or trivial turn.
"""

from __future__ import annotations

import random

from tiergate.core.model import ChatRequest, Message, TextPart, ToolCall, ToolSpec

TOOLS = [
    ToolSpec("read_file", "Read a file from the workspace", {"type": "object"}),
    ToolSpec("edit_file", "Replace text in a file", {"type": "object"}),
]
SYSTEM = [
    TextPart(
        "You are a coding agent working inside the user's repository. Use the tools to read "
        "and edit files, run commands when needed, and keep changes minimal. " * 12
    )
]

TRIVIAL_TURNS = (
    "Rename this variable.",
    "Add a nil check.",
    "Rename the variable cnt to count in utils.py.",
    "Fix the typo in the README.",
    "Thanks, that works. Now run the tests.",
    "Please add a docstring to the helper.",
    "Bump the version to 1.4.2.",
    "Remove the unused import.",
)

HARD_PROSE = (
    "Under load our worker pool intermittently loses jobs. I suspect a race condition "
    "between the scheduler and the result collector: the invariant that every submitted "
    "job is either pending or completed seems to break when two workers finish at the "
    "same time. Can you explain why this happens, find the root cause, and propose a fix "
    "that keeps submission at O(log n) without introducing a deadlock? Please reason "
    "about the worst-case interleaving step by step.",
    "The cache eviction is supposed to be LRU, but under concurrent access it evicts hot "
    "keys. Why would the ordering guarantee break here? I think the bug is in how we "
    "update the linked list outside the lock. Walk me through the possible "
    "interleavings, prove that your fix preserves the invariant, and tell me what the "
    "amortized complexity of get and put becomes.",
    "This deadlock only shows up in production, roughly once a day. Below is the full "
    "dump from the last occurrence. Analyze the lock ordering across the goroutines, "
    "explain which pair of locks forms the cycle, and compare the trade-offs of "
    "reordering acquisition versus switching to a single mutex; an upper bound on the "
    "added latency would help.",
)


def python_traceback(rng: random.Random, size: int) -> str:
    lines = ["Traceback (most recent call last):"]
    while sum(len(x) + 1 for x in lines) < size - 80:
        mod = rng.choice(["scheduler", "pool", "collector", "queue", "worker", "http"])
        func = rng.choice(["run", "submit", "_drain", "handle", "dispatch", "wait_for"])
        lines.append(f'  File "/srv/app/{mod}.py", line {rng.randint(10, 900)}, in {func}')
        lines.append(f"    result = await self._{mod}.{func}(job, timeout=cfg.timeout)")
    lines.append("RuntimeError: dictionary changed size during iteration")
    return "\n".join(lines)


def go_dump(rng: random.Random, size: int) -> str:
    out: list[str] = []
    g = 1
    while sum(len(x) for x in out) < size:
        state = rng.choice(["running", "chan receive", "semacquire", "select"])
        fn = rng.choice(["(*Pool).worker", "(*Cache).Get", "(*Scheduler).loop"])
        out.append(
            f"goroutine {g} [{state}]:\nmain.{fn}(0xc0000{rng.randint(4096, 65535):x}, 0x{g:x})\n"
            f"\t/src/pool/{fn.split('.')[-1].lower()}.go:{rng.randint(20, 400)}"
            f" +0x{rng.randint(16, 999):x}\n"
            f"created by main.NewPool\n\t/src/pool/pool.go:{rng.randint(20, 99)} +0x7f\n\n"
        )
        g += 1
    return "".join(out)


def java_trace(rng: random.Random, size: int) -> str:
    lines = ["java.util.ConcurrentModificationException: null"]
    while sum(len(x) + 1 for x in lines) < size:
        cls = rng.choice(["OrderService", "CartRepository", "PriceCache", "EventBus"])
        method = rng.choice(["update", "lambda$flush$3", "evict", "publish"])
        lines.append(f"\tat com.shop.core.{cls}.{method}({cls}.java:{rng.randint(20, 700)})")
    return "\n".join(lines)


TRACE_BUILDERS = (python_traceback, go_dump, java_trace)


def hard_turn_text(seed: int, size: int = 5000) -> str:
    """Reasoning prose plus a pasted trace of about `size` characters."""
    rng = random.Random(seed)
    prose = HARD_PROSE[seed % len(HARD_PROSE)]
    trace = TRACE_BUILDERS[seed % len(TRACE_BUILDERS)](rng, size)
    return f"{prose}\n\n```\n{trace}\n```"


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def assistant(text: str) -> Message:
    return Message("assistant", [TextPart(text)])


def tool_result(text: str, call_id: str = "c1", is_error: bool = False) -> Message:
    return Message("tool", [TextPart(text)], tool_call_id=call_id, is_error=is_error)


def request(
    messages: list[Message],
    *,
    system: list[TextPart] | None = None,
    tools: list[ToolSpec] | None = None,
) -> ChatRequest:
    return ChatRequest(
        model="orcarouter/coding",
        messages=messages,
        system=SYSTEM if system is None else system,
        tools=TOOLS if tools is None else tools,
    )


def agent_session(turns: int, latest: str, *, filler: str = "Add a nil check.") -> ChatRequest:
    """A coding-agent session of `turns` user turns; each earlier turn edits a file."""
    msgs: list[Message] = []
    for i in range(turns - 1):
        msgs.append(user(filler))
        msgs.append(
            Message(
                "assistant",
                [],
                tool_calls=[
                    ToolCall(f"c{i}", "edit_file", '{"path": "pkg/app.go", "old": "x", "new": "y"}')
                ],
            )
        )
        msgs.append(tool_result("Edited pkg/app.go", f"c{i}"))
        msgs.append(assistant("Done: added the check."))
    msgs.append(user(latest))
    return request(msgs)
