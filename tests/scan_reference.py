"""Frozen copy of the plain lexical scans, from before the fast path.

`difficulty._scan_text` and the strike producers were rewritten for speed; this
module keeps the implementations as they were before that rewrite, so that
tests/test_scan_equivalence.py can prove the fast code gives identical results and
bench/bench_difficulty.py can time the two side by side. The regexes are built from
the live modules' vocabularies, so a deliberate vocabulary change keeps the
comparison meaningful. Also holds the realistic text generators both use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

import orjson

from tiergate.core.model import ChatRequest, ChatResponse, Message, ToolCall
from tiergate.routing import difficulty as d
from tiergate.routing import strikes as s
from tiergate.routing.actions import parse_args

# =====================================================================================
# Frozen reference: difficulty._scan_text before the fast path (same vocabularies).
# =====================================================================================


def _ref_alternation(patterns: Iterable[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def _ref_by_first_letter(patterns: Iterable[str]) -> str:
    groups: dict[str, list[str]] = {}
    rest: list[str] = []
    for p in patterns:
        if p[:1].isalpha() and p[1:2] not in ("?", "*", "+", "{"):
            groups.setdefault(p[0], []).append(p[1:])
        else:
            rest.append(p)
    branches = [f"{re.escape(ch)}(?:{_ref_alternation(tails)})" for ch, tails in groups.items()]
    return _ref_alternation([*branches, *rest])


def _ref_trie_regex(words: Iterable[str]) -> str:
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


_REF_CUE_RE = re.compile(r"\b(?=[a-z])(?:" + _ref_by_first_letter(d.REASONING_CUES) + r")\b")
_REF_MATH_WORD_RE = re.compile(r"\b(?=[a-z])(?:" + _ref_by_first_letter(d.MATH_WORDS) + r")\b")
_REF_MATH_SYMBOL_RES = tuple(re.compile(p) for p in d.MATH_SYMBOLS)
_REF_CODE_WORD_RE = re.compile(
    r"\b(?=[A-Za-z_])(?:"
    + _ref_trie_regex(d.CODE_KEYWORDS)
    + r"\b|"
    + _ref_alternation(d.CODE_IDENTIFIER_SHAPES)
    + ")"
)
_REF_CODE_SYNTAX_RES = tuple(re.compile(p, re.MULTILINE) for p in d.CODE_SYNTAX)


def ref_scan_text(text: str) -> d.TextCounts:
    tokens = d.count_tokens(text)
    if len(text) > 2 * d.SCAN_WINDOW_CHARS:
        text = text[: d.SCAN_WINDOW_CHARS] + "\n" + text[-d.SCAN_WINDOW_CHARS :]
    lowered = text.lower()
    code = len(_REF_CODE_WORD_RE.findall(text)) + sum(
        len(r.findall(text)) for r in _REF_CODE_SYNTAX_RES
    )
    symbols = sum(len(r.findall(text)) for r in _REF_MATH_SYMBOL_RES)
    return (
        tokens,
        len(text),
        len(_REF_CUE_RE.findall(lowered)),
        code,
        symbols + len(_REF_MATH_WORD_RE.findall(lowered)),
    )


# =====================================================================================
# Frozen reference: strikes before the fast path (trigger literals + per-line loop).
# =====================================================================================

_REF_ERROR_AT_LINE_START = re.compile(
    r"Segmentation fault"
    r"|goroutine \d+ \["
    r"|\s*(?:"
    r"(?:[A-Za-z_][\w.]*)?(?:Error|Exception)(?:\[\w+\])?: "
    r"|(?:error|fatal|panic|Error|Fatal|FATAL|ERROR)(?:\[[\w-]+\])?:"
    r"|ERROR\b)"
)
_REF_ERROR_IN_LINE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|:\d+(?::\d+)?: (?:fatal )?error\b"
    r"|\berror TS\d+\b"
    r"|\bnpm ERR!"
    r"|\bexit(?:ed)?(?: with)?[ _]?(?:code|status)\b[\"']?\s*[:=]?\s*-?[1-9]"
    r"|\bnon-zero exit status\b"
    r"|\bcommand not found\b"
    r"|\bNo such file or directory\b"
    r"|\bPermission denied\b"
)
_REF_DIAGNOSTIC_AT_LINE_START = re.compile(r"\s*[^\s:]+\.\w+:\d+:\d+: \S")
_REF_DIAGNOSTIC_TRIGGER = re.compile(r":\d+:\d+: ")
_REF_ERROR_AT_LINE_START_TRIGGER = re.compile(
    r"Segmentation fault|goroutine|Error|Exception|error|fatal|Fatal|FATAL|ERROR|panic"
)
_REF_ERROR_IN_LINE_TRIGGER = re.compile(
    r"Traceback|: error|: fatal error|error TS|npm ERR!|exit"
    r"|command not found|No such file or directory|Permission denied"
)
_REF_TEST_FAILURE_AT_LINE_START = re.compile(
    r"=+ .*\b\d+ (?:failed|errors?)\b"
    r"|FAILED \S"
    r"|--- FAIL: "
    r"|FAIL(?:\s+\S|$)"
    r"|Tests:\s+.*\b\d+ failed\b"
    r"|\s*\d+ failing\b"
    r"|not ok \d+"
    r"|\s*AssertionError\b"
)
_REF_TEST_FAILURE_IN_LINE = re.compile(
    r"\btest result: FAILED\b"
    r"|\bTests run: \d+, Failures: (?:[1-9]|\d+, Errors: [1-9])"
    r"|\b\d+ tests? completed, \d+ failed\b"
)
_REF_TEST_FAILURE_AT_LINE_START_TRIGGER = re.compile(
    r"FAIL|failed|failing|error|not ok|AssertionError"
)
_REF_TEST_FAILURE_IN_LINE_TRIGGER = re.compile(r"test result: FAILED|Tests run: |tests? completed")
_REF_SCAN_HEAD = 4096
_REF_SCAN_TAIL = 4096


def _ref_window(text: str) -> str:
    if len(text) <= _REF_SCAN_HEAD + _REF_SCAN_TAIL:
        return text
    return text[:_REF_SCAN_HEAD] + "\n" + text[-_REF_SCAN_TAIL:]


def _ref_lines_match(
    trigger: re.Pattern[str], shape: re.Pattern[str], text: str, *, anchored: bool
) -> bool:
    checked_to = -1
    for m in trigger.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if start <= checked_to:
            continue
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        found = shape.match(text, start, end) if anchored else shape.search(text, start, end)
        if found:
            return True
        checked_to = end
    return False


def ref_looks_like_error(text: str) -> bool:
    text = _ref_window(text)
    return (
        _ref_lines_match(
            _REF_ERROR_AT_LINE_START_TRIGGER, _REF_ERROR_AT_LINE_START, text, anchored=True
        )
        or _ref_lines_match(_REF_ERROR_IN_LINE_TRIGGER, _REF_ERROR_IN_LINE, text, anchored=False)
        or _ref_lines_match(
            _REF_DIAGNOSTIC_TRIGGER, _REF_DIAGNOSTIC_AT_LINE_START, text, anchored=True
        )
    )


def ref_looks_like_test_failure(text: str) -> bool:
    text = _ref_window(text)
    return _ref_lines_match(
        _REF_TEST_FAILURE_AT_LINE_START_TRIGGER,
        _REF_TEST_FAILURE_AT_LINE_START,
        text,
        anchored=True,
    ) or _ref_lines_match(
        _REF_TEST_FAILURE_IN_LINE_TRIGGER, _REF_TEST_FAILURE_IN_LINE, text, anchored=False
    )


# The request-side producers as they were before they read progress (issue 15):
# `request_strikes` now strikes on evidence of no progress instead, so these are
# no longer an equivalence reference; bench/bench_difficulty.py still times them
# as the "before" of the request-side cost.
_REF_MIN_ERRORED_RESULTS = 2
_REF_MIN_COMMAND_REPEATS = 2


def _ref_call_signature(call: ToolCall) -> tuple[str, str]:
    args = parse_args(call.arguments)
    if args is None:
        return call.name, " ".join(call.arguments.split())
    return call.name, orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()


def _ref_tool_results(messages: Sequence[Message]) -> Iterator[Message]:
    return (m for m in messages if m.role == "tool")


def _ref_result_failed(msg: Message) -> bool:
    if msg.is_error:
        return True
    text = msg.text()
    return ref_looks_like_error(text) or ref_looks_like_test_failure(text)


def _ref_call_index(req: ChatRequest) -> dict[str, ToolCall]:
    return {c.id: c for m in req.messages if m.role == "assistant" for c in m.tool_calls}


def ref_errored_tool_results(req: ChatRequest) -> s.Strike | None:
    failed = sum(1 for m in _ref_tool_results(s.latest_turn(req)) if _ref_result_failed(m))
    if failed >= _REF_MIN_ERRORED_RESULTS:
        return s.Strike("errored_tool_results", "request", f"{failed} failed results")
    return None


def ref_failing_tests_after_edit(req: ChatRequest) -> s.Strike | None:
    results = list(_ref_tool_results(s.latest_turn(req)))
    if not any(ref_looks_like_test_failure(m.text()) for m in results):
        return None
    if any(s.is_edit_call(c) for m in req.messages if m.role == "assistant" for c in m.tool_calls):
        return s.Strike("failing_tests_after_edit", "request")
    return None


def ref_repeated_failing_command(req: ChatRequest) -> s.Strike | None:
    latest = s.latest_turn(req)
    calls = _ref_call_index(req)
    failing_now: dict[tuple[str, str], int] = {}
    for m in _ref_tool_results(latest):
        call = calls.get(m.tool_call_id or "")
        if call is not None and _ref_result_failed(m):
            sig = _ref_call_signature(call)
            failing_now[sig] = failing_now.get(sig, 0) + 1
    if not failing_now:
        return None
    latest_ids = {id(m) for m in latest}
    counts = dict(failing_now)
    for m in _ref_tool_results(req.messages):
        if id(m) in latest_ids:
            continue
        call = calls.get(m.tool_call_id or "")
        if call is None:
            continue
        sig = _ref_call_signature(call)
        if sig in counts and _ref_result_failed(m):
            counts[sig] += 1
    for (name, _), n in counts.items():
        if n >= _REF_MIN_COMMAND_REPEATS:
            return s.Strike("repeated_failing_command", "request", f"{name} x{n}")
    return None


def ref_malformed_tool_arguments(resp: ChatResponse) -> s.Strike | None:
    for call in resp.tool_calls:
        if not isinstance(parse_args(call.arguments), dict):
            return s.Strike("malformed_tool_arguments", "response", call.name)
    return None


def ref_empty_completion(resp: ChatResponse) -> s.Strike | None:
    if resp.finish_reason in ("content_filter", "length"):
        return None
    if resp.tool_calls or resp.text().strip():
        return None
    return s.Strike("empty_completion", "response")


def ref_truncated_by_length(resp: ChatResponse) -> s.Strike | None:
    if resp.finish_reason == "length":
        return s.Strike("truncated_by_length", "response")
    return None


def ref_request_strikes(req: ChatRequest) -> list[s.Strike]:
    producers = (
        ref_errored_tool_results,
        ref_failing_tests_after_edit,
        ref_repeated_failing_command,
    )
    return [x for p in producers if (x := p(req)) is not None]


def ref_response_strikes(resp: ChatResponse) -> list[s.Strike]:
    producers = (ref_malformed_tool_arguments, ref_empty_completion, ref_truncated_by_length)
    return [x for p in producers if (x := p(resp)) is not None]


# =====================================================================================
# Realistic texts (also timed by bench/bench_difficulty.py).
# =====================================================================================


def go_source(size: int) -> str:
    lines: list[str] = []
    i = 0
    while sum(len(x) + 1 for x in lines) < size:
        lines += [
            f"// step{i} pushes the job and records it as pending.",
            f"func (p *Pool) step{i}(ctx context.Context, job *Job) error {{",
            "\tif err := p.queue.Push(ctx, job); err != nil {",
            '\t\treturn fmt.Errorf("push %d: %w", job.ID, err)',
            "\t}",
            "\tp.mu.Lock()",
            "\tdefer p.mu.Unlock()",
            "\tp.pending[job.ID] = struct{}{}",
            "\treturn nil",
            "}",
            "",
        ]
        i += 1
    return "\n".join(lines)


def pytest_log(size: int, failing: bool = True) -> str:
    lines = ["=" * 29 + " test session starts " + "=" * 30, "collected 120 items", ""]
    i = 0
    while sum(len(x) + 1 for x in lines) < size:
        lines += [
            f"_____ test_drain_{i} _____",
            "pool = <app.pool.Pool object at 0x7f3a2c1b2d90>",
            f"    def test_drain_{i}(pool):",
            "        pool.drain(timeout=0.5)",
            ">       assert pool.pending == {}",
            "E       AssertionError: assert {1: None} == {}",
            f"tests/test_pool.py:{i + 10}: AssertionError",
        ]
        i += 1
    lines.append("=== 3 failed, 117 passed in 1.21s ===" if failing else "=== 120 passed ===")
    return "\n".join(lines)
