"""Strike producers: each named function, its positives and its near misses."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tiergate.core.model import (
    ChatRequest,
    ChatResponse,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
)
from tiergate.routing import strikes


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def assistant(*calls: ToolCall, text: str = "") -> Message:
    return Message("assistant", [TextPart(text)] if text else [], tool_calls=list(calls))


def call(cid: str, name: str, **args: Any) -> ToolCall:
    return ToolCall(cid, name, orjson.dumps(args).decode())


def result(cid: str, text: str, is_error: bool = False) -> Message:
    return Message("tool", [TextPart(text)], tool_call_id=cid, is_error=is_error)


def req(*msgs: Message) -> ChatRequest:
    return ChatRequest(model="orcarouter/coding", messages=list(msgs))


def resp(text: str = "", calls: tuple[ToolCall, ...] = (), finish: Any = "stop") -> ChatResponse:
    content = [TextPart(text)] if text else []
    return ChatResponse(
        id="x", model="m", content=content, tool_calls=list(calls), finish_reason=finish
    )


PYTEST_FAIL = "collected 3 items\n\ntests/test_a.py .F.\n\nFAILED tests/test_a.py::test_b\n"
PYTEST_PASS = "collected 3 items\n\ntests/test_a.py ...\n\n=== 3 passed in 0.12s ==="


# ---- output shapes --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'Traceback (most recent call last):\n  File "a.py", line 1\nZeroDivisionError: x',
        "ValueError: invalid literal",
        "error: could not compile `demo`",
        "src/main.c:3:5: error: expected ';'",
        "src/app.ts(4,1): error TS2322: Type 'x' is not assignable",
        "npm ERR! code ELIFECYCLE",
        "Process exited with code 2",
        '{"stdout": "", "exit_code": 1}',
        "bash: pytset: command not found",
        "panic: runtime error: index out of range\n\ngoroutine 1 [running]:",
        "error[E0308]: mismatched types",
        "FATAL: role does not exist",
        "cat: foo.txt: No such file or directory",
    ],
)
def test_error_shapes_are_recognised(text: str) -> None:
    assert strikes.looks_like_error(text)


@pytest.mark.parametrize(
    "text",
    [
        "try:\n    x = int(s)\nexcept ValueError:\n    x = 0\n",
        "Process finished with exit code 0",
        "Found 0 errors in 12 files.",
        "Error handling is covered in chapter 3.",
        "def raise_error():\n    raise RuntimeError('boom')\n",
        PYTEST_PASS,
    ],
)
def test_ordinary_output_is_not_an_error(text: str) -> None:
    assert not strikes.looks_like_error(text)


@pytest.mark.parametrize(
    "text",
    [
        PYTEST_FAIL,
        "=========== 2 failed, 10 passed in 1.31s ===========",
        "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: got 1",
        "FAIL\tgithub.com/acme/parse\t0.01s",
        "test result: FAILED. 3 passed; 1 failed; 0 ignored",
        "Tests:       1 failed, 4 passed, 5 total",
        "  2 passing (10ms)\n  1 failing\n",
        "Tests run: 12, Failures: 2, Errors: 0, Skipped: 0",
        "not ok 3 - handles empty input",
    ],
)
def test_test_failure_shapes_are_recognised(text: str) -> None:
    assert strikes.looks_like_test_failure(text)


def test_passing_test_runs_are_not_failures() -> None:
    assert not strikes.looks_like_test_failure(PYTEST_PASS)
    assert not strikes.looks_like_test_failure("Tests run: 12, Failures: 0, Errors: 0")
    assert not strikes.looks_like_test_failure("ok  \tgithub.com/acme/parse\t0.01s")


def test_huge_tool_output_is_scanned_at_head_and_tail_only() -> None:
    middle = "x" * 100_000
    assert strikes.looks_like_error("ok\n" + middle + "\nTraceback (most recent call last):")
    assert not strikes.looks_like_error("a" * 5000 + "\nValueError: hidden\n" + "b" * 100_000)


# ---- request side: evidence of no progress ------------------------------------------

EDIT = call("e", "Edit", file_path="a.py", old_string="x", new_string="y")


def pytest_fail(test: str = "test_b", value: int = 1) -> str:
    return (
        f"collected 3 items\n\ntests/test_a.py .F.\n\n"
        f"FAILED tests/test_a.py::{test} - AssertionError: assert {value} == 2\n"
        "=== 1 failed, 2 passed in 0.12s ===\n"
    )


def loop(*steps: tuple[ToolCall, str]) -> ChatRequest:
    """A session: the user's ask, then one call and its result per turn."""
    msgs: list[Message] = [user("make the test pass")]
    for i, (c, out) in enumerate(steps):
        c = ToolCall(f"{c.id}{i}", c.name, c.arguments)
        msgs += [assistant(c), result(c.id, out)]
    return req(*msgs)


def reasons(r: ChatRequest) -> list[str]:
    return [s.reason for s in strikes.request_strikes(r)]


TEST = call("t", "bash", command="pytest -q")


