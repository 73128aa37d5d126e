# ruff: noqa: RUF001  (the samples use look-alike Unicode characters on purpose)
"""The fast lexical scans give exactly what the plain scans they replaced gave.

`difficulty._scan_text` and the strike producers were rewritten for speed
(ASCII-mode regexes, str.count for literal counts, skipped passes, one
whole-window search instead of a per-line Python loop). tests/scan_reference.py
keeps a frozen copy of the plain implementations as they were before that
rewrite; this module checks, on generated and realistic texts, that every
TextCounts tuple and every strike list is identical. The reference builds its
regexes from the module's vocabularies, so a deliberate vocabulary change keeps
this test meaningful; a change to the scanning method must keep it green.
"""

from __future__ import annotations

import random
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scan_reference import (
    go_source,
    pytest_log,
    ref_looks_like_error,
    ref_looks_like_test_failure,
    ref_response_strikes,
    ref_scan_text,
)
from test_difficulty_samples import HARD_PROSE, TRIVIAL_TURNS, hard_turn_text
from tiergate.core.model import ChatRequest, ChatResponse, Message, TextPart, ToolCall
from tiergate.formats.openai import parse_request
from tiergate.replay.features import chat_response
from tiergate.replay.generator import generate_corpus
from tiergate.routing import difficulty as d
from tiergate.routing import strikes as s

# =====================================================================================
# Comparisons
# =====================================================================================


def assert_same_scan(text: str) -> None:
    assert d._scan_text(text) == ref_scan_text(text), repr(text[:300])


def assert_same_shapes(text: str) -> None:
    assert s.looks_like_error(text) == ref_looks_like_error(text), repr(text[:300])
    assert s.looks_like_test_failure(text) == ref_looks_like_test_failure(text), repr(text[:300])


def assert_same_request(req: ChatRequest) -> None:
    """The shape verdicts on every tool result of the request match the reference.

    Until issue 15 this compared the request-side strikes themselves; those now
    strike on evidence of no progress (routing.progress), a deliberate change of
    meaning, so only the scans they are built on are compared to the frozen copy.
    """
    for m in req.messages:
        if m.role == "tool":
            assert_same_shapes(m.text())


# ---- generated texts -----------------------------------------------------------------

