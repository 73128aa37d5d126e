"""Output shapes: does a command's output read like a failure?

The error and test-failure shapes common toolchains print (tracebacks, `error:`
lines, non-zero exit codes, compiler diagnostics, pytest/go/cargo/jest/junit
failure summaries), as precompiled whole-window searches. Pure, no state. Used by
routing.observations (one classifier for tool results and text observations)
and re-exported by routing.strikes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Output is scanned at its head and tail only: errors print there, and a
#: multi-megabyte file read must not cost a full regex pass.
SCAN_HEAD = 4096
SCAN_TAIL = 4096

# Every shape matches within one line, so "some line of the window has the
# shape" is a search of the whole window, with no per-line Python loop. The
# window starts with "\n", so shapes that begin a line are searched as
# "\n" + shape, a literal the engine finds fast; whitespace is `[^\S\n]`, so no
# branch runs on into the next line. Shapes found anywhere in a line start with
# an uncommon literal and check any word boundary or prefix before it with a
# lookbehind, so the engine skips to that literal instead of trying every
# position. A few costly shapes are searched only when a literal they need is
# present (the gate). tests/test_scan_equivalence.py checks all of this against
# the original per-line formulation.

_WS = r"[^\S\n]"  # whitespace within a line


@dataclass(frozen=True, slots=True)
class _Shapes:
    """The shapes of one kind of failure, as whole-window searches."""

    line_start: tuple[str, ...] = ()
    """Shapes that begin a line."""
    indented: tuple[str, ...] = ()
    """Shapes that begin a line after optional whitespace."""
    in_line: tuple[str, ...] = ()
    """Shapes found anywhere in a line (searched as one pattern per leading literal)."""
    gated: tuple[tuple[str, str], ...] = ()
    """(gate, shape): the shape, a whole-window pattern, is searched only if the gate
    pattern occurs."""

    def __add__(self, other: _Shapes) -> _Shapes:
        return _Shapes(
            self.line_start + other.line_start,
            self.indented + other.indented,
            self.in_line + other.in_line,
            self.gated + other.gated,
        )

    def searches(self) -> tuple[tuple[re.Pattern[str] | None, re.Pattern[str]], ...]:
        """(gate or None, pattern) pairs; the window has a shape iff some gate-passing
        pattern is found in it."""
        lines = list(self.line_start)
        if self.indented:
            lines.append(rf"{_WS}*+(?:{'|'.join(self.indented)})")
        out: list[tuple[str | None, str]] = [(None, rf"\n(?:{'|'.join(lines)})")]
        by_literal: dict[str, list[str]] = {}
        for shape in self.in_line:
            by_literal.setdefault(shape[0], []).append(shape)
        out += [(None, "|".join(shapes)) for shapes in by_literal.values()]
        out += list(self.gated)
        return tuple(
            (None if gate is None else re.compile(gate), re.compile(pattern, re.MULTILINE))
            for gate, pattern in out
        )


_ERROR_SHAPES = _Shapes(
    line_start=(r"Segmentation fault", r"goroutine \d+ \["),
    indented=(
        r"(?:error|fatal|panic|Error|Fatal|FATAL|ERROR)(?:\[[\w-]+\])?:",  # error: / panic:
        r"ERROR\b",
    ),
    in_line=(
        r"Traceback \(most recent call last\)",
        r"TS(?<=\berror TS)\d+\b",  # tsc: error TS2304
        r":\d+(?::\d+)?: (?:fatal )?error\b",  # file.c:3:5: error
        r"x(?<=\bex)it(?:ed)?(?: with)?[ _]?(?:code|status)\b[\"']?"
        rf"{_WS}*[:=]?{_WS}*-?[1-9]",  # exit code 1, exited with status 2
        r"x(?<=\bnon-zero ex)it status\b",
        r"!(?<=\bnpm ERR!)",
        r"N(?<!\wN)o such file or directory\b",
        r"P(?<!\wP)ermission denied\b",
    ),
    gated=(
        # ValueError: x, pkg.errors.ParseError[E12]: y (the line's first dotted name
        # ends in Error or Exception)
        (
            r"E(?:rror|xception)[:\[]",
            r"\n" + _WS + r"*+[A-Za-z_][\w.]*+(?:(?<=Error)|(?<=Exception))(?:\[\w+\])?: ",
        ),
        # compiler/linter diagnostics without the word "error" (Go's `./x.go:41:7:
        # undefined: y`, flake8, eslint's unix format): path:line:col: message
        (r":\d+:\d+: ", r"\n" + _WS + r"*+[^\s:]+\.\w+:\d+:\d+: \S"),
        (r"command not found", r"\bcommand not found\b"),
    ),
)
_TEST_FAILURE_SHAPES = _Shapes(
    line_start=(
        r"=+ .*\b\d+ (?:failed|errors?)\b",  # pytest summary line
        rf"FAIL(?:ED \S|{_WS}+\S|$)",  # pytest short summary; go package result
        r"--- FAIL: ",  # go test
        rf"Tests:{_WS}+.*\b\d+ failed\b",  # jest
        r"not ok \d+",  # TAP
    ),
    indented=(
        r"\d+ failing\b",  # mocha
        r"AssertionError\b",
    ),
    in_line=(
        r"T(?<!\wT)ests run: \d+, Failures: (?:[1-9]|\d+, Errors: [1-9])",  # junit / maven
        r":(?<=\btest result:) FAILED\b",  # cargo
    ),
    gated=((r" completed, ", r"\b\d+ tests? completed, \d+ failed\b"),),  # gradle
)
_ERROR_SEARCHES = _ERROR_SHAPES.searches()
_TEST_FAILURE_SEARCHES = _TEST_FAILURE_SHAPES.searches()
_FAILURE_SEARCHES = (_ERROR_SHAPES + _TEST_FAILURE_SHAPES).searches()


def _window(text: str) -> str:
    """The text after a newline (so every line starts after one); its head and
    tail only when it is long."""
    if len(text) <= SCAN_HEAD + SCAN_TAIL:
        return "\n" + text
    return "\n" + text[:SCAN_HEAD] + "\n" + text[-SCAN_TAIL:]


def _has_shape(
    searches: tuple[tuple[re.Pattern[str] | None, re.Pattern[str]], ...], text: str
) -> bool:
    window = _window(text)
    return any(
        (gate is None or gate.search(window) is not None) and pattern.search(window) is not None
        for gate, pattern in searches
    )


def looks_like_error(text: str) -> bool:
    """True when tool output has the shape of a failed command or crash: a line
    of its head or tail shows a traceback, an `error:` line, a non-zero exit
    code, a compiler diagnostic, ..."""
    return _has_shape(_ERROR_SEARCHES, text)


def looks_like_test_failure(text: str) -> bool:
    """True when tool output has the shape of a failing test run (pytest, go
    test, cargo, jest, mocha, junit, gradle, TAP)."""
    return _has_shape(_TEST_FAILURE_SEARCHES, text)


def looks_failed(text: str) -> bool:
    """looks_like_error(text) or looks_like_test_failure(text), searched once."""
    return _has_shape(_FAILURE_SEARCHES, text)
