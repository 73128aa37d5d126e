"""Strikes that misfired on normal agent work (issue #15 part 4), each as a hand-written
session: what must not strike, beside the genuine no-progress shape that still must.

Categories found by eval/strike_audit.py on real tool-call sessions: edits of the
agent's own scratch scripts counted as fix attempts; an environment's warning noise
(the same output tail on every command) and warning diagnostics taken as one
failure surviving edits; a to-do list tool counted as an edit; probes run between
two edits counted as diverging failures.
"""

from __future__ import annotations

import orjson

from tiergate.core.model import Message, TextPart, ToolCall
from tiergate.routing.actions import is_edit_call
from tiergate.routing.progress import DIVERSITY_STRIKE, is_identity, progress_of

ASK = Message("user", [TextPart("Fix the date parser bug described in the issue.")])

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "repro.py", line 3, in <module>\n'
    "    parse('2020-01-01')\n"
    '  File "/repo/pkg/dates.py", line 41, in parse\n'
    "    raise ValueError(value)\n"
    "ValueError: 2020-01-01\n"
)
NOISE = (  # what every python run of a broken site-packages prints at its end
    "Error processing line 1 of /opt/env/lib/python3.8/site-packages/vendor-nspkg.pth:\n"
    "  Traceback (most recent call last):\n"
    "    AttributeError: 'NoneType' object has no attribute 'loader'\n"
    "Remainder of file ignored\n"
)


class Session:
    """A tool-call session built step by step (Claude Code's tool names)."""

    def __init__(self) -> None:
        self.messages: list[Message] = [ASK]
        self.n = 0

    def call(self, name: str, result: str, **args: object) -> Session:
        self.n += 1
        cid = f"t{self.n}"
        call = ToolCall(cid, name, orjson.dumps(args).decode())
        self.messages.append(Message("assistant", tool_calls=[call]))
        self.messages.append(Message("tool", [TextPart(result)], tool_call_id=cid))
        return self

    def bash(self, command: str, result: str) -> Session:
        return self.call("Bash", result, command=command)

    def write(self, path: str, content: str) -> Session:
        return self.call(
            "Write", f"File created successfully at: {path}", file_path=path, content=content
        )

    def edit(self, path: str, old: str, new: str) -> Session:
        return self.call(
            "Edit",
            f"The file {path} has been updated.",
            file_path=path,
            old_string=old,
            new_string=new,
        )

    def reasons(self) -> list[str]:
        return [s.reason for s in progress_of(self.messages).stuck]


def test_editing_a_scratch_script_is_not_a_fix_attempt() -> None:
    s = Session().write("repro.py", "from pkg.dates import parse\nparse('2020-01-01')\n")
    s.bash("python repro.py", TRACEBACK)
    s.edit("repro.py", "parse('2020-01-01')", "print(parse('2020-01-01'))")
    s.bash("python repro.py", TRACEBACK)
    s.write("repro.py", "from pkg.dates import parse\nprint(repr(parse('2020-01-01')))\n")
    s.bash("python repro.py", TRACEBACK)
    assert s.reasons() == []
    # the same failure surviving two edits of the project still strikes
    s.edit("pkg/dates.py", "raise ValueError(value)", "raise ValueError(value.strip())")
    s.bash("python repro.py", TRACEBACK)
    s.edit("pkg/dates.py", "value.strip()", "value.strip(' ')")
    s.bash("python repro.py", TRACEBACK)
    assert s.reasons() == ["failure_survives_edits"]


def test_a_whole_file_write_of_a_file_read_before_is_a_fix_attempt() -> None:
    s = Session().bash("python repro.py", TRACEBACK)
    s.call("Read", "1\tdef parse(value):", file_path="pkg/dates.py")
    s.write("pkg/dates.py", "def parse(value):\n    raise ValueError(value)\n")
    s.bash("python repro.py", TRACEBACK)
    s.write("pkg/dates.py", "def parse(value):\n    raise ValueError(str(value))\n")
    s.bash("python repro.py", TRACEBACK)
    assert s.reasons() == ["failure_survives_edits"]


def test_a_heredoc_probe_script_is_scratch_in_the_text_protocol_too() -> None:
    def step(command: str, code: int, out: str) -> list[Message]:
        reply = Message("assistant", [TextPart(f"```bash\n{command}\n```")])
        body = f"<returncode>{code}</returncode>\n<output>\n{out}</output>"
        return [reply, Message("user", [TextPart(body)])]

    msgs = [ASK]
    for i in range(DIVERSITY_STRIKE + 1):  # rewrite the probe, run it: a new failure each time
        script = f"cat > probe.py << 'EOF'\nfrom pkg.dates import parse\nparse('{i}')\nEOF"
        msgs += step(script, 0, "")
        out = TRACEBACK.replace("2020-01-01", str(i)).replace("ValueError", f"Case{i}Error")
        msgs += step("python probe.py", 1, out)
    progress = progress_of(msgs)
    assert progress.edits == DIVERSITY_STRIKE + 1 and progress.fix_edits == 0
    assert progress.stuck == ()


