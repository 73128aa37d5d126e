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


# ---- output shapes ------------------------------------------------------------

# Each shape is split in two: branches anchored at the start of a line (tried
# with `match` at line starts only) and floating branches (searched within the
# line). Every branch matches within one line and contains one of the trigger
# literals, so only lines a trigger points at are ever examined.

_ERROR_AT_LINE_START = re.compile(
    r"Segmentation fault"
    r"|goroutine \d+ \["
    r"|\s*(?:"
    r"(?:[A-Za-z_][\w.]*)?(?:Error|Exception)(?:\[\w+\])?: "  # ValueError: x
    r"|(?:error|fatal|panic|Error|Fatal|FATAL|ERROR)(?:\[[\w-]+\])?:"  # error: / panic:
    r"|ERROR\b)"
)
_ERROR_IN_LINE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|:\d+(?::\d+)?: (?:fatal )?error\b"  # file.c:3:5: error
    r"|\berror TS\d+\b"  # tsc
    r"|\bnpm ERR!"
    r"|\bexit(?:ed)?(?: with)?[ _]?(?:code|status)\b[\"']?\s*[:=]?\s*-?[1-9]"
    r"|\bnon-zero exit status\b"
    r"|\bcommand not found\b"
    r"|\bNo such file or directory\b"
    r"|\bPermission denied\b"
)
# Compiler/linter diagnostics without the word "error" (Go's `./x.go:41:7:
# undefined: y`, flake8, eslint's unix format): path:line:col: message.
_DIAGNOSTIC_AT_LINE_START = re.compile(r"\s*[^\s:]+\.\w+:\d+:\d+: \S")
_DIAGNOSTIC_TRIGGER = re.compile(r":\d+:\d+: ")
_ERROR_AT_LINE_START_TRIGGER = re.compile(
    r"Segmentation fault|goroutine|Error|Exception|error|fatal|Fatal|FATAL|ERROR|panic"
)
_ERROR_IN_LINE_TRIGGER = re.compile(
    r"Traceback|: error|: fatal error|error TS|npm ERR!|exit"
    r"|command not found|No such file or directory|Permission denied"
)

_TEST_FAILURE_AT_LINE_START = re.compile(
    r"=+ .*\b\d+ (?:failed|errors?)\b"  # pytest summary line
    r"|FAILED \S"  # pytest short summary
    r"|--- FAIL: "  # go test
    r"|FAIL(?:\s+\S|$)"  # go package result
    r"|Tests:\s+.*\b\d+ failed\b"  # jest
    r"|\s*\d+ failing\b"  # mocha
    r"|not ok \d+"  # TAP
    r"|\s*AssertionError\b"
)
_TEST_FAILURE_IN_LINE = re.compile(
    r"\btest result: FAILED\b"  # cargo
    r"|\bTests run: \d+, Failures: (?:[1-9]|\d+, Errors: [1-9])"  # junit / maven
    r"|\b\d+ tests? completed, \d+ failed\b"  # gradle
)
_TEST_FAILURE_AT_LINE_START_TRIGGER = re.compile(r"FAIL|failed|failing|error|not ok|AssertionError")
_TEST_FAILURE_IN_LINE_TRIGGER = re.compile(r"test result: FAILED|Tests run: |tests? completed")

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


def _scan_text(text: str) -> str:
    if len(text) <= _SCAN_HEAD + _SCAN_TAIL:
        return text
    return text[:_SCAN_HEAD] + "\n" + text[-_SCAN_TAIL:]


def _lines_match(
    trigger: re.Pattern[str], shape: re.Pattern[str], text: str, *, anchored: bool
) -> bool:
    """Try `shape` on each line a trigger literal points at: with `match` at the
    line start when `anchored`, else `search` within the line."""
    checked_to = -1
    for m in trigger.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if start <= checked_to:
            continue  # this line was already tried
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        found = shape.match(text, start, end) if anchored else shape.search(text, start, end)
        if found:
            return True
        checked_to = end
    return False


def looks_like_error(text: str) -> bool:
    """True when tool output has the shape of a failed command or crash.

    Equivalent to searching the whole text with every shape branch (a property
    test checks it), but plain-literal triggers pick the few lines worth trying,
    so ordinary source code that merely mentions `error` costs microseconds.
    """
    text = _scan_text(text)
    return (
        _lines_match(_ERROR_AT_LINE_START_TRIGGER, _ERROR_AT_LINE_START, text, anchored=True)
        or _lines_match(_ERROR_IN_LINE_TRIGGER, _ERROR_IN_LINE, text, anchored=False)
        or _lines_match(_DIAGNOSTIC_TRIGGER, _DIAGNOSTIC_AT_LINE_START, text, anchored=True)
    )


def looks_like_test_failure(text: str) -> bool:
    """True when tool output has the shape of a failing test run (see looks_like_error)."""
    text = _scan_text(text)
    return _lines_match(
        _TEST_FAILURE_AT_LINE_START_TRIGGER, _TEST_FAILURE_AT_LINE_START, text, anchored=True
    ) or _lines_match(_TEST_FAILURE_IN_LINE_TRIGGER, _TEST_FAILURE_IN_LINE, text, anchored=False)


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


def _result_failed(msg: Message) -> bool:
    if msg.is_error:
        return True
    text = msg.text()
    return looks_like_error(text) or looks_like_test_failure(text)


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


def errored_tool_results(req: ChatRequest) -> Strike | None:
    """Several tool results in the latest turn failed (flagged or error-shaped)."""
    failed = sum(1 for m in _tool_results(latest_turn(req)) if _result_failed(m))
    if failed >= MIN_ERRORED_RESULTS:
        return Strike("errored_tool_results", "request", f"{failed} failed results")
    return None


def failing_tests_after_edit(req: ChatRequest) -> Strike | None:
    """Tests fail in the latest turn after the agent has already edited files.

    (Not named `test_...`: pytest would collect it from any test importing it.)
    """
    results = list(_tool_results(latest_turn(req)))
    if not any(looks_like_test_failure(m.text()) for m in results):
        return None
    if any(is_edit_call(c) for m in req.messages if m.role == "assistant" for c in m.tool_calls):
        return Strike("failing_tests_after_edit", "request")
    return None


def repeated_failing_command(req: ChatRequest) -> Strike | None:
    """A command that fails now already failed, with identical arguments, earlier."""
    latest = latest_turn(req)
    calls = _call_index(req)
    failing_now: dict[tuple[str, str], int] = {}
    for m in _tool_results(latest):
        call = calls.get(m.tool_call_id or "")
        if call is not None and _result_failed(m):
            sig = _call_signature(call)
            failing_now[sig] = failing_now.get(sig, 0) + 1
    if not failing_now:
        return None
    latest_ids = {id(m) for m in latest}
    counts = dict(failing_now)
    for m in _tool_results(req.messages):
        if id(m) in latest_ids:
            continue
        call = calls.get(m.tool_call_id or "")
        if call is None:
            continue
        sig = _call_signature(call)
        if sig in counts and _result_failed(m):  # signature check first: it is cheap
            counts[sig] += 1
    for (name, _), n in counts.items():
        if n >= MIN_COMMAND_REPEATS:
            return Strike("repeated_failing_command", "request", f"{name} x{n}")
    return None


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


def request_strikes(req: ChatRequest) -> list[Strike]:
    """Every request-side strike this request carries."""
    return [s for p in REQUEST_PRODUCERS if (s := p(req)) is not None]


def response_strikes(resp: ChatResponse) -> list[Strike]:
    """Every response-side strike of a successful upstream response."""
    return [s for p in RESPONSE_PRODUCERS if (s := p(resp)) is not None]
