"""Harness-run calls and edits (routing.observations.harness_observation) and their
evidence (routing.progress).

An agent whose harness runs its named calls for it (AutoCodeRover's search API)
writes the calls in prose and gets "Result of call(...):" back as a user message;
its edits are `<file>/<original>/<patched>` blocks, answered by the harness
refusing them or by its tests failing after it applied them. Samples follow
AutoCodeRover 1.0's templates; the contents are made up.
"""

from __future__ import annotations

import pytest

from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.routing.actions import tagged_edit_action, text_action
from tiergate.routing.observations import (
    SEARCH_PARTS,
    harness_observation,
    observe,
    turn_observations,
)
from tiergate.routing.progress import SURVIVAL_STRIKE, progress_of
from tiergate.routing.strikes import request_strikes


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def reply(text: str) -> Message:
    return Message("assistant", [TextPart(text)])


TASK = "<issue>Parsing a header card with a D exponent loses the exponent.</issue>"
ASK_SEARCH = (
    "Based on the files, classes, methods, code statements from the issue that related to "
    "the bug, you can use below search APIs to get more context of the project.\n"
    "        search_class(class_name: str): Search for a class in the codebase.\n"
)
CALLS = (
    "We need the card parser first.\n\n"
    '1. `search_class("HeaderCard")`\n2. `search_method_in_file("parse_value", "cards/core.py")`'
)
ROUND = (
    'Result of search_class("HeaderCard"):\n'
    "Found 1 classes with name HeaderCard in the codebase.\n"
    "Search result 1: <file>cards/core.py</file> <class>HeaderCard</class> <code>\n"
    "class HeaderCard:\n    def parse_value(self): ...\n</code>\n\n\n"
    'Result of search_method_in_file("parse_value", "cards/core.py"):\n'
    "Could not find file cards/core.py in the codebase.\n\n"
)
MISSES = (
    'Result of search_method("exponent_of"):\n'
    "Could not find method exponent_of in the codebase.\n\n"
    'Result of search_code_in_file("D+", "cards/io.py"):\n'
    "Could not find code D+ in file cards/io.py.\n\n"
    'Result of search_method_in_file("fmt", "cards/io.py"):\n'
    "There is no method with name `fmt` in file cards/io.py.\n\n"
)
PATCH_PROMPT = "Write a patch for the issue, based on the retrieved context."
REFUSED_APPLY = (
    "Your edit could not be applied to the program. None of the edits can match the "
    "original program. Please try again."
)
UNPARSED = (
    "Your edit could not be applied to the program. No edits can be parsed. Please try again."
)
TESTS_FAILED = (
    "Written an applicable patch, but it did not resolve the issue. Some tests have failed.  "
    "Please try again."
)
INVALID_CALLS = (
    "The search API calls seem not valid. Please check the arguments you give carefully "
    "and try again."
)


def patch(n: int, path: str = "cards/core.py") -> str:
    return (
        f"# modification 1\n```python\n<file>{path}</file>\n"
        f"<original>    value = float(text)</original>\n"
        f"<patched>    value = float(text.replace('D', 'E'))  # try {n}</patched>\n```\n\n"
        "This replaces the exponent marker before converting."
    )


def retrieval() -> list[Message]:
    return [user(TASK), user(ASK_SEARCH), reply(CALLS), user(ROUND)]


# ---- search rounds ------------------------------------------------------------------


def test_a_search_round_is_one_observation_per_call() -> None:
    obs = harness_observation(ROUND)
    assert obs is not None and obs.kind == "search"
    assert [p.command for p in obs.parts] == [
        'search_class("HeaderCard")',
        'search_method_in_file("parse_value", "cards/core.py")',
    ]
    assert [p.failed for p in obs.parts] == [False, True]
    assert not obs.failed  # the round found something
    assert all(p.kind == "search" and not p.error_flag for p in obs.parts)


def test_a_round_of_misses_is_a_failed_search() -> None:
    obs = harness_observation(MISSES)
    assert obs is not None and obs.failed and obs.kind == "search"
    assert all(p.failed for p in obs.parts) and len(obs.parts) == 3


def test_calls_are_counted_as_exploration_with_their_arguments_as_identity() -> None:
    msgs = [*retrieval(), user("Let's analyze collected context first"), reply(CALLS)]
    msgs.append(user(ROUND))
    p = progress_of(msgs)
    assert p.tool_calls == 4 and len(p.actions) == 2  # the same two calls again
    assert p.tools_used == {"search_class", "search_method_in_file"}
    assert p.failed_observations == 2 and p.edits == 0 and not p.files_edited


def test_search_misses_never_strike_however_often_repeated() -> None:
    msgs = [user(TASK), user(ASK_SEARCH)]
    for _ in range(6):
        msgs += [reply(CALLS), user(MISSES), reply("I cannot tell."), user(INVALID_CALLS)]
    p = progress_of(msgs)
    assert p.failed_observations == 6 * 4 and p.longest_failure_streak == 6 * 4
    assert p.stuck == ()
    assert request_strikes(ChatRequest(model="m", messages=msgs)) == []