def test_the_same_noise_tail_on_every_command_is_not_one_failure() -> None:
    s = Session().bash("python repro.py", "parsed: None\n" + NOISE)
    s.edit("pkg/dates.py", "return None", "return date(y, m, d)")
    s.bash("python repro.py", "parsed: 2020-01-01\n" + NOISE)
    s.edit("pkg/dates.py", "date(y, m, d)", "date(int(y), int(m), int(d))")
    s.bash("python -m json.tool out.json", '{"ok": true}\n' + NOISE)
    assert s.reasons() == []


def test_a_warning_diagnostic_is_not_a_failure_identity() -> None:
    warning = "/repo/pkg/dates.py:12: DeprecationWarning: the 'fuzzy' argument is deprecated\n"
    s = Session().bash("python repro.py", warning + TRACEBACK)
    s.edit("pkg/dates.py", "raise ValueError(value)", "return None")
    s.bash("python repro.py", warning + "parsed: None\n")
    s.edit("pkg/dates.py", "return None", "return date(y, m, d)")
    s.bash("python repro.py", warning + "parsed: 2020-01-01\n")
    assert "failure_survives_edits" not in s.reasons()
    assert not is_identity("diag:/repo/pkg/dates.py:DeprecationWarning: the 'fuzzy' argument")
    assert is_identity("diag:src/main.c:expected ';' before '}' token")
    assert is_identity("exc:ValueError@/repo/pkg/dates.py:parse")
    assert not is_identity("out:0badcafe")


def test_a_todo_list_tool_is_not_a_file_edit() -> None:
    todos = orjson.dumps({"todos": [{"content": "Fix parser", "status": "pending"}]}).decode()
    assert not is_edit_call(ToolCall("c", "TodoWrite", todos))
    assert is_edit_call(ToolCall("c", "Write", '{"file_path": "a.py", "content": "x"}'))
    assert is_edit_call(ToolCall("c", "apply_patch", '{"input": "*** Update File: a.py"}'))
    s = Session().call("TodoWrite", "Todos have been modified successfully.", todos=[])
    assert progress_of(s.messages).edits == 0


def test_probes_between_two_edits_do_not_diverge() -> None:
    s = Session().bash("python repro.py", TRACEBACK)
    s.edit("pkg/dates.py", "raise ValueError(value)", "raise TypeError(value)")
    for i in range(DIVERSITY_STRIKE + 1):  # python -c probes, each failing its own way
        s.bash(f"python -c 'import pkg; pkg.probe{i}()'", f"KeyError{i}Error: probe {i}\n")
    assert s.reasons() == []


def test_every_fix_attempt_breaking_something_new_still_diverges() -> None:
    s = Session()
    for i in range(DIVERSITY_STRIKE):
        s.edit("pkg/dates.py", f"v{i}", f"v{i + 1}")
        s.bash("pytest -q tests/test_dates.py", f"FAILED tests/test_dates.py::test_case_{i}\n")
    assert s.reasons() == ["diverging_failures"]


def test_the_same_rejected_edit_repeated_still_strikes() -> None:
    rejected = "No replacement was performed. `new_str` and `old_str` must be different."
    s = Session()
    for _ in range(2):
        s.call(
            "str_replace_editor",
            f"ERROR: {rejected}",
            command="str_replace",
            path="pkg/dates.py",
            old_str="x = 1",
            new_str="x = 1",
        )
    assert s.reasons() == ["repeated_failing_command"]


def test_a_patch_is_a_fix_attempt_not_a_file_creation() -> None:
    """A patch changes part of a file: its first edit of a path is no scratch file."""
    s = Session().bash("python repro.py", TRACEBACK)
    for n in range(2):
        patch = f"--- a/pkg/dates.py\n+++ b/pkg/dates.py\n@@ -1 +1 @@\n-v{n}\n+v{n + 1}\n"
        s.call("apply_patch", "Done!", patch=patch)
        s.bash("python repro.py", TRACEBACK)
    progress = progress_of(s.messages)
    assert progress.fix_edits == 2 and not progress.scratch
    assert s.reasons() == ["failure_survives_edits"]


def test_checks_run_again_after_each_attempt_each_count() -> None:
    """The tests and the reproduction, both run before, both failing anew after each
    of two fix attempts: four new failures from re-run checks diverge."""
    s = Session().bash("pytest -q tests/test_dates.py", "FAILED tests/test_dates.py::test_iso\n")
    s.bash("python repro.py", TRACEBACK)
    for n in range(2):
        s.edit("pkg/dates.py", f"v{n}", f"v{n + 1}")
        s.bash("pytest -q tests/test_dates.py", f"FAILED tests/test_dates.py::test_case_{n}\n")
        s.bash("python repro.py", TRACEBACK.replace("ValueError", f"Attempt{n}Error"))
    assert DIVERSITY_STRIKE == 4 and s.reasons() == ["diverging_failures"]