CUE_WORDS = (
    "why", "how come", "explain", "explained", "reason about", "reasons about",
    "reasoning about", "analyze", "analysis", "analysing", "prove", "proves", "proven",
    "proof", "proofs", "justify", "justification", "derive", "derives", "derived",
    "derivation", "tradeoff", "trade-offs", "pros and cons", "compare", "comparing",
    "comparison", "step by step", "step-by-step", "root cause", "root-cause",
    "investigate", "diagnosis", "invariant", "invariants", "precondition",
    "postconditions", "edge case", "corner cases", "race condition", "data races",
    "deadlock", "deadlocked", "livelock", "concurrency", "concurrently", "thread-safe",
    "thread safety", "atomic", "atomically", "atomicity", "memory model",
    "memory ordering", "complexity", "worst-case", "worst case", "correctness",
    "soundness", "guarantee", "guarantees", "nondeterministic", "non-deterministic",
    "intermittent", "intermittently", "flaky", "bottleneck", "scalability",
    "architecture", "hypothesis", "hypotheses", "assumption", "implications",
    "counterexample", "counter-examples", "therefore", "hence", "consequently",
    "what if", "rigorous", "rigorously",
)  # fmt: skip
MATH_WORD_SAMPLES = (
    "big-o", "Big O", "bigo", "theorem", "theorems", "lemma", "lemmas", "corollary",
    "corollaries", "by induction", "inductive step", "base case", "q.e.d", "Q.E.D.", "qed",
    "iff", "modulo", "probability", "probabilities", "expected value", "variance",
    "integral", "integrals", "derivative", "eigenvalue", "eigenvectors", "matrix",
    "matrices", "polynomial", "logarithm", "logarithmic", "exponential",
    "exponentially", "recurrence", "asymptotic", "asymptotically", "amortized",
    "bijection", "bijective", "injective", "surjective", "convex", "convexity",
    "divisible", "factorial", "permutations", "combinatorics", "pigeonhole",
    "upper bound", "lower bound",
)  # fmt: skip
CODE_SAMPLES = (
    *d.CODE_KEYWORDS,
    "foo(", "os.path", "os.path.join(", "self.foo", "a.b.c", "x.y:12", "cfg.timeout)",
    "snake_case", "snake_case_2", "camelCase", "getHTTPResponse", "SCREAMING_CASE",
    "MAX_RETRIES", "_private", "__init__", "__dunder__x", "#include", "#define", "#!/",
    "0xdeadBEEF", "0x7f", "x0x1", "app.py:12", "server.go:142", "line 42", "inline 3",
    "\n  at", "\n\tat ", "ValueError", "IOException", "Errors", "==", "!=", "<=", ">=",
    "->", "=>", "::", ":=", "&&", "||", "+=", "-=", "<<", ">>", "===", "=>=", "<<=",
    "!==", "->>", "{", "}", "{}", ";", "; \n", ";\t", "Err(", "Ok(x)", "Some(", "None.",
    "nil)", "fmt.Errorf(", "err != nil", "func main() {", "def f(x):", "return x;",
)  # fmt: skip
MATH_SAMPLES = (
    "$$", "$$$", "$", "\\(", "\\[", "\\\\(", "\\frac", "\\frac{a}{b}", "\\sum_{i}",
    "\\int", "\\infty", "\\leq", "\\le", "\\lex", "\\in", "\\inn", "\\begin{equation}",
    "\\begin{align*}", "\\begin{proof}", "\\begin{lemma*}", "\\mathbb{R}", "\\Theta",
    "\\log", "\\ln", "∑", "∏", "∫", "√", "∞", "≤", "≥", "≠", "≈", "≡", "∀", "∃", "∈",
    "∉", "⊂", "⊆", "∪", "∩", "∧", "∨", "¬", "⇒", "⇔", "↦", "∂", "∇", "±", "×", "÷",
    "⌊", "⌋", "ℝ", "ℕ", "ℤ", "ℚ", "ℂ", "∎", "O(n log n)", "O(1)", "Θ(1)", "Ω(n)",
    "o(n)", "ω(1)", "xO(n)", "O()", "O(" + "n" * 30 + ")", "n^2", "2^{k+1}", "x^-1",
    "a ^ b", "ab^2", "x_{i}", "x_{ij}", "ab_{i}", "x_{}",
)  # fmt: skip
UNICODE_SAMPLES = (
    "é", "É", "İ", "ß", "ẞ", "Θ", "ω", "Ω", "٣", "²", "Ⅻ", "—", "–", "“", "”", "’", "→",
    "…", "✓", "🙂", "\u00a0", "\u2028", "\u2029", "\x85", "\x1c", "\x1f", "\u212a",
    "ǅ", "ﬁ", "ΣΑΣ", "straße", "naïve", "café", "日本語", "Ⓐ", "_", "\r", "\t", "\x0b",
    "\x0c", "\x00", "\ud83d", "\udfff", "ǈ", "ﬃ", "Ꙇ",
)  # fmt: skip
STRIKE_LINES = (
    "Traceback (most recent call last):",
    '  File "app.py", line 3, in <module>',
    "ValueError: bad value",
    "  pkg.errors.ParseError[E12]: nope",
    "error: could not compile",
    "error[E0308]: mismatched types",
    "fatal: not a git repository",
    "panic: runtime error",
    "ERROR  something",
    "ERRORS",
    "main.c:3:5: error: expected ';'",
    "main.c:3: fatal error: x.h: No such file",
    "./x.go:41:7: undefined: y",
    "x.go:1:2:  ",
    "src/a.ts(3,1): error TS2304: x",
    "npm ERR! code ELIFECYCLE",
    "Process exited with code 1",
    "exit status 2",
    "exited with status: 3",
    'exit_code="1"',
    "exit code = -4",
    "exit code 0",
    "exit code\n1",
    "returned non-zero exit status 1",
    "bash: foo: command not found",
    "cat: x: No such file or directory",
    "open x: Permission denied",
    "Segmentation fault (core dumped)",
    "goroutine 1 [running]:",
    "func f() error { return nil }",
    "if err != nil { return err }",
    "=== 2 failed, 3 passed in 0.2s ===",
    "===== 1 error in 2s =====",
    "==== 10 errors ====",
    "FAILED tests/a.py::t",
    "--- FAIL: TestX (0.00s)",
    "FAIL",
    "FAIL   ",
    "FAIL\tpkg/x\t0.1s",
    "test result: FAILED. 1 passed",
    "Tests:       1 failed, 2 passed",
    "Tests:\n 1 failed",
    "  3 failing",
    "Tests run: 4, Failures: 1, Errors: 0",
    "Tests run: 4, Failures: 0, Errors: 2",
    "5 tests completed, 1 failed",
    "a5 tests completed, 1 failed",
    "not ok 3 - x",
    "AssertionError: boom",
    "    AssertionError",
    "ok   pkg/pool 0.01s",
    "PASS",
    "errors are values",
    "Exceptional work",
    # bare phrases, so that an affix touches their first and last characters
    "No such file or directory",
    "Permission denied",
    "command not found",
    "error TS2304",
    "non-zero exit status",
    "exit code 1",
    "exited 1",
    "npm ERR!",
    "test result: FAILED",
    "Tests run: 1, Failures: 1",
    "Traceback (most recent call last)",
    ":3: error",
    "x.go:3:4: e",
    "Error: ",
    "error:",
    "panic[x-1]:",
    "goroutine 7 [",
    "1 failing",
    "0 tests completed, 1 failed",
    "= 1 failed",
    "Tests: 1 failed",
)
SEPARATORS = (
    "", " ", "  ", "\n", "\n\n", "\t", ".", ",", "(", ")", "-", "_", ":", ": ", "/", "\\",
    "'", '"', "\r\n", "\x1c", "\u2028", "\x85", "\u00a0", "é", "0", "9", "x",
)  # fmt: skip

