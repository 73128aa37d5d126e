"""Difficulty scorer: weights, caps, vocabularies, scopes, and calibration properties."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_difficulty_samples import (
    HARD_PROSE,
    TRIVIAL_TURNS,
    agent_session,
    assistant,
    hard_turn_text,
    request,
    tool_result,
    user,
)
from tiergate.core.model import Message, TextPart, ToolCall
from tiergate.routing import difficulty as d
from tiergate.routing.difficulty import DifficultyFeatures


def features(**kw: float) -> DifficultyFeatures:
    base: dict = dict(
        log_prompt_tokens=0.0,
        reasoning_cue_count=0,
        system_prompt_log_len=0.0,
        code_keyword_density=0.0,
        has_tools=False,
        math_marker_count=0,
    )
    base.update(kw)
    return DifficultyFeatures(**base)


# ---- weights and caps -------------------------------------------------------------------


def test_weights_and_caps_are_the_reports() -> None:
    got = [(s.name, s.weight, s.cap) for s in d.FEATURE_SPECS]
    assert got == [
        ("log_prompt_tokens", 0.20, math.log(8001)),
        ("reasoning_cue_count", 0.15, 5.0),
        ("system_prompt_log_len", 0.10, math.log(2001)),
        ("code_keyword_density", 0.20, 5.0),
        ("has_tools", 0.15, 1.0),
        ("math_marker_count", 0.20, 5.0),
    ]
    assert sum(s.weight for s in d.FEATURE_SPECS) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, 0.0),
        ({"has_tools": True}, 0.15),
        ({"reasoning_cue_count": 5}, 0.15),
        ({"reasoning_cue_count": 50}, 0.15),  # capped
        ({"reasoning_cue_count": 2}, 0.06),
        ({"math_marker_count": 1}, 0.04),
        ({"code_keyword_density": 2.5}, 0.10),
        ({"code_keyword_density": 9.0}, 0.20),
        ({"log_prompt_tokens": math.log(8001)}, 0.20),
        ({"log_prompt_tokens": math.log(8001) / 2}, 0.10),
        ({"system_prompt_log_len": math.log(2001)}, 0.10),
        ({"system_prompt_log_len": 99.0}, 0.10),
    ],
)
def test_each_feature_contributes_weight_times_capped_share(kw: dict, expected: float) -> None:
    assert d.score(features(**kw)) == pytest.approx(expected)


def test_all_features_at_cap_score_one() -> None:
    f = features(
        log_prompt_tokens=10.0,
        reasoning_cue_count=5,
        system_prompt_log_len=8.0,
        code_keyword_density=5.0,
        has_tools=True,
        math_marker_count=5,
    )
    assert d.score(f) == pytest.approx(1.0)
    assert f.normalised == (1.0,) * 6


def test_count_tokens_is_ceil_of_quarter_length() -> None:
    assert [d.count_tokens("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


# ---- vocabularies -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("Why does this deadlock?", 2),
        ("WHY is the invariant violated in the worst case?", 3),
        ("Explain the trade-offs and prove it terminates.", 3),
        ("Is this thread-safe? Find the root cause of the race condition.", 3),
        ("Rename foo to bar.", 0),
        ("Do it because the linter said so, however you like.", 0),  # connectives don't count
        ("The whyte horse", 0),  # whole words only
    ],
)
def test_reasoning_cues(text: str, n: int) -> None:
    assert d.reasoning_cue_count(text) == n


CODE_SNIPPETS = {
    "python": (
        "def drain(self, queue: Queue) -> None:\n"
        "    while not queue.empty():\n"
        "        job = queue.get_nowait()\n"
        "        if job is None or isinstance(job, Sentinel):\n"
        "            return\n"
        "        self._results[job.id] = await job.run(timeout=self.timeout)\n"
    ),
    "go": (
        "func (p *Pool) worker(ctx context.Context) error {\n"
        "\tdefer p.wg.Done()\n"
        "\tfor job := range p.jobs {\n"
        "\t\tif err := job.Run(ctx); err != nil {\n"
        '\t\t\treturn fmt.Errorf("job %d: %w", job.ID, err)\n'
        "\t\t}\n\t}\n\treturn nil\n}\n"
    ),
    "rust": (
        "impl Cache {\n"
        "    pub fn get(&mut self, key: &str) -> Option<&Entry> {\n"
        "        let idx = self.index.get(key)?;\n"
        "        self.touch(*idx);\n"
        "        self.entries.get(*idx).map(|e| e.value.as_ref().unwrap())\n"
        "    }\n}\n"
    ),
    "javascript": (
        "const loadUser = async (id) => {\n"
        "  const res = await fetch(`/api/users/${id}`);\n"
        "  if (res.status !== 200 && res.status !== 304) { throw new Error(res.statusText); }\n"
        "  return res.json();\n};\n"
    ),
    "java": (
        "public static Optional<Order> findOrder(String id) throws SQLException {\n"
        "    PreparedStatement stmt = conn.prepareStatement(QUERY_BY_ID);\n"
        "    stmt.setString(1, id);\n"
        "    return Optional.ofNullable(mapRow(stmt.executeQuery()));\n}\n"
    ),
    "sql": (
        "SELECT o.id, o.total FROM orders o\n"
        "JOIN customers c ON c.id = o.customer_id\n"
        "WHERE o.created_at >= now() - interval '7 days' AND c.region_code = 'EU';\n"
    ),
}


@pytest.mark.parametrize("lang", sorted(CODE_SNIPPETS))
def test_code_density_of_real_code_is_well_above_prose(lang: str) -> None:
    text = CODE_SNIPPETS[lang]
    density = 100 * d.code_keyword_count(text) / len(text)
    assert density >= 2.0, (lang, density)


def test_code_density_of_prose_is_low() -> None:
    prose = (
        "We met with the team on Tuesday to plan the release. Everyone agreed that the new "
        "onboarding flow is clearer, but the copy on the second page still needs work, and "
        "the marketing site should link to the updated guide before we announce anything. "
        "If the review goes well, we will ship next week and return to the roadmap."
    )
    assert 100 * d.code_keyword_count(prose) / len(prose) < 0.5


@pytest.mark.parametrize(
    "text",
    [
        "Traceback (most recent call last):",
        '  File "/srv/app/pool.py", line 12, in run',
        "\tat com.shop.OrderService.update(OrderService.java:88)",
        "goroutine 17 [running]:",
        "panic at server.go:142",
        "ptr=0xc000123abc",
        "raise ValueError",
    ],
)
def test_stack_trace_shapes_count_as_code(text: str) -> None:
    assert d.code_keyword_count(text) >= 1


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("Sorting is O(n log n) in the worst case.", 1),  # one O(...), not also "n log n"
        ("∑ᵢ xᵢ ≤ ∞", 3),
        (r"Let \frac{a}{b} \leq \sqrt{n}", 3),
        ("Prove by induction that 2^k > k.", 2),
        ("The theorem follows from the lemma.", 2),
        ("Bump the version and push.", 0),
        ("result = a ^ b", 0),  # XOR in code is not an exponent
        ("Η ανάλυση του προβλήματος είναι δύσκολη.", 0),  # noqa: RUF001 (Greek prose is not maths)
    ],
)
def test_math_markers(text: str, n: int) -> None:
    assert d.math_marker_count(text) == n


VOCABULARIES = (
    "REASONING_CUES",
    "CODE_KEYWORDS",
    "CODE_IDENTIFIER_SHAPES",
    "CODE_SYNTAX",
    "MATH_SYMBOLS",
    "MATH_WORDS",
)


@pytest.mark.parametrize("name", VOCABULARIES)
def test_vocabularies_are_exported_valid_patterns(name: str) -> None:
    vocab = getattr(d, name)
    assert isinstance(vocab, tuple) and len(vocab) >= 4
    for pattern in vocab:
        re.compile(pattern)


def test_cues_and_math_words_are_lower_case_because_text_is_case_folded() -> None:
    for pattern in (*d.REASONING_CUES, *d.MATH_WORDS):
        assert pattern == pattern.lower()
    assert d.reasoning_cue_count("EXPLAIN the Deadlock") == 2
    assert d.math_marker_count("By Induction on the Lemma") == 2


@pytest.mark.parametrize("word", ["def", "nullptr", "SELECT", "goroutine", "None"])
def test_every_code_keyword_counts_as_a_whole_word_only(word: str) -> None:
    assert d.code_keyword_count(f"x {word} y") >= 1
    assert d.code_keyword_count(f"x {word}q y".replace("q", "zz")) == 0


# ---- scopes -----------------------------------------------------------------------------


def test_latest_turn_is_everything_after_the_last_assistant_message() -> None:
    msgs = [user("a"), assistant("b"), user("c"), tool_result("d"), user("e")]
    assert [m.text() for m in d.latest_turn(request(msgs))] == ["c", "d", "e"]


def test_latest_turn_of_a_first_turn_is_the_whole_conversation() -> None:
    assert [m.text() for m in d.latest_turn(request([user("a"), user("b")]))] == ["a", "b"]


def test_latest_turn_skips_a_trailing_prefill() -> None:
    msgs = [user("a"), assistant("b"), user("c"), assistant("{")]
    assert [m.text() for m in d.latest_turn(request(msgs))] == ["c"]


def test_full_transcript_features() -> None:
    system = [TextPart("s" * 999)]
    call = ToolCall("c1", "edit_file", '{"path": "a.py"}')
    msgs = [user("why?"), Message("assistant", [], tool_calls=[call]), tool_result("ok")]
    f = d.full_transcript_features(request(msgs, system=system, tools=[]))
    assert f.system_prompt_log_len == pytest.approx(math.log(1000))
    assert f.has_tools  # a tool call in history counts even without declared tools
    assert f.reasoning_cue_count == 1
    assert f.prompt_tokens == d.count_tokens("s" * 999) + 1 + d.count_tokens(call.arguments) + 1
    assert f.log_prompt_tokens == pytest.approx(math.log1p(f.prompt_tokens))


def test_has_tools_is_false_for_a_plain_chat() -> None:
    req = request([user("hello")], tools=[])
    assert not d.full_transcript_features(req).has_tools
    assert not d.delta_features(req).has_tools
    assert d.delta_features(request([user("hello")])).has_tools  # tools declared


def test_delta_zeroes_the_system_prompt_and_reads_only_the_latest_turn() -> None:
    hard = hard_turn_text(0)
    req = request([user(hard), assistant("Here is why."), user("Thanks, rename it too.")])
    f = d.delta_features(req)
    assert f.system_prompt_log_len == 0.0
    assert f.reasoning_cue_count == 0 and f.math_marker_count == 0
    assert f.prompt_tokens == d.count_tokens("Thanks, rename it too.")


def test_delta_includes_tool_results_of_the_latest_turn() -> None:
    req = request([user("run it"), assistant("ok"), tool_result("Why? O(n log n)")])
    f = d.delta_features(req)
    assert f.reasoning_cue_count == 1 and f.math_marker_count == 1


def test_short_texts_do_not_read_as_dense_code() -> None:
    f = d.delta_features(request([user("Add a nil check to cfg.Load() in main.go")]))
    assert f.code_keyword_density <= 100 * 3 / d.DENSITY_MIN_CHARS


def test_describe_sums_to_score() -> None:
    f = d.delta_features(request([user(hard_turn_text(1))]))
    assert sum(d.describe(f).values()) == pytest.approx(d.score(f), abs=1e-3)


# ---- calibration (report §6.2: easy turns near 0.23, hard near 0.72) ---------------------


@pytest.mark.parametrize("text", TRIVIAL_TURNS)
def test_trivial_short_turn_delta_is_low(text: str) -> None:
    assert d.delta_score(agent_session(6, text)) < 0.35


@pytest.mark.parametrize("seed", range(9))
def test_realistic_hard_turn_delta_is_comfortably_high(seed: int) -> None:
    size = 3000 + 600 * seed  # 3 KB .. 7.8 KB of pasted trace
    text = hard_turn_text(seed, size)
    assert 3000 <= len(text) - len(HARD_PROSE[seed % 3]) <= 8500
    assert d.delta_score(agent_session(4, text)) > 0.62


@given(st.sampled_from(TRIVIAL_TURNS), st.integers(min_value=5, max_value=60))
@settings(max_examples=40, deadline=None)
def test_full_score_drifts_up_with_length_on_constant_trivial_turns(text: str, n: int) -> None:
    assert d.full_score(agent_session(n, text, filler=text)) > d.full_score(
        agent_session(1, text, filler=text)
    )


@given(st.sampled_from(TRIVIAL_TURNS), st.integers(min_value=1, max_value=60))
@settings(max_examples=40, deadline=None)
def test_delta_score_does_not_drift_with_length(text: str, n: int) -> None:
    assert d.delta_score(agent_session(n, text, filler=text)) == d.delta_score(
        agent_session(1, text, filler=text)
    )


def test_mean_full_drift_over_25_turns_is_material_and_delta_is_flat() -> None:
    full_drift = [
        d.full_score(agent_session(25, t, filler=t)) - d.full_score(agent_session(1, t, filler=t))
        for t in TRIVIAL_TURNS
    ]
    assert sum(full_drift) / len(full_drift) > 0.05
    assert all(d.delta_score(agent_session(25, t, filler=t)) < 0.35 for t in TRIVIAL_TURNS)


messages = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.text(max_size=300)),
    max_size=12,
)


@given(messages, st.text(max_size=2000))
@settings(max_examples=60, deadline=None)
def test_scores_are_in_unit_interval(history: list, latest: str) -> None:
    msgs = [Message(role, [TextPart(t)]) for role, t in history] + [user(latest)]
    req = request(msgs)
    for value in (d.full_score(req), d.delta_score(req)):
        assert 0.0 <= value <= 1.0


@given(messages, st.text(min_size=1, max_size=500))
@settings(max_examples=60, deadline=None)
def test_delta_ignores_everything_before_the_last_assistant_message(
    history: list, latest: str
) -> None:
    before = [Message(role, [TextPart(t)]) for role, t in history] + [assistant("ok")]
    with_history = request([*before, user(latest)])
    alone = request([assistant("ok"), user(latest)])
    assert d.delta_features(with_history) == d.delta_features(alone)


# ---- memo -------------------------------------------------------------------------------


@given(st.text(max_size=400))
@settings(max_examples=60, deadline=None)
def test_memoised_counts_equal_a_fresh_scan(text: str) -> None:
    d.clear_scan_memo()
    fresh = d.scan_text(text)
    assert d.scan_text(text) == fresh  # served from the memo
    d.clear_scan_memo()
    assert d.scan_text(text) == fresh


def test_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(d, "SCAN_MEMO_LIMIT", 10)
    d.clear_scan_memo()
    for i in range(50):
        d.scan_text(f"text number {i}")
    assert len(d._scan_memo) <= 10


def test_huge_tool_results_are_scanned_at_head_and_tail_only() -> None:
    code = CODE_SNIPPETS["go"]
    huge = code * (4 * d.SCAN_WINDOW_CHARS // len(code)) + "Why? Explain the invariant."
    d.clear_scan_memo()
    tokens, scanned, cues, _, _ = d.scan_text(huge)
    assert tokens == d.count_tokens(huge)  # tokens count everything
    assert scanned == 2 * d.SCAN_WINDOW_CHARS + 1
    assert cues == 3  # the tail is read
    f = d.delta_features(request([user("read it"), assistant("ok"), tool_result(huge)]))
    assert f.code_keyword_density > 2.0
