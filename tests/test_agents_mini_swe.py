"""mini-swe-agent (`mini -y --exit-immediately`) through tiergate, via litellm's
OpenAI provider, in both of its modes: the default bash tool calls and the
text-based mode (one fenced command per reply).

mini-swe-agent sends no session id: tiergate's fingerprint (system prompt plus
first user message, which stay fixed) names the session. Its prompts are small
(~900 tokens at turn 1, under OpenAI's 1,024-token cache minimum, then cached in
128-token steps), so no route reaches 95 % cached; the assertion is that the
session is cached as well through tiergate as sent to the provider directly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_support import (
    ROUTER_MODEL,
    TASK,
    AgentBench,
    agent_binary,
    assert_cache_as_direct,
    assert_escalated_by_strikes,
    assert_served_one_session,
    assert_stayed_offline,
)
from servers import TOKEN

pytestmark = pytest.mark.agents

KNOWN_GAP = (
    "not escalated: strike producers read tool results only, and text mode's "
    "observations are user text "
    "(docs/agents.md, 'Escalation of text-protocol agents')"
)

TEXT_MODE = ("-c", "mini_textbased.yaml", "--model-class", "litellm_textbased")


def run_mini(tmp_path: Path, script: str, *mode: str) -> AgentBench:
    binary = agent_binary("mini-swe-agent/bin/mini", "mini-swe-agent")
    bench = AgentBench(tmp_path, script)
    with bench.running():
        env = bench.env(
            OPENAI_API_BASE=f"{bench.url}/v1",
            OPENAI_API_KEY=TOKEN,
            MSWEA_CONFIGURED="true",
            MSWEA_COST_TRACKING="ignore_errors",
            MSWEA_GLOBAL_CONFIG_DIR=str(bench.home / "mini-swe-agent"),
        )
        argv = [str(binary), "-m", f"openai/{ROUTER_MODEL}", "-t", TASK, "-y"]
        argv += ["--exit-immediately", "--cost-limit", "0", "-o", str(tmp_path / "traj.json")]
        done = bench.run([*argv, *(mode or ("-c", "mini.yaml"))], env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert '"exit_status": "Submitted"' in (tmp_path / "traj.json").read_text()
        assert_stayed_offline(bench)
        bench.report = bench.session_report()
    return bench


def test_mini_swe_agent_tool_mode_fixes_the_test(tmp_path: Path) -> None:
    bench = run_mini(tmp_path, "fix")
    assert_served_one_session(bench.report, min_turns=4)
    assert bench.report.session_sources == {"fingerprint"}
    assert all(t.offers_tools for t in bench.report.turns)
    assert_cache_as_direct(bench.report)
    assert bench.calc_fixed() and bench.tests_pass()


def test_mini_swe_agent_sends_a_session_id_when_configured(tmp_path: Path) -> None:
    """litellm's extra_headers, set from the command line, name the session."""
    named = ("-c", "mini.yaml", "-c", 'model.model_kwargs.extra_headers={"X-Session-Id": "run-7"}')
    bench = run_mini(tmp_path, "fix", *named)
    assert_served_one_session(bench.report, min_turns=4)
    assert bench.report.session_sources == {"header:x-session-id"}
    assert bench.calc_fixed()


def test_mini_swe_agent_tool_mode_failure_loop_escalates(tmp_path: Path) -> None:
    bench = run_mini(tmp_path, "loop")
    assert_escalated_by_strikes(bench.report)
    assert not bench.tests_pass()


def test_mini_swe_agent_text_mode_fixes_the_test(tmp_path: Path) -> None:
    bench = run_mini(tmp_path, "fix", *TEXT_MODE)
    assert_served_one_session(bench.report, min_turns=4)
    assert not any(t.offers_tools for t in bench.report.turns)
    assert_cache_as_direct(bench.report)
    assert bench.calc_fixed() and bench.tests_pass()


def test_mini_swe_agent_text_mode_failure_loop_escalates(tmp_path: Path) -> None:
    bench = run_mini(tmp_path, "loop", *TEXT_MODE)
    assert_served_one_session(bench.report, min_turns=6)
    assert not bench.tests_pass()
    if not any(t.tier_header == "strong; reason=strikes" for t in bench.report.turns):
        pytest.xfail(KNOWN_GAP)
    assert_escalated_by_strikes(bench.report)
