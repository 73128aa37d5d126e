"""One classifier for observations, whatever protocol the agent speaks.

A tool-call agent (OpenAI tool calls, Anthropic `tool_use`/`tool_result`) acts
through tool calls and reads role-"tool" messages. A text agent (mini-swe-agent,
SWE-agent, OpenHands' CodeAct prompt, aider) writes its command in the reply
text (a ```bash block, `<command>`, `<function=...>`) and gets the output back
as a *user* message (`<returncode>1</returncode><output>...`, "OBSERVATION:",
SWE-agent's "(Open file: ...)(Current directory: ...)" footer, "[Command
finished with exit code 1]", aider's "I ran this command: ... And got this
output:"). A harness that runs the agent's named calls for it (AutoCodeRover's
search API: `search_class("X")` in prose, "Result of search_class("X"): ..." back;
its `<file>/<original>/<patched>` edits, answered "Your edit could not be
applied ..." or "Written an applicable patch, but ... Some tests have failed")
is read the same way (`harness_observation`). This module turns all of them
into one fact, `Observation`: what came back (failed or not, the identity of
the failure: failing test ids, exception type and location, compiler
diagnostics; whether a test run passed). What the agent did, the `Action`
each observation answers, is routing.actions.

The delta scorer, the strike producers and the transcript summary all read
these, so they agree. Pure; classifications are memoised by the text's hash,
so a resent message costs a hash, not a scan.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from tiergate.core.model import Message
from tiergate.routing import actions
from tiergate.routing.actions import remember, text_action
from tiergate.routing.output_shapes import (
    SCAN_HEAD,
    SCAN_TAIL,
    looks_failed,
    looks_like_test_failure,
)

# ---- observations -------------------------------------------------------------------

# Every search runs on a window that starts with "\n" (see _window), so shapes that
# begin a line are searched as "\n" + shape: a literal prefix the regex engine
# skips to, instead of trying every position (as routing.output_shapes does).
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_LINE = re.compile(r"\[(?:Command finished|The command completed) with exit code (-?\d+)\.?\]")
_WRAPPER_MARKS = (
    "<returncode>",  # mini-swe-agent
    "(Current directory: ",  # SWE-agent's footer
    "\nOBSERVATION:",
    "\nObservation: ",
    "\nEXECUTION RESULT of [",  # OpenHands CodeAct
    "[Command finished with exit code",  # OpenHands
    "[The command completed with exit code",
    "\nObserved result of command executed by user:",
    "\nI ran this command:\n",  # aider's /run
    "Your command ran successfully and did not produce any output",  # SWE-agent
    "\nPlease always provide EXACTLY ONE action",  # mini-swe-agent's format error
    "timed out and has been killed",  # mini-swe-agent's timeout
)
_WRAPPER_TAGS = re.compile(
    r"<returncode>\s*-?\d+\s*</returncode>"
    r"|</?(?:output|output_head|output_tail|elided_chars|warning|exception)>"
)
_WRAPPER_LINES = re.compile(
    r"\n(?:OBSERVATION:|Observation: |EXECUTION RESULT of \[[^\]\n]*\]:"
    r"|\((?:Open file|Current directory): [^)\n]*\)(?=\n|$)|bash-\$(?=\n|$)"
    r"|\[(?:Command finished|The command completed) with exit code -?\d+\.?\](?=\n|$)"
    r"|\[(?:Current working directory|Python interpreter): [^\]\n]*\](?=\n|$))"
)
_REJECTED = re.compile(  # agent harnesses refusing an action, in their own words
    r"\n(?:Your proposed edit has introduced new syntax error"
    r"|Your changes have NOT been applied"
    r"|No replacement was performed"
    r"|Your edit was not applied"
    r"|No file open(?:ed)?\. "
    r"|ERROR:\s)"
)
_OPEN_FILE = re.compile(r"\n\(Open file: ([^)\n]*)\)")
_CURRENT_DIR = re.compile(r"\n\(Current directory: ([^)\n]*)\)")
_FILE_HEADER = re.compile(r"\[File: ([^\n]+?) \(\d+ lines total\)\]")
_TIMED_OUT = "timed out and has been killed"
_LINT = re.compile(r"\n- ([A-Z]\d+ \S.{0,60})(?=\n|$)")  # SWE-agent's flake8 summary
_AIDER_RUN = re.compile(r"\nI ran this command:\n\n(.*?)\n\nAnd got this output:", re.S)
_FORMAT_ERROR = "\nPlease always provide EXACTLY ONE action"  # mini-swe-agent

_TEST_PASS = re.compile(  # a test runner's summary of a run with passes
    r"\n(?:=+ (?=[^\n]*\d passed\b)([^\n]*)"  # pytest (checked for failures below)
    r"|Ran \d+ tests? in [\d.]+s\n+OK\b"  # unittest
    r"|ok[^\S\n]+\S+[^\S\n]+[\d.]+s"  # go test
    r"|test result: ok\."  # cargo
    r"|Tests:[^\S\n]+\d+ passed, \d+ total)"  # jest
)
_TEST_ID = re.compile(
    r"\n(?:(?:FAILED|ERROR) (\S+::\S+)"  # pytest short summary
    r"|(?:FAIL|ERROR): (\w+) \(([\w.]+)\)"  # unittest
    r"|[^\S\n]*--- FAIL: (\S+)"  # go test
    r"|test (\S+) \.\.\. FAILED"  # cargo
    r"|[^\S\n]*● ([^\n]+)"  # jest
    r"|\[ERROR\] (\S+)[^\S\n]+Time elapsed[^\n]*<<< (?:FAILURE|ERROR)!)"  # maven surefire
)
_FRAME = re.compile(r'\n[^\S\n]*File "([^"\n]+)", line \d+, in (\S+)')
_EXCEPTION = re.compile(r"\n([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure))\b")
_DIAGNOSTIC = re.compile(
    r"\n[^\S\n]*([^\s:]+\.\w+):\d+(?::\d+)?: (?:(?:fatal )?error:? )?(\S[^\n]{0,60})"
)
_RUST_ERROR = re.compile(r"\nerror\[(E\d+)\]")
_TSC_ERROR = re.compile(r"\n([^\s(]+\.\w+)\(\d+,\d+\): error (TS\d+)")
_DIGITS = re.compile(r"0x[0-9a-f]+|\d+")
MAX_FAILURE_KEYS = 8
"""Keys kept per observation (sorted): enough to recognise a failure again, and a
bound on the state a 200-test failure adds."""


ObservationKind = Literal["", "search", "apply", "validation"]


@dataclass(frozen=True, slots=True)
class Observation:
    """What one action's output says.

    failed: the command failed (flagged, a non-zero exit code, or failure-shaped).
    failures: the failure's identity, `MAX_FAILURE_KEYS` keys at most: "test:<id>",
        "exc:<Type>@<file>:<function>", "diag:<file>:<message>", or "out:<digest>"
        of the output's last lines when nothing more specific is printed. Empty
        when it did not fail.
    tests_passed: a test runner's summary reports passes and no failures.
    error_flag: an explicit failure flag: `is_error` on a tool result, a non-zero
        exit code in a text observation.
    command: the command the observation itself echoes (aider, a search API's
        "Result of call(...)"), else None.
    kind: what answered: "" a command's output; "search" a code search (a miss
        is normal exploration, never stuck evidence); "apply" a harness refusing
        an edit (it did not land); "validation" a harness's tests failing after
        an edit that did land.
    parts: one Observation per call when a message answers several (a search
        API round); the message's own fields summarise them.
    open_file: the file the harness's editor has open after the command
        (SWE-agent's "(Open file: f)" footer, else its "[File: f (N lines
        total)]" header; "" for "n/a"), or None when the output does not say.
    cwd: the shell's directory after the command ("(Current directory: d)"), or None.
    """

    failed: bool
    failures: frozenset[str] = frozenset()
    tests_passed: bool = False
    error_flag: bool = False
    command: str | None = None
    kind: ObservationKind = ""
    parts: tuple[Observation, ...] = ()
    open_file: str | None = None
    cwd: str | None = None


JSON_RESULT_LIMIT = 1 << 20
"""Largest JSON-wrapped command result decoded (larger ones are read as text)."""
_JSON_RESULT = re.compile(r'\{\s*"(?:returncode|exit_code)"\s*:\s*-?\d+\s*,')


def unwrap_json_result(text: str) -> str:
    """A command result sent as a JSON object (mini-swe-agent 2.x tool mode:
    `{"returncode": 1, "output": "..."}`) as the `<returncode>` wrapper its text
    mode uses, so the output's lines, tracebacks and test ids read as in any
    other output; any other text unchanged. Escaped inside JSON, the output has
    no line breaks, and only its last lines' digest would identify a failure."""
    if not text.startswith("{") or len(text) > JSON_RESULT_LIMIT or not _JSON_RESULT.match(text):
        return text
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    code = obj.get("returncode", obj.get("exit_code")) if isinstance(obj, dict) else None
    output = obj.get("output") if isinstance(obj, dict) else None
    if not isinstance(code, int) or not isinstance(output, str):
        return text
    return f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"


