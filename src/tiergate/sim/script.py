"""Scripted agent sessions: the simulator answers as a coding agent's model would.

With a script armed (`POST /_sim/script {"name": "fix"}`), every conversation
that offers a shell tool, or speaks one of the text protocols below, is answered
step by step from the script instead of with vocabulary words. The step is the
number of assistant turns already in the transcript, so each conversation
follows the script on its own, and a replayed request gets the same answer.

The scripts work on the scratch project of `scratch_project()`: `calc.py`,
whose `add` subtracts, and a unittest that catches it.

  fix   run the tests (they fail), fix calc.py, run the tests (they pass), done
  loop  run the tests, make a wrong edit, run them again, ... : the same failing
        command and failing test output on every turn, what strike producers
        (tiergate.routing.strikes) are there to notice; done after LOOP_STEPS
  split the loop, giving up after SPLIT_STEPS turns (one strike's worth)
  delegate, delegate-loop
        a lead conversation (one offering an agent-spawning tool: Claude Code's
        Agent, opencode's task) hands the work to a sub-agent in its first turn,
        then runs the tests itself and says done; the sub-agent (a conversation
        whose first user message carries DELEGATED_MARKER) plays `fix` or `loop`
  delegate-split
        the lead delegates, then plays `split` itself; the sub-agent plays
        `split`: one strike in each conversation, never two in one

How a step is said depends on what the request offers:

  tools        a call of the agent's own shell tool (picked by name from the
               request's `tools`; its command argument found in the schema, as
               a string or, for Codex's `shell`, an argv list). Edits are shell
               edits (`sed -i`): every agent's shell can run them, while edit
               tools differ in arguments and preconditions (read-before-edit).
  mini-swe     one fenced command per reply (mini-swe-agent's text protocol:
               ```mswea_bash_command in 2.x, ```bash in 1.x, as its prompt
               shows). In both of its modes it ends only when a command
               prints `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.
  aider        SEARCH/REPLACE blocks (aider's editblock format); aider itself
               runs the tests (`--auto-test`) and sends the failure back
  otherwise    None: side requests (titles, summaries) get the normal reply
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from tiergate.core.tokens import count_tokens
from tiergate.sim.prompt import SimCall, ToolDef
from tiergate.sim.responder import Reply, ToolCallOut, synthesize

ScriptName = Literal["fix", "loop", "split", "delegate", "delegate-loop", "delegate-split"]
SCRIPTS: tuple[ScriptName, ...] = (
    "fix",
    "loop",
    "split",
    "delegate",
    "delegate-loop",
    "delegate-split",
)
#: The sub-agent's script under each delegating script.
SUB_SCRIPT: dict[str, ScriptName] = {
    "delegate": "fix",
    "delegate-loop": "loop",
    "delegate-split": "split",
}
SPLIT_STEPS = 6
"""Model turns of `split`, the loop cut short: it gives up after its first strike."""
DELEGATED_MARKER = "[delegated by the lead agent]"
"""Starts the prompt the lead gives its sub-agent: how the simulator tells them apart."""
DELEGATED_TASK = (
    f"{DELEGATED_MARKER} test_calc.py fails. Run it, fix calc.py, run it again, report."
)
_AGENT_TOOL_NAMES = ("agent", "task")

TEST_COMMAND = "python3 -B -m unittest -v test_calc"
"""-B: an edit in the same second to a same-size file would otherwise be masked by a
stale .pyc (its check is mtime in whole seconds plus size)."""
FIX_COMMAND = "sed -i 's/return a - b/return a + b/' calc.py"
#: Two wrong edits the loop alternates between: both leave `add` subtracting.
WRONG_EDITS = (
    "sed -i 's/return a - b/return -(b - a)/' calc.py",
    "sed -i 's/return -(b - a)/return a - b/' calc.py",
)
LOOP_STEPS = 8
"""Model turns in the loop script before it gives up (the last one says done)."""
MINI_SWE_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
MINI_SWE_DONE = f"echo {MINI_SWE_SENTINEL}"
MINI_SWE_FENCE_V2 = "```mswea_bash_command"
"""mini-swe-agent 2.x text mode's action fence; 1.x used ```bash."""

CALC_BROKEN = "def add(a, b):\n    return a - b\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n"
TEST_CALC = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n"
    "        self.assertEqual(add(2, 1), 3)\n\n\n"
    'if __name__ == "__main__":\n    unittest.main()\n'
)


def scratch_project() -> dict[str, str]:
    """The files of the scratch project the scripts work on: path -> text."""
    return {"calc.py": CALC_BROKEN, "test_calc.py": TEST_CALC}


@dataclass(frozen=True, slots=True)
class Step:
    """One model turn: run `command` (None: say the work is done), with a remark."""

    command: str | None
    say: str
    edit: tuple[str, str] | None = None
    """(search, replace) in calc.py, for agents that edit with SEARCH/REPLACE."""


