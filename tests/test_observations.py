"""The action/observation classifier on each protocol's real wrappers, and its rules.

Samples follow the exact templates of the agents named (mini-swe-agent's default
and v2 text configs, SWE-agent's footer and edit messages, OpenHands' CodeAct
prompt and command observations, aider's /run echo); contents are made up.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.formats.anthropic import parse_request as parse_anthropic
from tiergate.routing.actions import call_action, text_action
from tiergate.routing.difficulty import delta_features, full_transcript_features
from tiergate.routing.features import agent_state
from tiergate.routing.observations import (
    Follows,
    failure_keys,
    observe,
    turn_observations,
    unwrap_json_result,
)


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def reply(text: str) -> Message:
    return Message("assistant", [TextPart(text)])


def bash(command: str, label: str = "bash") -> str:
    return f"THOUGHT: Let me check.\n\n```{label}\n{command}\n```"


def mini(returncode: int, output: str) -> str:
    """mini-swe-agent's default observation template."""
    return f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>"


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/repo/reproduce.py", line 4, in <module>\n'
    "    main()\n"
    '  File "/repo/pkg/core.py", line 88, in parse\n'
    "    raise ValueError(f'bad token {tok!r}')\n"
    "ValueError: bad token '}'\n"
)
SWE_FOOTER = "\n(Open file: /repo/pkg/core.py)\n(Current directory: /repo)\nbash-$"
PYTEST_FAIL = (
    "=================================== FAILURES ===================================\n"
    "FAILED tests/test_core.py::test_parse_brace - ValueError: bad token '}'\n"
    "========================= 1 failed, 41 passed in 1.20s =========================\n"
)
PYTEST_PASS = "========================= 42 passed in 1.31s =========================\n"


# ---- observations: which user messages are command output --------------------------


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        (mini(1, TRACEBACK), True),
        (mini(0, "pkg/core.py\npkg/util.py\n"), False),
        (mini(0, "ERROR: logged by the grep hit itself\n"), False),  # exit 0 rules the shapes
        (mini(0, PYTEST_FAIL), True),  # `pytest | tail` exits 0; the summary still counts
        (mini(1, ""), False),  # grep found nothing: an answer, not a failure
        ("<exception>TimeoutExpired</exception>\n" + mini(-1, "partial\n"), True),
        ("OBSERVATION:\n" + TRACEBACK, True),
        ("Observation: " + PYTEST_PASS, False),
        ('Found 1 matches for "parse" in /repo/pkg/core.py' + SWE_FOOTER, False),
        ("Your command ran successfully and did not produce any output." + SWE_FOOTER, False),
        (
            "Your proposed edit has introduced new syntax error(s). Please read this error "
            "message carefully and then retry editing the file.\n\nERRORS:\n"
            "- E999 IndentationError: unexpected indent\n" + SWE_FOOTER,
            True,
        ),
        ("EXECUTION RESULT of [execute_bash]:\n" + TRACEBACK, True),
        ("ls\npkg tests\n[The command completed with exit code 0.]", False),
        ("python -m pytest\n" + PYTEST_FAIL + "[Command finished with exit code 1]", True),
        (
            "I ran this command:\n\npytest -q\n\nAnd got this output:\n\n" + PYTEST_FAIL,
            True,
        ),
        (
            "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
            True,
        ),
    ],
)
def test_wrapped_command_output_is_an_observation(text: str, failed: bool) -> None:
    obs = observe(user(text), "reply")
    assert obs is not None and obs.failed == failed
    assert bool(obs.failures) == failed


def test_exit_codes_flag_errors_like_is_error() -> None:
    flagged = observe(user(mini(2, "make: *** [all] Error 2\n")), "reply")
    assert flagged is not None and flagged.error_flag
    clean = observe(user(mini(0, "done\n")), "reply")
    assert clean is not None and not clean.error_flag


@pytest.mark.parametrize(
    "text",
    [
        "Please fix the login bug.\n\n" + TRACEBACK,  # a pasted traceback is an ask
        "Thanks! Now add a test for it.",
        "Why does this fail?\n" + PYTEST_FAIL,
    ],
)
def test_a_user_ask_is_not_an_observation(text: str) -> None:
    assert observe(user(text), "reply") is None
    assert observe(user(text), "opening") is None


def test_unwrapped_output_counts_only_right_after_a_command() -> None:
    assert observe(user(TRACEBACK), "action") is not None
    assert observe(user(TRACEBACK), "reply") is None