_vocab = st.sampled_from(CUE_WORDS + MATH_WORD_SAMPLES)
_cased_vocab = _vocab.flatmap(
    lambda w: st.sampled_from((w, w.upper(), w.title(), w.capitalize(), w.swapcase()))
)
_token = st.one_of(
    _cased_vocab,
    st.sampled_from(CODE_SAMPLES),
    st.sampled_from(MATH_SAMPLES),
    st.sampled_from(UNICODE_SAMPLES),
    st.sampled_from(STRIKE_LINES),
    st.sampled_from(TRIVIAL_TURNS + HARD_PROSE),
    st.text(alphabet="abcxyzXYZ_019 .:;(){}[]$\\^=<>-+!&|#\n\t", max_size=12),
    st.text(max_size=6),
)
texts = st.lists(st.tuples(_token, st.sampled_from(SEPARATORS)), max_size=40).map(
    lambda parts: "".join(t + sep for t, sep in parts)
)


GATE_OPENER = "(Error: Exception[ :1:2: ) xcommand not foundx 1 completed, x"
"""A line with the literals some shapes need (so any search gated on them runs)
but no failure shape itself."""


AFFIXES = (
    "", " ", "  ", "\t", "x", "_", "é", "0", "1", ":", ": ", "a.", "(", "'", '"', "-", "=",
    "\r", "\x1c", "\u00a0", "\u2028", "\n", "\n1", "\nx", " \n", "ok ", "= ",
)  # fmt: skip