_RUN_TESTS = Step(TEST_COMMAND, "Run the tests to see what fails.")
_FIX = Step(FIX_COMMAND, "add subtracts; make it add.", ("return a - b", "return a + b"))
_WRONG = (
    Step(WRONG_EDITS[0], "Rewrite the subtraction.", ("return a - b", "return -(b - a)")),
    Step(WRONG_EDITS[1], "Undo that rewrite.", ("return -(b - a)", "return a - b")),
)
#: aider's fix: after one wrong edit, the right one (a fail -> edit -> pass is progress)
_FIX_AFTER_WRONG = Step(
    "sed -i 's/return -(b - a)/return a + b/' calc.py",
    "That still subtracts; make it add.",
    ("return -(b - a)", "return a + b"),
)
_DONE = Step(None, "The tests pass now: add returns the sum. Done.")
_DELEGATE = Step(None, "Hand the fix to a sub-agent.")
_LEAD_CHECK = Step(TEST_COMMAND, "Check the sub-agent's work: run the tests.")
_LEAD_DONE = Step(None, "The sub-agent's work is checked. Done.")
_GIVE_UP = Step(None, "The test still fails and I am out of ideas. Stopping.")
_STEPS: tuple[Step, ...] = (_RUN_TESTS, _FIX, *_WRONG, _FIX_AFTER_WRONG, _DONE, _GIVE_UP)
_STEPS += (_DELEGATE, _LEAD_CHECK, _LEAD_DONE)
_SCRIPTED = re.compile(
    "|".join(
        re.escape(text)
        for text in (*(s.say for s in _STEPS), *(s.command for s in _STEPS), MINI_SWE_DONE)
        if text
    )
)
"""What marks an assistant message as one of the script's turns."""