def test_the_opening_message_is_an_ask_even_with_a_footer() -> None:
    """SWE-agent's task prompt ends with the same footer as its observations."""
    task = "We're currently solving the following issue.\nISSUE:\nparse() breaks" + SWE_FOOTER
    assert observe(user(task), "opening") is None
    assert observe(user(task), "reply") is not None


def test_tool_results_are_observations_whatever_they_follow() -> None:
    result = Message("tool", [TextPart("boom")], tool_call_id="c", is_error=True)
    obs = observe(result, "opening")
    assert obs is not None and obs.failed and obs.error_flag
    assert observe(reply("hello"), "action") is None


def test_anthropic_tool_result_blocks_are_tool_messages() -> None:
    req = parse_anthropic(
        {
            "model": "m",
            "max_tokens": 100,
            "messages": [
                {"role": "user", "content": "Run the tests."},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "pytest"}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                         "content": [{"type": "text", "text": PYTEST_FAIL}]},
                        {"type": "text", "text": "and then fix it"},
                    ],
                },
            ],
        }
    )  # fmt: skip
    roles = [m.role for m in req.messages]
    assert roles == ["user", "assistant", "tool", "user"]
    [(msg, obs)] = turn_observations(req.messages)
    assert msg.role == "tool" and obs.failed and obs.error_flag
    assert "test:tests/test_core.py::test_parse_brace" in obs.failures


# ---- actions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "edit"),
    [
        (bash("sed -i 's/old/new/' pkg/core.py && python reproduce.py"), True),
        (bash("cat > pkg/fix.py <<'EOF'\nX = 1\nEOF"), True),
        (bash("grep -rn parse pkg/ | head"), False),
        (bash("cd /repo && python -m pytest tests/ -x", "mswea_bash_command"), False),
        ("Let me open it.\n```\nopen pkg/core.py 80\n```", False),  # SWE-agent
        ("Fix it.\n```\nedit 88:88\n        raise ValueError(tok)\nend_of_edit\n```", True),
        ("<execute_bash>\npython reproduce.py\n</execute_bash>", False),  # OpenHands CodeAct
        (
            "<function=str_replace_editor>\n<parameter=command>str_replace</parameter>\n"
            "<parameter=path>/repo/pkg/core.py</parameter>\n<parameter=old_str>a</parameter>\n"
            "<parameter=new_str>b</parameter>\n</function>",
            True,
        ),
    ],
)
def test_text_actions(text: str, edit: bool) -> None:
    action = text_action(text)
    assert action is not None and action.edit == edit


def test_a_code_block_shown_before_the_command_does_not_hide_it() -> None:
    """Fences pair in order: the closing fence of a ```python block is not an opening."""
    reply = (
        "We will add this to `reproduce.py`:\n```python\nparse('2020-01-01Z')\n```\n\n"
        "Let's edit the file.\n```\nedit 1:1\nparse('2020-01-01Z')\nend_of_edit\n```"
    )
    action = text_action(reply)
    assert action is not None and action.edit and action.signature.startswith("edit 1:1")
    shown_only = "Run it like this:\n```python\nparse('x')\n```\nThen we are done."
    assert text_action(shown_only) is None


def test_prose_without_a_command_is_not_an_action() -> None:
    assert text_action("I think the bug is in parse(); the brace is never closed.") is None


def test_a_compound_command_may_edit_even_when_it_fails() -> None:
    action = text_action(bash("sed -i 's/a/b/' x.py && pytest"))
    assert action is not None and action.compound and action.paths == ("x.py",)
    alone = text_action(bash("sed -i 's/a/b/' x.py"))
    assert alone is not None and not alone.compound


def test_edits_are_keyed_so_an_undo_is_recognisable() -> None:
    forward = call_action("Edit", '{"file_path": "a.py", "old_string": "x", "new_string": "y"}')
    back = call_action("Edit", '{"file_path": "a.py", "old_string": "y", "new_string": "x"}')
    (path, old, new) = forward.edit_keys[0]
    assert back.edit_keys[0] == (path, new, old)
    sed = text_action(bash("sed -i 's/x/y/g' a.py"))
    assert sed is not None and sed.edit_keys[0][1:] == (old, new)


def test_git_checkout_is_a_revert() -> None:
    action = text_action(bash("git checkout -- pkg/core.py"))
    assert action is not None and action.revert and not action.edit


# ---- failure identity ---------------------------------------------------------------


def test_the_same_failure_after_an_edit_has_the_same_identity() -> None:
    moved = TRACEBACK.replace("line 88", "line 91").replace("'}'", "']'")
    assert (
        failure_keys(TRACEBACK) == failure_keys(moved) == {"exc:ValueError@/repo/pkg/core.py:parse"}
    )