def _mutate(line: str, at: int, how: int) -> str:
    """One small edit of a strike line: drop, double or recase one character."""
    if not line:
        return line
    i = at % len(line)
    return (
        line[:i] + line[i + 1 :],
        line[:i] + line[i] + line[i:],
        line[:i] + line[i].swapcase() + line[i + 1 :],
        line,
    )[how % 4]


_strike_line = st.builds(
    lambda pre, line, post, at, how: pre + _mutate(line, at, how) + post,
    st.sampled_from(AFFIXES),
    st.sampled_from(STRIKE_LINES),
    st.sampled_from(AFFIXES),
    st.integers(0, 200),
    st.integers(0, 5),
)
_benign_line = st.sampled_from(
    (
        *TRIVIAL_TURNS,
        "ok   pkg/pool 0.01s",
        "PASS",
        "func f() error { return nil }",
        "",
        GATE_OPENER,
    )
)
shape_texts = st.lists(st.one_of(_strike_line, _benign_line), min_size=1, max_size=4).map("\n".join)
"""Texts with one or two failure-shaped lines, each slightly perturbed, so a
verdict hinges on the exact shape (dense failure text would be True either way)."""


def test_shapes_equal_reference_on_every_affixed_failure_line() -> None:
    """Each failure line with every prefix and suffix, alone, next to another line
    and after a line that opens every gate."""
    assert not ref_looks_like_error(GATE_OPENER)
    assert not ref_looks_like_test_failure(GATE_OPENER)
    for line in STRIKE_LINES:
        for pre in AFFIXES:
            for post in AFFIXES:
                text = pre + line + post
                assert_same_shapes(text)
                assert_same_shapes(text + "\nx y")
                assert_same_shapes("x\n" + text)
                assert_same_shapes(GATE_OPENER + "\n" + text)


@settings(max_examples=1500, deadline=None)
@given(shape_texts)
def test_shapes_equal_reference_on_perturbed_failure_lines(text: str) -> None:
    assert_same_shapes(text)


WORD_AFFIXES = (
    "", " ", "x", "Z", "_", "0", "é", "İ", "ß", "٣", "Θ", "ω", "\u212a", "—", ".", "(", "-",
    "\n", "'", "$", "\\", "{", "^", "Σ", "→", "\ud800",
)  # fmt: skip


def test_scan_counts_equal_reference_on_every_affixed_token() -> None:
    """Each vocabulary, code and math token with every neighbour character, at the
    start, the end and the middle of a text (word boundaries, ASCII vs Unicode)."""
    for token in (*CUE_WORDS, *MATH_WORD_SAMPLES, *CODE_SAMPLES, *MATH_SAMPLES):
        for a in WORD_AFFIXES:
            assert_same_scan(a + token)
            assert_same_scan(token + a)
            assert_same_scan(f"q {a}{token}{a} q")


FILLER = " ".join(["plain words of tool output"] * 12) + "\n"
"""About 320 characters without a cue or math word: spaces hits out, so long
texts are counted hit by hit (difficulty.HIT_SPACING)."""
CROSS_VOCABULARY = (
    "inductive step by step",  # a math span covering the start of a cue
    "inductive step-by-step",
    "by induction step by step",
    "step by step by induction",
    "race condition iff theorem",
    "what if iff",
    "what iff",
    "trade-off big-o",
    "q.e.d. hence",
    "worst case base case upper bound",
)


def test_scan_counts_equal_reference_on_sparse_and_overlapping_hits() -> None:
    """Hits far apart (counted one by one), dense (counted per vocabulary) and
    where one vocabulary's span covers a word the other one matches."""
    words = (*CUE_WORDS, *MATH_WORD_SAMPLES, *CROSS_VOCABULARY)
    for i, phrase in enumerate(CROSS_VOCABULARY):
        for pad in (0, 1, 3, 8):
            assert_same_scan(FILLER * pad + phrase + "\n" + FILLER * pad)
            assert_same_scan(FILLER * pad + f"{words[i]} {phrase}. {words[-i]}" + FILLER)
    for size in (1, 4, 16):
        assert_same_scan(FILLER.join(words[: size * 4]))
        assert_same_scan(" ".join(words[: size * 8]) + FILLER * size)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_token, st.integers(0, 3)), max_size=12))