def _window(text: str) -> str:
    """The text after a newline (so every line starts after one); its head and tail
    only when it is long: errors and summaries print there."""
    if len(text) <= SCAN_HEAD + SCAN_TAIL:
        return "\n" + text
    return "\n" + text[:SCAN_HEAD] + "\n" + text[-SCAN_TAIL:]


def _norm(text: str) -> str:
    return " ".join(_DIGITS.sub("0", text).split())


KEY_WINDOW_CHARS = 2048
"""Failure identities are read from the output's first and last 2 KB: summaries,
tracebacks and diagnostics print there, and a smaller window keeps the key
patterns cheap on a long log."""
_KEY_MATCHES = 16  # matches read per pattern: a 300-test failure needs no more


def failure_keys(output: str) -> frozenset[str]:
    """The identity of a failure: what failed and where, without the volatile parts
    (line numbers, values, addresses), so the same failure after an unrelated edit
    is recognised as the same."""
    return _failure_keys(_window(output))


def _matches(pattern: re.Pattern[str], window: str) -> list[tuple[str, ...]]:
    return [m.groups() for m in itertools.islice(pattern.finditer(window), _KEY_MATCHES)]


def _failure_keys(window: str) -> frozenset[str]:
    if len(window) > 2 * KEY_WINDOW_CHARS:
        window = window[:KEY_WINDOW_CHARS] + "\n" + window[-KEY_WINDOW_CHARS:]
    keys = {"test:" + "".join(g for g in groups if g) for groups in _matches(_TEST_ID, window)}
    tb = window.rfind("Traceback (most recent call last)")
    if tb >= 0:
        frames = _FRAME.findall(window, tb)
        exc = _EXCEPTION.search(window, tb)
        if exc is not None:
            where = f"@{frames[-1][0]}:{frames[-1][1]}" if frames else ""
            keys.add(f"exc:{exc.group(1)}{where}")
    elif not keys and (exc := _EXCEPTION.search(window)) is not None:
        keys.add(f"exc:{exc.group(1)}")
    keys.update(f"diag:{f}:{_norm(msg)}" for f, msg in _matches(_DIAGNOSTIC, window))
    if "\nerror[" in window:
        keys.update(f"diag:{code}" for (code,) in _matches(_RUST_ERROR, window))
    if "): error TS" in window:
        keys.update(f"diag:{f}:{code}" for f, code in _matches(_TSC_ERROR, window))
    if "\n- " in window:
        keys.update(f"lint:{_norm(msg)}" for (msg,) in _matches(_LINT, window))
    if not keys:
        tail = [line for line in window[-600:].splitlines() if line.strip()][-3:]
        keys.add(f"out:{hash(_norm(' '.join(tail))) & 0xFFFFFFFF:08x}")
    return frozenset(sorted(keys)[:MAX_FAILURE_KEYS])


