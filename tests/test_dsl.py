"""DSL rules: parsing, validation with line/column errors, and first-match evaluation."""

from __future__ import annotations

import textwrap

import pytest

from test_difficulty_samples import assistant, hard_turn_text, request, tool_result, user
from tiergate.core.model import ChatRequest, Message, ToolCall
from tiergate.routing import dsl
from tiergate.routing.dsl import RuleError, RuleFacts, first_match, parse_rules, parse_rules_yaml

RULES = textwrap.dedent(
    """\
    - name: failing-tests
      when:
        agent_state.tests_failed: true
        agent_state.turns: ">= 3"
      use: "@pool:strong"
    - name: infra-hard
      when:
        difficulty: ">= 0.6"
        any:
          - header.x-team: infra
          - request.has_images: true
      use: anthropic/claude-sonnet-5
    - name: no-edits-yet
      when:
        not: {agent_state.files_edited: true}
        agent_state.tools_used: "read_*"
      use: openai/gpt-5-nano
    - use: openai/gpt-5-mini
    """
)


def session(turns: int, *, failing: bool = False, edit: bool = False) -> ChatRequest:
    msgs: list[Message] = []
    for i in range(turns - 1):
        msgs.append(user("next step"))
        name, args = ("edit_file", '{"path": "a.py", "old_str": "x", "new_str": "y"}')
        if not edit:
            name, args = ("read_file", '{"path": "a.py"}')
        msgs.append(Message("assistant", [], tool_calls=[ToolCall(f"c{i}", name, args)]))
        msgs.append(tool_result("ok", f"c{i}"))
        msgs.append(assistant("done"))
    msgs.append(user("run the tests"))
    if failing:
        msgs.append(
            Message("assistant", [], tool_calls=[ToolCall("t", "bash", '{"command": "pytest"}')])
        )
        msgs.append(tool_result("FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed", "t"))
    return request(msgs)


def winner(req: ChatRequest, headers: dict[str, str] | None = None, score: float = 0.0) -> str:
    rule = first_match(parse_rules_yaml(RULES), RuleFacts(req, headers, score=score))
    assert rule is not None
    return rule.use


def test_first_matching_rule_wins_in_order() -> None:
    assert winner(session(4, failing=True, edit=True)) == "@pool:strong"
    assert winner(session(2, failing=True, edit=True)) == "openai/gpt-5-mini"  # turns < 3
    req = session(2, edit=True)
    assert winner(req, {"X-Team": "INFRA"}, score=0.7) == "anthropic/claude-sonnet-5"
    assert winner(req, {"X-Team": "web"}, score=0.7) == "openai/gpt-5-mini"
    assert winner(req, {"X-Team": "infra"}, score=0.5) == "openai/gpt-5-mini"
    assert winner(session(3)) == "openai/gpt-5-nano"  # only reads so far


def test_rule_metadata() -> None:
    rules = parse_rules_yaml(RULES)
    assert [r.name for r in rules] == ["failing-tests", "infra-hard", "no-edits-yet", None]
    assert [r.line for r in rules] == [1, 6, 13, 18]
    assert rules[3].label() == "line 18"


def test_no_rule_matches_returns_none() -> None:
    rules = parse_rules([{"when": {"request.stream": True}, "use": "m"}])
    assert first_match(rules, RuleFacts(request([user("hi")]))) is None


@pytest.mark.parametrize(
    ("condition", "score", "expected"),
    [
        (">= 0.6", 0.6, True),
        (">= 0.6", 0.59, False),
        ("> 0.6", 0.6, False),
        ("< 0.3", 0.2, True),
        ("<= 0.3", 0.3, True),
        ("== 0.5", 0.5, True),
        ("!= 0.5", 0.5, False),
        (0.5, 0.5, True),
        ([0.1, 0.5], 0.5, True),
        ([0.1, 0.2], 0.5, False),
    ],
)
def test_number_conditions(condition: object, score: float, expected: bool) -> None:
    rules = parse_rules([{"when": {"difficulty": condition}, "use": "m"}])
    assert (
        first_match(rules, RuleFacts(request([user("x")]), score=score)) is not None
    ) is expected


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("read_file", True),
        ("READ_*", True),
        ("edit_*", False),
        (["bash", "read_file"], True),
        (True, True),
        (False, False),
        (">= 1", True),
        ("> 1", False),
    ],
)
def test_set_conditions(condition: object, expected: bool) -> None:
    rules = parse_rules([{"when": {"agent_state.tools_used": condition}, "use": "m"}])
    assert (first_match(rules, RuleFacts(session(3))) is not None) is expected


def test_string_conditions_glob_lists_and_absence() -> None:
    req = request([user("x")])
    req.metadata["team"] = "Payments"

    def matches(when: dict) -> bool:
        return first_match(parse_rules([{"when": when, "use": "m"}]), RuleFacts(req)) is not None

    assert matches({"request.metadata.team": "pay*"})
    assert matches({"request.metadata.team": ["infra", "payments"]})
    assert not matches({"request.metadata.team": "infra"})
    assert matches({"header.x-missing": None})
    assert not matches({"request.metadata.team": None})
    assert matches({"request.model": "orcarouter/*"})