def test_a_failing_reproduction_before_any_edit_does_not_strike() -> None:
    assert reasons(loop((TEST, pytest_fail()))) == []
    assert reasons(loop((TEST, pytest_fail()), (TEST, "ok"))) == []


def test_fail_edit_pass_is_progress() -> None:
    r = loop((TEST, pytest_fail()), (EDIT, "ok"), (TEST, PYTEST_PASS))
    assert reasons(r) == []


def test_one_failed_fix_attempt_does_not_strike() -> None:
    r = loop((TEST, pytest_fail(value=1)), (EDIT, "ok"), (TEST, pytest_fail(value=3)))
    assert reasons(r) == []


def test_the_same_failure_surviving_two_edits_strikes() -> None:
    r = loop(
        (TEST, pytest_fail(value=1)),
        (EDIT, "ok"),
        (TEST, pytest_fail(value=3)),  # values differ: the same test id still fails
        (call("e", "Edit", file_path="a.py", old_string="y", new_string="z"), "ok"),
        (TEST, pytest_fail(value=4)),
    )
    s = strikes.request_strikes(r)
    assert [x.reason for x in s] == ["failure_survives_edits"] and s[0].side == "request"


def test_evidence_strikes_only_the_turn_that_carries_it() -> None:
    r = loop(
        (TEST, pytest_fail()),
        (EDIT, "ok"),
        (TEST, pytest_fail()),
        (call("e", "Edit", file_path="a.py", old_string="y", new_string="z"), "ok"),
        (TEST, pytest_fail()),
    )
    later = req(*r.messages, assistant(text="Still failing."), user("try something else"))
    assert reasons(r) == ["failure_survives_edits"] and reasons(later) == []


@pytest.mark.parametrize(
    "edit",
    [
        call("e", "Edit", file_path="a.py", old_string="x", new_string="y"),
        call("e", "apply_patch", input="*** Begin Patch"),
        call("e", "write_file", path="a.py", content="x = 1"),
        call("e", "str_replace_editor", command="str_replace", path="a.py", old_str="a"),
        call("e", "bash", command="sed -i 's/a/b/' a.py"),
        call("e", "shell", command="cat > a.py <<'EOF'\nx = 1\nEOF"),
        call("e", "create", path="new.py", content="x"),
    ],
)
def test_every_edit_shape_counts_as_an_edit(edit: ToolCall) -> None:
    assert strikes.is_edit_call(edit)
    other = call("e", "Edit", file_path="b.py", old_string="p", new_string="q")
    r = loop((TEST, pytest_fail()), (edit, "ok"), (TEST, pytest_fail()), (other, "ok"))
    assert reasons(req(*r.messages, assistant(TEST), result("t", pytest_fail()))) == [
        "failure_survives_edits"
    ]


@pytest.mark.parametrize(
    "not_edit",
    [
        call("e", "str_replace_editor", command="view", path="a.py"),
        call("e", "read_file", path="a.py"),
        call("e", "bash", command="ls -la 2>&1 > /dev/null"),
        call("e", "search", query="where is apply used"),
    ],
)
def test_reads_are_not_edits(not_edit: ToolCall) -> None:
    assert not strikes.is_edit_call(not_edit)


def test_same_failing_command_with_the_same_error_strikes() -> None:
    r = req(
        user("build it"),
        assistant(call("a", "bash", command="go build ./...", timeout=60)),
        result("a", "main.go:3:5: error: undefined: foo"),
        assistant(call("b", "bash", timeout=60, command="go build ./...")),  # key order differs
        result("b", "main.go:9:5: error: undefined: foo"),  # moved, same diagnostic
    )
    s = strikes.request_strikes(r)
    assert [x.reason for x in s] == ["repeated_failing_command"] and "bash" in s[0].detail


def test_same_command_with_a_new_error_does_not_strike() -> None:
    r = req(
        user("build it"),
        assistant(call("a", "bash", command="go build ./...")),
        result("a", "main.go:3:5: error: undefined: foo"),
        assistant(call("b", "bash", command="go build ./...")),
        result("b", "main.go:3:5: error: undefined: bar"),
    )
    assert reasons(r) == []


def test_repeated_command_that_succeeded_before_does_not_strike() -> None:
    r = req(
        user("build it"),
        assistant(call("a", "bash", command="go build ./...")),
        result("a", "ok"),
        assistant(call("b", "bash", command="go build ./...")),
        result("b", "error: undefined: bar"),
    )
    assert reasons(r) == []


def test_several_errored_results_in_one_turn_are_not_evidence_alone() -> None:
    r = req(
        user("fix it"),
        assistant(call("a", "bash", command="make"), call("b", "bash", command="make test")),
        result("a", "boom", is_error=True),
        result("b", "error: linker failed"),
    )
    assert reasons(r) == []