WRAPPER_EDGE_CHARS = 512
"""Wrappers sit at an output's start or end: only those are searched for them."""


def _wrapped(text: str) -> bool:
    if len(text) > 2 * WRAPPER_EDGE_CHARS:
        text = text[:WRAPPER_EDGE_CHARS] + "\n" + text[-WRAPPER_EDGE_CHARS:]
    text = "\n" + text
    return any(mark in text for mark in _WRAPPER_MARKS)


def _exit_code(window: str) -> int | None:
    m = _RETURNCODE.search(window) if "<returncode>" in window else None
    if m is None and "with exit code" in window:
        m = _EXIT_LINE.search(window)
    return None if m is None else int(m.group(1))


def _tests_passed(window: str) -> bool:
    """A test runner's summary of a run with passes; a pytest summary that also
    counts failures or errors is not one (the caller also checks failure shapes)."""
    for m in _TEST_PASS.finditer(window):
        line = m.group(1)
        if line is None or ("failed" not in line and "error" not in line):
            return True
    return False


def _observe(window: str, is_error: bool, wrapped: bool) -> Observation:
    """Read one command output (`window` from _window)."""
    code = _exit_code(window) if wrapped else None
    body = window
    command = None
    if wrapped:
        if window.startswith(_FORMAT_ERROR):
            return Observation(True, frozenset({"format_error"}), error_flag=True)
        aider = _AIDER_RUN.match(window)
        if aider is not None:
            command, body = aider.group(1).strip(), "\n" + window[aider.end() :]
        body = _WRAPPER_LINES.sub("\n", _WRAPPER_TAGS.sub("", body))
    shaped = looks_failed(body)  # an error or test-failure shape: one search
    test_failed = shaped and looks_like_test_failure(body)
    if code is None:  # no exit code: the output's shapes, then the harness's own words
        failed = is_error or shaped or _REJECTED.search(body) is not None
        failed = failed or (wrapped and _TIMED_OUT in body)
    elif code == 0:  # `pytest | tail` exits 0: the runner's own words still count
        failed = is_error or test_failed or "Traceback (most recent call last)" in body
    else:  # grep/diff/test answering "no" print nothing: that is not a failure
        failed = is_error or bool(body.strip())
    open_file, cwd = _editor_state(window) if wrapped else (None, None)
    return Observation(
        failed=failed,
        failures=_failure_keys(body) if failed else frozenset(),
        tests_passed=not test_failed and _tests_passed(body),
        error_flag=is_error or (code is not None and code != 0),
        command=command,
        open_file=open_file,
        cwd=cwd,
    )