def test_the_location_read_is_a_search_observation() -> None:
    text = (
        "Here are the code in buggy locations:\n"
        "Found 1 methods with name parse_value in class HeaderCard.\n"
        "Search result 1: <file>cards/core.py</file> <code>def parse_value(self): ...</code>\n"
    )
    obs = observe(user(text), "reply")
    assert obs is not None and obs.kind == "search" and not obs.failed


@pytest.mark.parametrize(
    "text",
    [
        "Result of the tests: they pass.",  # no call
        "Let's analyze collected context first",
        "Based on your analysis, answer below questions:  - do we need more context",
        "The patch looks fine; could you also update the changelog?",
        '  Result of search_class("X"):\nCould not find class X in the codebase.',  # not at start
    ],
)
def test_ordinary_messages_are_not_harness_verdicts(text: str) -> None:
    assert harness_observation(text) is None


def test_the_opening_message_is_never_an_observation() -> None:
    assert observe(user(MISSES), "opening") is None


# ---- tagged edits -------------------------------------------------------------------


def test_a_tagged_replacement_is_an_edit_action() -> None:
    two = patch(1) + "\n\n# modification 2\n```python\n<file>cards/io.py</file>\n"
    two += "<original>x = 1</original>\n<patched>x = 2</patched>\n```"
    action = tagged_edit_action(two)
    assert action is not None and action.edit and action.tool == "patch"
    assert action.paths == ("cards/core.py", "cards/io.py") and len(action.edit_keys) == 2
    assert text_action(two) == action
    assert tagged_edit_action(patch(1)) != tagged_edit_action(patch(2))


def test_prose_naming_a_patch_is_not_an_edit() -> None:
    assert tagged_edit_action("We should patch <file>cards/core.py</file> next.") is None


# ---- patch feedback -----------------------------------------------------------------


def patch_session(feedback: list[str]) -> list[Message]:
    msgs = [*retrieval(), user(PATCH_PROMPT)]
    for n, text in enumerate(feedback):
        msgs += [reply(patch(n)), user(text)]
    return msgs


def test_a_refused_edit_did_not_land() -> None:
    msgs = patch_session([REFUSED_APPLY])
    ((_, obs),) = turn_observations(msgs)
    assert obs.kind == "apply" and obs.failed and obs.error_flag
    p = progress_of(msgs)
    assert p.edits == 0 and p.attempts == 1 and p.stuck == ()


def test_tests_failing_after_an_applied_patch_count_as_an_edit_and_a_failing_run() -> None:
    msgs = patch_session([TESTS_FAILED])
    ((_, obs),) = turn_observations(msgs)
    assert obs.kind == "validation" and obs.failed
    assert obs.failures == frozenset({"test:validation"})
    p = progress_of(msgs)
    assert p.edits == 1 and p.files_edited == {"cards/core.py"}


@pytest.mark.parametrize("verdict", [REFUSED_APPLY, TESTS_FAILED])
def test_the_same_verdict_surviving_patch_attempts_is_stuck(verdict: str) -> None:
    below = patch_session([verdict] * SURVIVAL_STRIKE)
    assert progress_of(below).stuck == ()
    msgs = patch_session([verdict] * (SURVIVAL_STRIKE + 1))
    p = progress_of(msgs)
    assert [s.reason for s in p.stuck] == ["failure_survives_edits"]
    strikes = request_strikes(ChatRequest(model="m", messages=msgs))
    assert [s.reason for s in strikes] == ["failure_survives_edits"]


def test_different_refusals_are_different_failures() -> None:
    p = progress_of(patch_session([REFUSED_APPLY, UNPARSED, REFUSED_APPLY]))
    assert p.stuck == ()  # each reason seen after one more attempt at most


def test_a_refused_edit_between_failing_validations_still_counts_as_an_attempt() -> None:
    p = progress_of(patch_session([TESTS_FAILED, REFUSED_APPLY, TESTS_FAILED, TESTS_FAILED]))
    assert "failure_survives_edits" in {s.reason for s in p.stuck}
    assert p.edits == 3 and p.attempts == 4


def test_a_round_reads_at_most_search_parts_calls() -> None:
    text = "".join(
        f'Result of search_method("m{i}"):\nCould not find method m{i} in the codebase.\n\n'
        for i in range(SEARCH_PARTS + 4)
    )
    obs = harness_observation(text)
    assert obs is not None and len(obs.parts) == SEARCH_PARTS and obs.failed


def test_a_call_echoed_with_a_stray_semicolon_or_nested_parens_keeps_its_arguments() -> None:
    text = (
        'Result of search_code("show_hidden(initial=False)");:\n'
        "Found 3 snippets containing `show_hidden(initial=False)` in the codebase.\n"
    )
    obs = harness_observation(text)
    assert obs is not None and not obs.failed
    assert [p.command for p in obs.parts] == ['search_code("show_hidden(initial=False)");']