def test_an_edit_undone_and_redone_strikes() -> None:
    fwd = call("e", "Edit", file_path="a.py", old_string="x", new_string="y")
    back = call("e", "Edit", file_path="a.py", old_string="y", new_string="x")
    assert reasons(loop((fwd, "ok"), (back, "ok"))) == []  # one undo is fine
    assert reasons(loop((fwd, "ok"), (back, "ok"), (fwd, "ok"))) == ["edit_revert_cycle"]
    restore = call("r", "bash", command="git checkout -- a.py")
    r = loop((fwd, "ok"), (restore, ""), (fwd, "ok"), (restore, ""))
    assert reasons(r) == ["edit_revert_cycle"]
    passing = loop((fwd, "ok"), (back, "ok"), (TEST, PYTEST_PASS), (fwd, "ok"))
    assert reasons(passing) == []  # the count restarts after progress


def test_a_file_written_again_unchanged_is_not_a_revert() -> None:
    """Writing the content a file already has is a no-op (agents re-save a test
    file); only a write back to an earlier, different content is a revert."""
    x = call("w", "Write", file_path="t.py", content="x = 1\n")
    y = call("w", "Write", file_path="t.py", content="y = 2\n")
    assert reasons(loop((x, "ok"), (x, "ok"), (x, "ok"), (x, "ok"), (x, "ok"))) == []
    assert reasons(loop((x, "ok"), (y, "ok"), (x, "ok"), (y, "ok"))) == ["edit_revert_cycle"]


def test_new_failures_after_each_edit_with_nothing_passing_strike() -> None:
    steps: list[tuple[ToolCall, str]] = []
    for i in range(4):
        steps += [
            (call("e", "Edit", file_path="a.py", old_string=f"{i}", new_string=f"{i}!"), "ok"),
            (TEST, pytest_fail(test=f"test_{i}")),
        ]
    assert reasons(loop(*steps[:-2])) == []
    assert reasons(loop(*steps)) == ["diverging_failures"]
    passing = [*steps[:4], (TEST, PYTEST_PASS), *steps[4:]]
    assert reasons(loop(*passing)) == []  # a passing run in between is progress


# ---- response-side ---------------------------------------------------------------


@pytest.mark.parametrize("args", ['{"path": "a.py"', "[1, 2]", "not json", '"str"'])
def test_malformed_tool_arguments_strike(args: str) -> None:
    s = strikes.malformed_tool_arguments(resp(calls=(ToolCall("c", "Edit", args),)))
    assert s is not None and s.side == "response" and s.detail == "Edit"


@pytest.mark.parametrize("args", ['{"path": "a.py"}', "{}", "", "  "])
def test_well_formed_tool_arguments_do_not_strike(args: str) -> None:
    assert strikes.malformed_tool_arguments(resp(calls=(ToolCall("c", "Edit", args),))) is None


def test_empty_completion() -> None:
    assert strikes.empty_completion(resp()) is not None
    assert strikes.empty_completion(resp("  \n ")) is not None
    thinking_only = ChatResponse(id="x", model="m", content=[ThinkingPart("hmm")])
    assert strikes.empty_completion(thinking_only) is not None
    assert strikes.empty_completion(resp("done")) is None
    assert strikes.empty_completion(resp(calls=(ToolCall("c", "bash", "{}"),))) is None
    assert strikes.empty_completion(resp(finish="content_filter")) is None
    assert strikes.empty_completion(resp(finish="length")) is None  # truncation's signal


def test_truncated_by_length() -> None:
    assert strikes.truncated_by_length(resp("partial", finish="length")) is not None
    assert strikes.truncated_by_length(resp("complete")) is None


def test_aggregators_collect_every_producer() -> None:
    bad = resp(calls=(ToolCall("c", "Edit", "{oops"),), finish="length")
    assert [s.reason for s in strikes.response_strikes(bad)] == [
        "malformed_tool_arguments",
        "truncated_by_length",
    ]
    assert strikes.request_strikes(req(user("hello"))) == []
    fwd = call("e", "Edit", file_path="a.py", old_string="x", new_string="y")
    back = call("e", "Edit", file_path="a.py", old_string="y", new_string="x")
    make = call("m", "bash", command="make")
    err = "main.c:3:1: error: x undeclared"  # a structured failure identity (a diagnostic)
    r = loop((make, err), (fwd, "ok"), (make, err), (back, "ok"))
    r = req(*r.messages, assistant(fwd, make), result("e", "ok"), result("m", err))
    assert reasons(r) == ["failure_survives_edits", "edit_revert_cycle"]


# ---- turn structure ---------------------------------------------------------------


def test_latest_turn_skips_an_assistant_prefill() -> None:
    r = req(user("a"), assistant(text="x"), user("b"), Message("assistant", [TextPart("{")]))
    assert [m.text() for m in strikes.latest_turn(r)] == ["b"]


def test_turn_id_is_stable_for_retries_and_new_for_new_turns() -> None:
    first = req(user("fix"), assistant(call("a", "bash", command="make")), result("a", "boom"))
    retry = req(user("fix"), assistant(call("a", "bash", command="make")), result("a", "boom"))
    later = req(*first.messages, assistant(call("b", "bash", command="make")), result("b", "boom"))
    assert strikes.turn_id(first) == strikes.turn_id(retry)
    assert strikes.turn_id(first) != strikes.turn_id(later)