def _editor_state(window: str) -> tuple[str | None, str | None]:
    """(open file, directory) a SWE-agent-style harness reports after a command: its
    footer's last "(Open file: f)" and "(Current directory: d)", else for the file
    a "[File: f (N lines total)]" header near the output's start; None where unsaid."""
    open_file = cwd = None
    at = window.rfind("\n(Open file: ")
    if at >= 0 and (m := _OPEN_FILE.match(window, at)) is not None:
        open_file = m.group(1).strip()
        open_file = "" if open_file == "n/a" else open_file
    elif "[File: " in window[:WRAPPER_EDGE_CHARS]:
        header = _FILE_HEADER.search(window, 0, WRAPPER_EDGE_CHARS)
        open_file = header.group(1) if header is not None else None
    at = window.rfind("\n(Current directory: ")
    if at >= 0 and (m := _CURRENT_DIR.match(window, at)) is not None:
        cwd = m.group(1).strip()
    return open_file, cwd


# ---- harness verdicts: a harness that runs the agent's calls and edits for it -------

HARNESS_HEAD_CHARS = 160
"""A harness's verdict opens its message: only this prefix is matched for one."""
_HARNESS = re.compile(
    r"(?P<result>Result of [A-Za-z_][\w.]*\()"  # a named call's results, echoing it
    r"|(?P<located>Here are the code in buggy locations:)"  # AutoCodeRover's location read
    r"|(?P<apply>(?:Your|The) (?:edit|patch|change)(?:e?s)? (?:could not|cannot|can't|failed to) be"
    r" applied\b)"
    r"|(?P<validation>Written an applicable patch, but it did not resolve the issue\b"
    r"|Your patch is invalid\b)"
    r"|(?P<refused>The search API calls seem not valid\b|The buggy locations is not precise\b)"
)
_RESULT_HEADER = re.compile(r"Result of ([A-Za-z_][\w.]*\(.{0,400}?):[^\S\n]*$", re.M)
_SEARCH_MISS = re.compile(  # a search that found nothing, in the first line of its result
    r"\s*(?:Could not find\b|Cannot find\b|There (?:is|are) no\b|Found 0\b"
    r"|No (?:\w+ ){0,2}(?:found|match(?:es)?|results?)\b|The \w+ \S+ does not appear in\b)"
)
_SEARCH_HIT = re.compile(r"\n(?:Found [1-9]\d* |Search result \d+:)")
SEARCH_PARTS = 16
"""Calls read per search round (a round of more is read as its first 16)."""