def test_a_different_failure_has_a_different_identity() -> None:
    other = TRACEBACK.replace("ValueError", "KeyError")
    assert failure_keys(TRACEBACK) != failure_keys(other)
    assert failure_keys(PYTEST_FAIL) == {"test:tests/test_core.py::test_parse_brace"}


# ---- the scorers read text observations as tool results ------------------------------


def text_session() -> ChatRequest:
    return ChatRequest(
        model="m",
        messages=[
            user("Fix the parser bug described below."),
            reply(bash("python reproduce.py")),
            user(mini(1, TRACEBACK)),
        ],
    )


def test_text_observations_leave_the_lexical_features_alone() -> None:
    """HasTools means tools declared or tool-protocol results: a text agent's output
    scores as its latest turn, without the term (docs/escalation.md)."""
    req = text_session()
    assert not delta_features(req).has_tools and not full_transcript_features(req).has_tools
    as_tool = ChatRequest(
        model="m",
        messages=[*req.messages[:2], Message("tool", [TextPart(TRACEBACK)], tool_call_id="c")],
    )
    assert delta_features(as_tool).has_tools


def test_text_observations_are_not_user_turns_and_commands_are_tool_calls() -> None:
    state = agent_state(text_session())
    assert state.turns == 1 and state.tool_calls == 1 and state.tools_used == {"bash"}
    assert state.tool_errors == 1 and not state.tests_failed


# ---- properties ---------------------------------------------------------------------

outputs = st.text(st.sampled_from("abc xyz:=()\n"), max_size=80)


@settings(max_examples=200, deadline=None)
@given(st.integers(-2, 130), outputs, st.sampled_from(["reply", "action"]))
def test_any_returncode_wrapper_is_an_observation(code: int, out: str, follows: Follows) -> None:
    obs = observe(user(mini(code, out)), follows)
    assert obs is not None
    assert obs.error_flag == (code != 0)
    if code == 0:
        assert not obs.failed  # no traceback or test summary in these outputs
    assert obs.failed == bool(obs.failures)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("abcdefg ,.?!\n"), max_size=200))
def test_plain_prose_is_never_an_observation(text: str) -> None:
    contexts: tuple[Follows, ...] = ("opening", "reply", "action")
    for follows in contexts:
        assert observe(user(text), follows) is None
    assert text_action(text) is None


def test_stash_run_pop_is_a_check_not_a_revert() -> None:
    action = text_action(bash("git stash && pytest -q; git stash pop"))
    assert action is not None and not action.revert
    stash = text_action(bash("git stash"))
    assert stash is not None and stash.revert


_UNITTEST_FAILURE = (
    "test_add (test_calc.AddTest.test_add) ... FAIL\n\n"
    "FAIL: test_add (test_calc.AddTest.test_add)\n"
    "Traceback (most recent call last):\n"
    '  File "/repo/test_calc.py", line 8, in test_add\n'
    "    self.assertEqual(add(2, 1), 3)\n"
    "AssertionError: 1 != 3\n\nFAILED (failures=1)\n"
)


def test_a_json_wrapped_command_result_reads_like_its_text_form() -> None:
    """mini-swe-agent 2.x in tool mode answers a call with `{"returncode": N,
    "output": "..."}`: escaped in JSON the output has no line breaks, so without
    decoding only an output digest (no failure identity) would be read."""
    as_json = orjson.dumps(
        {"returncode": 1, "output": _UNITTEST_FAILURE}, option=orjson.OPT_INDENT_2
    )
    as_text = f"<returncode>1</returncode>\n<output>\n{_UNITTEST_FAILURE}</output>"
    from_json = observe(Message("tool", [TextPart(as_json.decode())], tool_call_id="c1"), "action")
    from_text = observe(Message("tool", [TextPart(as_text)], tool_call_id="c1"), "action")
    assert from_json is not None and from_text is not None
    assert from_json.failed and from_json.error_flag
    assert from_json.failures == from_text.failures
    assert any(k.startswith("test:") for k in from_json.failures)
    ok = orjson.dumps({"returncode": 0, "output": ""}).decode()
    passed = observe(Message("tool", [TextPart(ok)], tool_call_id="c2"), "action")
    assert passed is not None and not passed.failed


@pytest.mark.parametrize(
    "text", ['{"returncode": "1", "output": "x"}', '{"returncode": 1, "output": 3}', "{not json"]
)
def test_other_json_results_are_read_as_text(text: str) -> None:
    assert unwrap_json_result(text) == text