def test_scan_counts_equal_reference_on_spread_out_tokens(parts: list[tuple[str, int]]) -> None:
    assert_same_scan("".join(f"{token} {FILLER * pad}" for token, pad in parts))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_scan_counts_equal_reference_on_generated_texts(text: str) -> None:
    assert_same_scan(text)
    assert_same_scan(text.upper())
    assert_same_scan(text.replace(" ", ""))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_shapes_equal_reference_on_generated_texts(text: str) -> None:
    assert_same_shapes(text)
    assert_same_shapes(text.replace("\n", " "))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_scan_and_shapes_equal_reference_on_arbitrary_unicode(text: str) -> None:
    assert_same_scan(text)
    assert_same_shapes(text)


# ---- realistic texts -----------------------------------------------------------------


def _json_blob(size: int) -> str:
    rng = random.Random(3)
    items = []
    while sum(len(x) for x in items) < size:
        items.append(
            f'{{"id": {rng.randint(1, 10**6)}, "name": "worker_{rng.randint(0, 99)}", '
            f'"status": "{rng.choice(["ok", "error", "failed"])}", "latency_ms": '
            f'{rng.random() * 100:.3f}, "tags": ["a", "b"], "note": "exit code 0"}}'
        )
    return "[" + ",\n".join(items) + "]"


def _shell_output(size: int) -> str:
    rng = random.Random(4)
    lines = []
    while sum(len(x) + 1 for x in lines) < size:
        lines.append(
            rng.choice(
                [
                    "$ make build",
                    "go build -o bin/server ./cmd/server",
                    "drwxr-xr-x  2 root root 4096 Jan  1 00:00 pkg",
                    "-rw-r--r--  1 root root  812 Jan  1 00:00 go.mod",
                    "make: *** [Makefile:12: build] Error 2",
                    "npm WARN deprecated x@1.0.0",
                    "Compiling demo v0.1.0 (/src/demo)",
                    "warning: unused variable: `x` --> src/main.rs:3:9",
                    "  → done in 1.2s ✓",
                ]
            )
        )
    return "\n".join(lines)


def _math_prose() -> str:
    return (
        "Theorem 2. For every n ≥ 1, T(n) = 2T(n/2) + n solves to Θ(n log n). Proof by "
        "induction: the base case n = 1 holds; in the inductive step, assume "
        "$$T(k) \\leq c k \\log k$$ for k < n. Then \\(T(n) \\le 2c(n/2)\\log(n/2) + n\\), "
        "hence the upper bound; x_{i} ∈ ℝ and n^2 terms vanish. Q.E.D. ∎ "
        "The amortized cost is O(1) iff the eigenvalues of the matrix are < 1."
    )


@cache
def realistic_texts() -> tuple[str, ...]:
    out: list[str] = [
        *TRIVIAL_TURNS,
        *HARD_PROSE,
        *STRIKE_LINES,
        _math_prose(),
        "\n".join(STRIKE_LINES),
        *(hard_turn_text(seed, size) for seed in range(6) for size in (800, 5000)),
        go_source(16_384),
        pytest_log(16_384),
        pytest_log(3_000, failing=False),
        _json_blob(16_384),
        _shell_output(4_000),
        go_source(40_000),  # past the 32 KB scan window
        pytest_log(40_000),
        "x" * 5000 + "\nValueError: hidden\n" + "y" * 40_000,
        "ok\n" + "z" * 9000 + "\nTraceback (most recent call last):",
        go_source(3000) + "\n—  naïve “quoted” → ✓\n",  # non-ASCII, no non-ASCII letters
        go_source(3000) + "\nπ := 3.14 // café\n",  # non-ASCII letters
    ]
    for doc in _corpus():
        for turn in doc["turns"]:
            for m in turn["request"]["messages"]:
                content = m.get("content")
                if isinstance(content, str):
                    out.append(content)
                for c in m.get("tool_calls") or ():
                    out.append(c["function"]["arguments"])
            content = (turn.get("response") or {}).get("content")
            if isinstance(content, str):
                out.append(content)
    return tuple(dict.fromkeys(out))