def harness_observation(text: str) -> Observation | None:
    """A harness's answer to the agent's named call or edit, or None.

    Search results ("Result of search_class(...):", one part per call, each
    echoing its call so repeats are recognised; a miss is "Could not find ...",
    "There is no ...", "... does not appear in ..."), an edit the harness could
    not apply (kind "apply", keyed by the harness's reason), and tests failing
    after an applied patch (kind "validation", keyed like a failing test run).
    Matched on the message's first HARNESS_HEAD_CHARS characters only.
    """
    m = _HARNESS.match(text, 0, HARNESS_HEAD_CHARS)
    if m is None:
        return None
    if m.lastgroup == "result":
        return _search_round(text)
    if m.lastgroup == "located":
        missed = _SEARCH_HIT.search(text[:SCAN_HEAD]) is None
        return Observation(missed, frozenset({"search:miss"} if missed else ()), kind="search")
    if m.lastgroup == "refused":  # the harness rejected the calls themselves
        return Observation(True, frozenset({"search:refused"}), kind="search")
    rest = text[m.end() : m.end() + 240]
    reason = _norm(rest[rest.find(".") + 1 :].split("Please try again")[0].strip(" .\n"))
    if m.lastgroup == "apply":
        key = f"apply:{reason[:80]}" if reason else "apply:rejected"
        return Observation(True, frozenset({key}), error_flag=True, kind="apply")
    keys = {k for k in _failure_keys(_window(text)) if not k.startswith("out:")}
    return Observation(
        True, frozenset(keys or {"test:validation"}), error_flag=True, kind="validation"
    )


def _result_headers(text: str) -> list[re.Match[str]]:
    """The round's "Result of call(...):" lines, SEARCH_PARTS + 1 at most: found by
    a plain substring search, so a long result body costs a memchr, not a regex scan."""
    headers: list[re.Match[str]] = []
    at = 0
    while len(headers) <= SEARCH_PARTS:
        m = _RESULT_HEADER.match(text, at)
        if m is not None:
            headers.append(m)
        at = text.find("\nResult of ", at) + 1
        if at == 0:
            break
    return headers