def test_combinators() -> None:
    req = request([user("x")])

    def matches(when: dict) -> bool:
        return first_match(parse_rules([{"when": when, "use": "m"}]), RuleFacts(req)) is not None

    assert matches({"any": [{"request.stream": True}, {"request.has_tools": True}]})
    assert not matches({"all": [{"request.stream": True}, {"request.has_tools": True}]})
    assert matches({"not": {"request.stream": True}})
    assert not matches({"request.has_tools": True, "not": {"request.stream": False}})


def test_difficulty_fields_read_the_request_when_no_score_is_given() -> None:
    hard = request([user("ok"), assistant("ok"), user(hard_turn_text(1))])
    rules = parse_rules([{"when": {"difficulty.delta": ">= 0.6"}, "use": "m"}])
    assert first_match(rules, RuleFacts(hard)) is not None
    rules = parse_rules([{"when": {"difficulty": ">= 0.6"}, "use": "m"}])
    assert first_match(rules, RuleFacts(hard, score=0.1)) is None  # the given score wins


def test_tests_just_failed_is_an_alias() -> None:
    rules = parse_rules([{"when": {"agent_state.tests_just_failed": True}, "use": "m"}])
    assert first_match(rules, RuleFacts(session(2, failing=True))) is not None
    assert first_match(rules, RuleFacts(session(2))) is None


def test_agent_state_is_only_derived_when_a_rule_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom(_: ChatRequest) -> None:
        raise AssertionError("agent_state should not be computed")

    monkeypatch.setattr(dsl, "agent_state", boom)
    rules = parse_rules([{"when": {"request.has_tools": True}, "use": "m"}])
    assert first_match(rules, RuleFacts(session(3))) is not None


# ---- validation -------------------------------------------------------------------------


def problems(text: str, **kw: object) -> list[str]:
    with pytest.raises(RuleError) as err:
        parse_rules_yaml(textwrap.dedent(text), **kw)  # type: ignore[arg-type]
    return err.value.problems


def test_errors_carry_line_and_column_in_document_order() -> None:
    got = problems(
        """\
        - when:
            difficulty: high
            agent_state.turnz: 3
            request.has_tools: "yes"
          use: "@pool:nope"
        - when: {header.x-team: infra}
          usee: m
        """,
        known_pools=["cheap"],
    )
    assert got[0] == (
        "line 2, column 17: difficulty: expected a number, a list of numbers, "
        "or a comparison like '>= 0.6'"
    )
    assert got[1].startswith("line 3, column 5: unknown field 'agent_state.turnz' (known: ")
    assert got[2] == "line 4, column 24: request.has_tools: expected true or false"
    assert got[3].startswith("line 5, column 8: unknown pool '@pool:nope'")
    assert got[4] == "line 6, column 3: rule has no 'use' (a model name or '@pool:<name>')"
    assert got[5] == "line 7, column 3: unknown rule key 'usee' (expected name, when, use)"
    assert len(got) == 6


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("use: m\n", "line 1, column 1: rules must be a list of mappings"),
        ("- just-a-string\n", "line 1, column 3: a rule must be a mapping"),
        ("- {when: {}, use: m}\n", "line 1, column 10: conditions must be a non-empty mapping"),
        ("- {when: {any: x}, use: m}\n", "line 1, column 16: 'any' takes a non-empty list"),
        ("- {use: ''}\n", "line 1, column 9: use must be a model name"),
        ("- {use: m, name: 3}\n", "line 1, column 18: name must be a string"),
        ("- {when: {request.model: true}, use: m}\n", "line 1, column 26: request.model: expected"),
        ("- {use: [m\n", "line 2, column 1: YAML syntax error"),
    ],
)
def test_each_validation_problem(text: str, expected: str) -> None:
    got = problems(text)
    assert got[0].startswith(expected), got


def test_known_models_are_checked() -> None:
    got = problems("- use: openai/gpt-9\n", known_models=["openai/gpt-5-mini"])
    assert got == ["line 1, column 8: unknown model 'openai/gpt-9'"]
    parse_rules_yaml("- use: '@pool:weak'\n", known_pools=[])  # band pools always exist


def test_rules_inside_a_config_file_report_the_files_own_lines() -> None:
    config = textwrap.dedent(
        """\
        server: {port: 4000}
        routers:
          - name: a
            strategy: cheapest
          - name: b
            strategy: dsl
            rules:
              - when: {agent_state.turns: many}
                use: m
        """
    )
    with pytest.raises(RuleError) as err:
        parse_rules_yaml(config, at=("routers", 1, "rules"))
    assert err.value.problems[0].startswith("line 8, column 35: agent_state.turns: expected")
    assert len(parse_rules_yaml(config.replace("many", "'>= 2'"), at=("routers", 1, "rules"))) == 1
    with pytest.raises(RuleError, match="not found"):
        parse_rules_yaml(config, at=("routers", 5, "rules"))


def test_parsed_data_errors_use_paths() -> None:
    with pytest.raises(RuleError) as err:
        parse_rules([{"when": {"any": [{"difficulty": "lots"}]}, "use": "m"}, {"use": 3}])
    assert err.value.problems == [
        "rules[0].when.any[0].difficulty: difficulty: expected a number, a list of numbers, "
        "or a comparison like '>= 0.6'",
        "rules[1].use: use must be a model name or '@pool:<name>'",
    ]
