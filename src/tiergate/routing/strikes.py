"""Strike producers: post-success quality signals that a session is failing.

Class C of the escalation triggers (report §4.1, §7). Agent sessions fail by
looping, not by getting lexically harder, so these signals catch what the
difficulty gate cannot see. Every producer is a pure function returning a
`Strike` or None; none of them reads state or logs text.

Request-side producers read the incoming request's *latest turn* (everything
after the last assistant message: the tool results and new user text), which
reports how the previous turn's work went. Response-side producers read the
upstream response and are applied at commit, affecting the next turn.

Infrastructure failure is never capability failure: 429s, 5xx and channel
fallbacks are not strikes, so callers feed `response_strikes` only the final,
successful response.

The heuristics are deliberately generic: explicit `is_error` flags, and the
output shapes common toolchains print (tracebacks, `error:` lines, non-zero
exit codes, pytest/go/cargo/jest/junit failure summaries).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from tiergate.core.model import ChatRequest, ChatResponse, Message, ToolCall

StrikeSide = Literal["request", "response"]

#: "Several" errored tool results in one turn.
MIN_ERRORED_RESULTS = 2
#: A failing command seen this many times (latest turn included) is a loop.
MIN_COMMAND_REPEATS = 2
#: Tool output is scanned at its head and tail only: errors print there, and
#: a multi-megabyte file read must not cost a full regex pass.
_SCAN_HEAD = 4096
_SCAN_TAIL = 4096


@dataclass(frozen=True, slots=True)
class Strike:
    """One quality signal. `detail` is a count or tool name, never prompt text."""

    reason: str
    side: StrikeSide
    detail: str = ""


_EDIT_NAME_TOKENS = frozenset(
    {"write", "edit", "patch", "apply", "replace", "insert", "multiedit", "applypatch"}
)
_FILE_VERB_TOKENS = frozenset({"create", "save", "append", "update", "modify", "overwrite"})
_FILE_ARG_KEYS = frozenset({"path", "file", "file_path", "filepath", "filename", "target_file"})
_EDIT_ARG_KEYS = frozenset(
    {"old_string", "new_string", "old_str", "new_str", "patch", "diff", "file_text", "edits"}
)
_READ_ONLY_COMMANDS = frozenset({"view", "read", "cat", "list", "ls", "search", "find"})
_SHELL_EDIT = re.compile(
    r"\bsed\s+(?:-\w+\s+)*-i"
    r"|\bperl\s+-\w*i"
    r"|\bapply_patch\b"
    r"|\bgit\s+apply\b"
    r"|\bpatch\s+(?:-\w+\s+)*-p\d"
    r"|(?:^|[^>&\d])>{1,2}\s*['\"]?[\w./-]+\.\w+"
    r"|\btee\s+(?:-a\s+)?['\"]?[\w./-]+\.\w+"
)
_TOKEN_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


# ---- output shapes ------------------------------------------------------------

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
    if len(text) <= _SCAN_HEAD + _SCAN_TAIL:
        return "\n" + text
    return "\n" + text[:_SCAN_HEAD] + "\n" + text[-_SCAN_TAIL:]


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


def _looks_failed(text: str) -> bool:
    """looks_like_error(text) or looks_like_test_failure(text), searched once."""
    return _has_shape(_FAILURE_SEARCHES, text)


def _parse_args(arguments: str) -> Any:
    if not arguments.strip():
        return {}
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return None


def is_edit_call(call: ToolCall) -> bool:
    """Does this tool call look like it changed files (write/edit/patch/apply)?"""
    tokens = {t.lower() for t in _TOKEN_SPLIT.split(call.name) if t}
    args = _parse_args(call.arguments)
    if isinstance(args, dict):
        command = args.get("command")
        if isinstance(command, str) and command.strip().lower() in _READ_ONLY_COMMANDS:
            return False
        if _EDIT_ARG_KEYS.intersection(args):
            return True
        if tokens & _FILE_VERB_TOKENS and _FILE_ARG_KEYS.intersection(args):
            return True
        shell = " ".join(v for v in args.values() if isinstance(v, str))
        if isinstance(command, list):
            shell += " " + " ".join(str(v) for v in command)
        if _SHELL_EDIT.search(shell):
            return True
    return bool(tokens & _EDIT_NAME_TOKENS)


# ---- request structure --------------------------------------------------------


def latest_turn(req: ChatRequest) -> list[Message]:
    """Messages after the last assistant message (all of them on turn one).

    Trailing assistant messages are a prefill the client asks the model to
    continue, not a turn boundary, so they are skipped (as the delta scorer does).
    """
    msgs = req.messages
    end = len(msgs)
    while end > 0 and msgs[end - 1].role == "assistant":
        end -= 1
    start = end
    while start > 0 and msgs[start - 1].role != "assistant":
        start -= 1
    return list(msgs[start:end])


def _tool_results(messages: Sequence[Message]) -> Iterator[Message]:
    return (m for m in messages if m.role == "tool")


def _call_index(req: ChatRequest) -> dict[str, ToolCall]:
    return {c.id: c for m in req.messages if m.role == "assistant" for c in m.tool_calls}


def _call_signature(call: ToolCall) -> tuple[str, str]:
    """The call's identity for repeat detection: name plus canonical arguments."""
    args = _parse_args(call.arguments)
    if args is None:
        canonical = " ".join(call.arguments.split())
    else:
        canonical = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    return call.name, canonical