@cache
def _corpus() -> list[dict]:
    return generate_corpus(sessions=60)


def test_scan_counts_equal_reference_on_realistic_texts() -> None:
    for text in realistic_texts():
        assert_same_scan(text)


def test_shapes_equal_reference_on_realistic_texts() -> None:
    for text in realistic_texts():
        assert_same_shapes(text)


def test_strikes_equal_reference_on_the_replay_corpus() -> None:
    turns = 0
    for doc in _corpus():
        for turn in doc["turns"]:
            req = parse_request(turn["request"])
            assert_same_request(req)
            resp = chat_response(turn.get("response"))
            if resp is not None:
                assert s.response_strikes(resp) == ref_response_strikes(resp)
            turns += 1
    assert turns > 300


def _tool_turn(*results: tuple[str, bool], history: int = 0, edit: bool = True) -> ChatRequest:
    msgs: list[Message] = [Message("user", [TextPart("fix the flaky test")])]
    for i in range(history):
        msgs.append(
            Message("assistant", [], tool_calls=[ToolCall(f"h{i}", "bash", '{"cmd": "go test"}')])
        )
        msgs.append(Message("tool", [TextPart(results[0][0])], tool_call_id=f"h{i}"))
    name = "edit_file" if edit else "read_file"
    calls = [ToolCall("e", name, '{"path": "a.go", "old_str": "x", "new_str": "y"}')]
    calls += [ToolCall(f"c{i}", "bash", '{"cmd": "go test"}') for i in range(len(results))]
    msgs.append(Message("assistant", [], tool_calls=calls))
    for i, (text, is_error) in enumerate(results):
        msgs.append(Message("tool", [TextPart(text)], tool_call_id=f"c{i}", is_error=is_error))
    return ChatRequest(model="m", messages=msgs)


@pytest.mark.parametrize("history", [0, 1, 3])
def test_strikes_equal_reference_on_tool_turns(history: int) -> None:
    samples = [t for t in realistic_texts() if len(t) > 40][:120]
    rng = random.Random(history)
    for _ in range(150):
        picked = rng.sample(samples, rng.randint(1, 3))
        results = [(t, rng.random() < 0.1) for t in picked]
        assert_same_request(_tool_turn(*results, history=history, edit=rng.random() < 0.7))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(texts, st.booleans()), min_size=1, max_size=3), st.integers(0, 2))
def test_strikes_equal_reference_on_generated_tool_turns(
    results: list[tuple[str, bool]], history: int
) -> None:
    assert_same_request(_tool_turn(*results, history=history))


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.none(), texts),
    st.lists(st.sampled_from(['{"a": 1}', "", "  ", "[1]", "{bad", "null"]), max_size=3),
    st.sampled_from(["stop", "length", "tool_calls", "content_filter", "error"]),
)
def test_response_strikes_equal_reference(text: str | None, args: list[str], finish: str) -> None:
    resp = ChatResponse(
        id="r",
        model="m",
        content=[TextPart(text)] if text is not None else [],
        tool_calls=[ToolCall(f"c{i}", "t", a) for i, a in enumerate(args)],
        finish_reason=finish,  # type: ignore[arg-type]
    )
    assert s.response_strikes(resp) == ref_response_strikes(resp)