def script_step(name: ScriptName, turn: int, *, edits_only: bool = False) -> Step:
    """The step for the model's `turn`-th reply (0-based).

    `edits_only` is for agents that run the tests themselves after each edit
    (aider): their script is the edits alone; its fix is one wrong edit, then the
    right one (progress, which must never strike).
    """
    if name == "delegate-split":  # the lead: delegate, then its own short loop
        return _DELEGATE if turn == 0 else script_step("split", turn - 1)
    if name in SUB_SCRIPT:  # the lead's own turns (a sub-agent plays SUB_SCRIPT)
        return (_DELEGATE, _LEAD_CHECK)[turn] if turn < 2 else _LEAD_DONE
    if edits_only:
        if name == "fix":
            return (_WRONG[0], _FIX_AFTER_WRONG)[turn] if turn < 2 else _DONE
        return _WRONG[turn % 2] if turn < LOOP_STEPS - 1 else _GIVE_UP
    if name == "fix":
        return (_RUN_TESTS, _FIX, _RUN_TESTS)[turn] if turn < 3 else _DONE
    if turn >= (SPLIT_STEPS if name == "split" else LOOP_STEPS) - 1:
        return _GIVE_UP
    return _RUN_TESTS if turn % 2 == 0 else _WRONG[(turn // 2) % 2]


# ---- reading the request ------------------------------------------------------------

Dialect = Literal["tools", "mini-swe", "aider"]
_ASSISTANT_MARKERS = frozenset({"<|assistant|>\n", "<|model|>\n"})
_SHELL_NAMES = ("bash", "shell", "exec_command", "run_command", "execute", "terminal")
_COMMAND_KEYS = ("command", "cmd", "script")


def model_turns(call: SimCall) -> int:
    """The script's own turns already in the transcript: the step to answer with.

    An assistant message counts when it carries one of the script's remarks or
    commands. Counting every assistant message would be wrong for agents that
    put few-shot examples or canned acknowledgements in assistant messages
    (aider does both).
    """
    turns = 0
    role = ""
    counted = False
    for block in call.blocks:
        if block.marker:
            role, counted = block.text, False
            continue
        if role in _ASSISTANT_MARKERS and not counted and _SCRIPTED.search(block.text):
            turns += 1
            counted = True
    return turns


def shell_tool(tools: list[ToolDef]) -> ToolDef | None:
    """The agent's shell tool: an exact known name first, then a name containing one."""
    by_name = {t.name.lower(): t for t in tools}
    for name in _SHELL_NAMES:
        if name in by_name:
            return by_name[name]
    return next((t for t in tools if any(n in t.name.lower() for n in _SHELL_NAMES)), None)


def agent_tool(tools: list[ToolDef]) -> ToolDef | None:
    """The agent-spawning tool (Claude Code's Agent, opencode's task), if offered."""
    return next((t for t in tools if t.name.lower() in _AGENT_TOOL_NAMES), None)


def first_user_text(call: SimCall) -> str:
    """The text of the conversation's first user message."""
    out: list[str] = []
    inside = False
    for block in call.blocks:
        if block.marker:
            if inside:
                break
            inside = block.text == "<|user|>\n"
            continue
        if inside:
            out.append(block.text)
    return "".join(out)


def script_for(call: SimCall, name: ScriptName) -> ScriptName:
    """Which script this conversation plays: under a delegating script, a
    sub-agent plays its SUB_SCRIPT, the lead the delegating one."""
    if name not in SUB_SCRIPT:
        return name
    if DELEGATED_MARKER in first_user_text(call) or agent_tool(call.tools) is None:
        return SUB_SCRIPT[name]
    return name


def dialect(call: SimCall, prompt: str) -> Dialect | None:
    """How this request wants its step said; `prompt` is its text, markers left out."""
    if call.tools:
        return "tools" if shell_tool(call.tools) is not None else None
    if MINI_SWE_SENTINEL in prompt:
        return "mini-swe"
    if "SEARCH/REPLACE" in prompt and ">>>>>>> REPLACE" in prompt:
        return "aider"
    return None


# ---- saying a step ------------------------------------------------------------------


def scripted_reply(call: SimCall, name: ScriptName, digest: bytes) -> Reply | None:
    """The script's answer to this request, or None when it is not a scripted turn."""
    prompt = "".join(b.text for b in call.blocks if not b.marker)
    kind = dialect(call, prompt)
    if kind is None or call.last_turn == "assistant":
        return None
    seed = int.from_bytes(digest[:8], "big")
    name = script_for(call, name)
    step = script_step(name, model_turns(call), edits_only=kind == "aider")
    # mini-swe-agent ends only when a command prints its sentinel, tools or not
    command = step.command or (MINI_SWE_DONE if MINI_SWE_SENTINEL in prompt else None)
    reply = Reply(seed=seed, text=step.say)
    spawner = agent_tool(call.tools) if step is _DELEGATE else None
    if spawner is not None:
        arguments = delegate_arguments(spawner)
        reply.tool_calls = [ToolCallOut(f"{seed:016x}0000", spawner.name, arguments, None)]
        reply.tool_calls[0].input = orjson.loads(arguments)
        reply.finish = "tool_calls"
    elif kind == "tools" and command is not None:
        tool = shell_tool(call.tools)
        assert tool is not None
        arguments = shell_arguments(tool, command, random.Random(seed))
        reply.tool_calls = [ToolCallOut(f"{seed:016x}0000", tool.name, arguments, None)]
        reply.tool_calls[0].input = orjson.loads(arguments)
        reply.finish = "tool_calls"
    elif kind == "mini-swe":
        fence = MINI_SWE_FENCE_V2 if MINI_SWE_FENCE_V2 in prompt else "```bash"
        reply.text = f"THOUGHT: {step.say}\n\n{fence}\n{command}\n```"
    else:
        reply.text = step.say if step.edit is None else _aider_edit(step)
    reply.output_tokens = count_tokens(reply.text) + sum(
        count_tokens(c.name) + count_tokens(c.arguments) for c in reply.tool_calls
    )
    return reply


def shell_arguments(tool: ToolDef, command: str, rng: random.Random) -> str:
    """JSON arguments for `tool` that run `command`: the command in the schema's
    command property (an argv list when the schema wants an array), every other
    required property synthesised from its schema."""
    props: dict[str, Any] = tool.schema.get("properties") or {}
    key = next((k for k in _COMMAND_KEYS if k in props), "command")
    value: Any = command
    if (props.get(key) or {}).get("type") == "array":
        value = ["bash", "-lc", command]
    args: dict[str, Any] = {key: value}
    for name in tool.schema.get("required") or []:
        if name in args or not isinstance(name, str):
            continue
        if name == "description":
            args[name] = "Run a command in the project"
        else:
            args[name] = synthesize(props.get(name, {}), rng, 1, name)
    return orjson.dumps(args).decode()


def delegate_arguments(tool: ToolDef) -> str:
    """JSON arguments that start a sub-agent on DELEGATED_TASK and wait for it
    (Claude Code's Agent runs in the background unless told not to)."""
    props: dict[str, Any] = tool.schema.get("properties") or {}
    args: dict[str, Any] = {"description": "Fix the failing test", "prompt": DELEGATED_TASK}
    if "subagent_type" in props:
        args["subagent_type"] = "general-purpose"
    if "run_in_background" in props:
        args["run_in_background"] = False
    return orjson.dumps({k: v for k, v in args.items() if k in props or not props}).decode()


def _aider_edit(step: Step) -> str:
    assert step.edit is not None
    search, replace = step.edit
    return (
        f"{step.say}\n\ncalc.py\n```python\n<<<<<<< SEARCH\n    {search}\n=======\n"
        f"    {replace}\n>>>>>>> REPLACE\n```\n"
    )


_SCRIPT_NAME = re.compile(r"^[a-z-]+$")


def parse_script_name(raw: object) -> ScriptName | None:
    """A script name from a control request; None disarms; ValueError if unknown."""
    if raw is None:
        return None
    if isinstance(raw, str) and _SCRIPT_NAME.match(raw) and raw in SCRIPTS:
        return raw
    raise ValueError(f"unknown script {raw!r}; expected one of {', '.join(SCRIPTS)} or null")
