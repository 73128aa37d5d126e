"""The fast line-triggered shape detectors agree with a plain line-by-line search
of the original combined patterns, on arbitrary mixes of realistic lines."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.routing.strikes import looks_like_error, looks_like_test_failure

_ERROR_SHAPE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^\s*(?:[A-Za-z_][\w.]*)?(?:Error|Exception)(?:\[\w+\])?: "  # ValueError: x
    r"|^\s*(?:error|fatal|panic|Error|Fatal|FATAL|ERROR)(?:\[[\w-]+\])?:"  # error: / panic:
    r"|^\s*ERROR\b"
    r"|:\d+(?::\d+)?: (?:fatal )?error\b"  # file.c:3:5: error
    r"|\berror TS\d+\b"  # tsc
    r"|\bnpm ERR!"
    r"|\bexit(?:ed)?(?: with)?[ _]?(?:code|status)\b[\"']?\s*[:=]?\s*-?[1-9]"
    r"|\bnon-zero exit status\b"
    r"|\bcommand not found\b"
    r"|\bNo such file or directory\b"
    r"|\bPermission denied\b"
    r"|^Segmentation fault"
    r"|^goroutine \d+ \["
    r"|^\s*[^\s:]+\.\w+:\d+:\d+: \S",  # added later: compiler diagnostics (Go, linters)
    re.MULTILINE,
)
_TEST_FAILURE_SHAPE = re.compile(
    r"^=+ .*\b\d+ (?:failed|errors?)\b"  # pytest summary line
    r"|^FAILED \S"  # pytest short summary
    r"|^--- FAIL: "  # go test
    r"|^FAIL(?:\s+\S|$)"  # go package result
    r"|\btest result: FAILED\b"  # cargo
    r"|^Tests:\s+.*\b\d+ failed\b"  # jest
    r"|^\s*\d+ failing\b"  # mocha
    r"|\bTests run: \d+, Failures: (?:[1-9]|\d+, Errors: [1-9])"  # junit / maven
    r"|\b\d+ tests? completed, \d+ failed\b"  # gradle
    r"|^not ok \d+"  # TAP
    r"|^\s*AssertionError\b",
    re.MULTILINE,
)

LINES = [
    "Traceback (most recent call last):",
    '  File "app.py", line 3, in <module>',
    "ValueError: bad value",
    "pkg.errors.ParseError[E12]: nope",
    "error: could not compile",
    "error[E0308]: mismatched types",
    "fatal: not a git repository",
    "panic: runtime error",
    "ERROR  something",
    "main.c:3:5: error: expected ';'",
    "src/a.ts(3,1): error TS2304: x",
    "npm ERR! code ELIFECYCLE",
    "Process exited with code 1",
    "exit status 2",
    "returned non-zero exit status 1",
    "bash: foo: command not found",
    "cat: x: No such file or directory",
    "open x: Permission denied",
    "Segmentation fault",
    "goroutine 1 [running]:",
    "func f() error { return nil }",
    "if err != nil { return err }",
    "=== 2 failed, 3 passed in 0.2s ===",
    "===== 1 error in 2s =====",
    "FAILED tests/a.py::t",
    "--- FAIL: TestX (0.00s)",
    "FAIL",
    "FAIL\tpkg/x\t0.1s",
    "test result: FAILED. 1 passed",
    "Tests:       1 failed, 2 passed",
    "  3 failing",
    "Tests run: 4, Failures: 1, Errors: 0",
    "Tests run: 4, Failures: 0, Errors: 2",
    "5 tests completed, 1 failed",
    "not ok 3 - x",
    "AssertionError: boom",
    "ok   pkg/pool 0.01s",
    "PASS",
    "all good",
    "exit code 0",
    "the error handling is fine",
    "Exceptional work",
    "  ",
    "",
    "errors are values",
]


def oracle(pattern: re.Pattern[str], text: str) -> bool:
    return any(pattern.search(line) for line in text.split("\n"))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(LINES) | st.text(max_size=30), max_size=12))
def test_fast_detectors_agree_with_the_patterns(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert looks_like_error(text) == oracle(_ERROR_SHAPE, text)
    assert looks_like_test_failure(text) == oracle(_TEST_FAILURE_SHAPE, text)


def test_every_sample_line_is_classified_like_the_patterns() -> None:
    for line in LINES:
        assert looks_like_error(line) == oracle(_ERROR_SHAPE, line), line
        assert looks_like_test_failure(line) == oracle(_TEST_FAILURE_SHAPE, line), line
