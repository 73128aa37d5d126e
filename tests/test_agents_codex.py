"""Codex CLI (`codex exec`) through tiergate's Responses API endpoint.

A provider entry in `$CODEX_HOME/config.toml` points it at tiergate
(docs/agents.md). It runs commands with its own shell tool and names the
session with a `session-id` header.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_support import (
    ROUTER_MODEL,
    TASK,
    AgentBench,
    agent_binary,
    assert_cache_warm,
    assert_escalated_by_strikes,
    assert_served_one_session,
    assert_stayed_offline,
)
from servers import TOKEN

pytestmark = pytest.mark.agents


def codex_config(gateway_url: str) -> str:
    return f"""\
model = "{ROUTER_MODEL}"
model_provider = "tiergate"
check_for_update_on_startup = false

[model_providers.tiergate]
name = "tiergate"
base_url = "{gateway_url}/v1"
env_key = "TIERGATE_TOKEN"
wire_api = "responses"

[analytics]
enabled = false

[features]
plugins = false  # else it syncs a plugin catalogue from github.com and chatgpt.com
"""


def run_codex(tmp_path: Path, script: str) -> AgentBench:
    binary = agent_binary("node/bin/codex", "@openai/codex")
    bench = AgentBench(tmp_path, script)
    with bench.running():
        codex_home = bench.home / ".codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(codex_config(bench.url))
        env = bench.env(TIERGATE_TOKEN=TOKEN, CODEX_HOME=str(codex_home))
        argv = [str(binary), "exec", "--skip-git-repo-check"]
        argv += ["--dangerously-bypass-approvals-and-sandbox", TASK]
        done = bench.run(argv, env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert_stayed_offline(bench)
        bench.report = bench.session_report()
    return bench


def test_codex_fixes_the_test_in_one_warm_session(tmp_path: Path) -> None:
    bench = run_codex(tmp_path, "fix")
    assert_served_one_session(bench.report, min_turns=4)
    assert {t.path for t in bench.report.turns} == {"/v1/responses"}
    assert bench.report.session_sources == {"header:session-id"}
    assert_cache_warm(bench.report)
    assert bench.calc_fixed() and bench.tests_pass()


def test_codex_failure_loop_escalates_to_the_strong_tier(tmp_path: Path) -> None:
    bench = run_codex(tmp_path, "loop")
    assert_escalated_by_strikes(bench.report)
    assert not bench.tests_pass()