def _search_round(text: str) -> Observation:
    headers = _result_headers(text)
    parts: list[Observation] = []
    for h, nxt in itertools.zip_longest(headers[:SEARCH_PARTS], headers[1:]):
        body_end = nxt.start() if nxt is not None else len(text)
        missed = _SEARCH_MISS.match(text, h.end(), min(body_end, h.end() + 200)) is not None
        keys = frozenset({"search:miss"}) if missed else frozenset()
        parts.append(Observation(missed, keys, command=" ".join(h.group(1).split()), kind="search"))
    failed = bool(parts) and all(p.failed for p in parts)
    keys = frozenset({"search:miss"}) if failed else frozenset()
    return Observation(failed, keys, kind="search", parts=tuple(parts))


_observe_memo: dict[tuple[int, int, int, str], Observation | None] = {}


Follows = Literal["opening", "reply", "action"]
"""What a message follows: nothing from the assistant yet, a reply without a
command, or a reply whose text carries a command (actions.text_action)."""


def observe(m: Message, follows: Follows) -> Observation | None:
    """The Observation a message carries, or None when it is not one.

    A tool result always is one. A user message is one when it follows an
    assistant reply and carries a known command-output wrapper or opens with a
    harness's verdict (`harness_observation`), or when it follows
    a text action and reads like command output (a failure or test-run shape);
    anything else is the user asking. The opening user message is always an ask
    (SWE-agent's task prompt ends with the same footer its observations do).
    Memoised by (hash, length, context) of the text.
    """
    if m.role == "tool":
        follows = "action"
    elif m.role != "user" or follows == "opening":
        return None
    text = m.text()
    key = (hash(text), len(text), (m.role == "tool") | (m.is_error << 1), follows)
    if key in _observe_memo:
        return _observe_memo[key]
    result: Observation | None
    text = unwrap_json_result(text)
    window = _window(text)
    wrapped = _wrapped(text)
    if m.role == "tool":
        result = _observe(window, m.is_error, wrapped)
    elif (harness := harness_observation(text)) is not None:
        result = harness
    elif wrapped:
        result = _observe(window, False, wrapped=True)
    elif follows == "action" and (looks_failed(text) or _tests_passed(window)):
        result = _observe(window, False, wrapped=False)
    else:
        result = None
    remember(_observe_memo, key, result)
    return result


def clear_memos() -> None:
    """Forget memoised classifications (benchmarks measure the cold path with this)."""
    _observe_memo.clear()
    actions.clear_memos()


# ---- the latest turn ----------------------------------------------------------------


def latest_turn_bounds(messages: Sequence[Message]) -> tuple[int, int]:
    """(start, end) of the latest turn: the messages after the last assistant message.

    Walks back from the end, so the cost is the size of the turn, not of the
    history. Trailing assistant messages are a prefill (a partial answer the
    client asks the model to continue), not a turn boundary: they are skipped and
    the turn is the user/tool messages before them. No assistant message at all
    means the whole conversation is the first turn.
    """
    end = len(messages)
    while end > 0 and messages[end - 1].role == "assistant":
        end -= 1
    start = end
    while start > 0 and messages[start - 1].role != "assistant":
        start -= 1
    return start, end


def turn_observations(messages: Sequence[Message]) -> list[tuple[Message, Observation]]:
    """The latest turn's observations: its tool results, and its user messages that
    are command output (the previous reply's text action decides the context)."""
    start, end = latest_turn_bounds(messages)
    follows: Follows = "opening" if start == 0 else follows_reply(messages[start - 1])
    out: list[tuple[Message, Observation]] = []
    for m in messages[start:end]:
        obs = observe(m, follows)
        if obs is not None:
            out.append((m, obs))
        follows = after(follows, m)
    return out


def after(follows: Follows, m: Message) -> Follows:
    """The context `m` leaves for the next message, given the context it had: only
    the message right after a text action can answer it."""
    if m.role == "assistant":
        return follows_reply(m)
    return "reply" if follows == "action" else follows


def follows_reply(reply: Message) -> Follows:
    """The context an assistant reply gives the next message."""
    if not reply.tool_calls and text_action(reply.text()) is not None:
        return "action"
    return "reply"