def turn_id(req: ChatRequest) -> str:
    """A stable id for this request's turn, for strike deduplication.

    A client retry re-sends the same body and gets the same id, so it cannot
    count twice; the same failure text at a later position in the transcript
    is a new turn and gets a new id. Callers without a client-supplied
    idempotency key pass this as the turn's request id.
    """
    h = hashlib.blake2b(digest_size=8)
    h.update(str(len(req.messages)).encode())
    for m in latest_turn(req):
        h.update(b"\x00" + m.role.encode() + b"\x00" + (m.tool_call_id or "").encode())
        h.update(b"\x01" if m.is_error else b"\x02")
        h.update(m.text().encode("utf-8", "surrogatepass"))
    return h.hexdigest()


# ---- request-side producers ---------------------------------------------------


class _Turn:
    """A request's latest turn, with each tool result's verdict computed once.

    `request_strikes` runs three producers over the same tool results; sharing
    one `_Turn` means each result is searched once, not three times.
    """

    __slots__ = ("_failed", "latest", "req", "results")

    def __init__(self, req: ChatRequest) -> None:
        self.req = req
        self.latest = latest_turn(req)
        self.results = list(_tool_results(self.latest))
        self._failed: dict[int, bool] = {}

    def failed(self, msg: Message) -> bool:
        """Flagged as an error, or error- or test-failure-shaped."""
        verdict = self._failed.get(id(msg))
        if verdict is None:
            verdict = msg.is_error or _looks_failed(msg.text())
            self._failed[id(msg)] = verdict
        return verdict

    def test_failed(self, msg: Message) -> bool:
        """Test-failure-shaped (a shape that would also make `failed` true)."""
        if not msg.is_error and not self.failed(msg):
            return False
        return looks_like_test_failure(msg.text())


def _errored_tool_results(turn: _Turn) -> Strike | None:
    failed = sum(1 for m in turn.results if turn.failed(m))
    if failed >= MIN_ERRORED_RESULTS:
        return Strike("errored_tool_results", "request", f"{failed} failed results")
    return None


def _failing_tests_after_edit(turn: _Turn) -> Strike | None:
    if not any(turn.test_failed(m) for m in turn.results):
        return None
    msgs = turn.req.messages
    if any(is_edit_call(c) for m in msgs if m.role == "assistant" for c in m.tool_calls):
        return Strike("failing_tests_after_edit", "request")
    return None


def _repeated_failing_command(turn: _Turn) -> Strike | None:
    failing = [m for m in turn.results if turn.failed(m)]
    if not failing:
        return None  # the common case: no call index, no signatures
    calls = _call_index(turn.req)
    failing_now: dict[tuple[str, str], int] = {}
    for m in failing:
        call = calls.get(m.tool_call_id or "")
        if call is not None:
            sig = _call_signature(call)
            failing_now[sig] = failing_now.get(sig, 0) + 1
    if not failing_now:
        return None
    latest_ids = {id(m) for m in turn.latest}
    counts = dict(failing_now)
    for m in _tool_results(turn.req.messages):
        if id(m) in latest_ids:
            continue
        call = calls.get(m.tool_call_id or "")
        if call is None:
            continue
        sig = _call_signature(call)
        if sig in counts and turn.failed(m):  # signature check first: it is cheap
            counts[sig] += 1
    for (name, _), n in counts.items():
        if n >= MIN_COMMAND_REPEATS:
            return Strike("repeated_failing_command", "request", f"{name} x{n}")
    return None


def errored_tool_results(req: ChatRequest) -> Strike | None:
    """Several tool results in the latest turn failed (flagged or error-shaped)."""
    return _errored_tool_results(_Turn(req))


def failing_tests_after_edit(req: ChatRequest) -> Strike | None:
    """Tests fail in the latest turn after the agent has already edited files.

    (Not named `test_...`: pytest would collect it from any test importing it.)
    """
    return _failing_tests_after_edit(_Turn(req))


def repeated_failing_command(req: ChatRequest) -> Strike | None:
    """A command that fails now already failed, with identical arguments, earlier."""
    return _repeated_failing_command(_Turn(req))


# ---- response-side producers --------------------------------------------------


def malformed_tool_arguments(resp: ChatResponse) -> Strike | None:
    """A tool call whose arguments are not a JSON object."""
    for call in resp.tool_calls:
        if not isinstance(_parse_args(call.arguments), dict):
            return Strike("malformed_tool_arguments", "response", call.name)
    return None


def empty_completion(resp: ChatResponse) -> Strike | None:
    """The model finished without text or tool calls (thinking alone is empty).

    A content-filter stop is a policy block, not a capability failure, and a
    length stop is `truncated_by_length`'s signal, so neither counts here.
    """
    if resp.finish_reason in ("content_filter", "length"):
        return None
    if resp.tool_calls or resp.text().strip():
        return None
    return Strike("empty_completion", "response")


def truncated_by_length(resp: ChatResponse) -> Strike | None:
    """The completion was cut off by the token limit."""
    if resp.finish_reason == "length":
        return Strike("truncated_by_length", "response")
    return None


REQUEST_PRODUCERS = (errored_tool_results, failing_tests_after_edit, repeated_failing_command)
RESPONSE_PRODUCERS = (malformed_tool_arguments, empty_completion, truncated_by_length)


_REQUEST_CHECKS = (_errored_tool_results, _failing_tests_after_edit, _repeated_failing_command)
"""REQUEST_PRODUCERS' bodies, in the same order, sharing one `_Turn`."""


def request_strikes(req: ChatRequest) -> list[Strike]:
    """Every request-side strike this request carries (REQUEST_PRODUCERS, in order)."""
    turn = _Turn(req)
    return [s for p in _REQUEST_CHECKS if (s := p(turn)) is not None]


def response_strikes(resp: ChatResponse) -> list[Strike]:
    """Every response-side strike of a successful upstream response."""
    return [s for p in RESPONSE_PRODUCERS if (s := p(resp)) is not None]
