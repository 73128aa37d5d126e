"""Claude Code (`claude -p`) through tiergate's Anthropic Messages endpoint.

Three environment variables point it at tiergate (docs/agents.md); the router
model serves it from an OpenAI upstream, so this also drives the Anthropic to
OpenAI conversion with Claude Code's real request shapes (its Bash tool, its
system blocks and cache_control breakpoints). It names the session with the
`X-Claude-Code-Session-Id` header. As root it refuses
`--dangerously-skip-permissions` unless IS_SANDBOX=1.
"""

from __future__ import annotations

from pathlib import Path

import orjson
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
from tiergate.formats.anthropic.request import parse_request
from tiergate.formats.openai.request import render_request
from tiergate.replay.corpus import ROUTER_MODEL as CORPUS_MODEL
from tiergate.replay.importers import import_sessions

pytestmark = pytest.mark.agents


def run_claude(tmp_path: Path, script: str) -> tuple[AgentBench, dict[str, object]]:
    binary = agent_binary("node/bin/claude", "@anthropic-ai/claude-code")
    bench = AgentBench(tmp_path, script)
    with bench.running():
        env = bench.env(
            ANTHROPIC_BASE_URL=bench.url,
            ANTHROPIC_AUTH_TOKEN=TOKEN,
            ANTHROPIC_MODEL=ROUTER_MODEL,
            ANTHROPIC_DEFAULT_HAIKU_MODEL=ROUTER_MODEL,
            CLAUDE_CONFIG_DIR=str(bench.home / ".claude"),
            IS_SANDBOX="1",
        )
        argv = [str(binary), "-p", TASK, "--dangerously-skip-permissions"]
        argv += ["--output-format", "json", "--max-turns", "20"]
        done = bench.run(argv, env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        result = orjson.loads(done.stdout)
        assert_stayed_offline(bench)
        bench.report = bench.session_report()
    return bench, result


def assert_session_log_imports_as_sent(bench: AgentBench) -> None:
    """`tiergate replay import` of the session's own log gives, turn by turn, the
    requests Claude Code sent (via the same codecs), except two things the log does
    not keep: the system prompt, and the `<system-reminder>` blocks (git status,
    CLAUDE.md) it puts before the task in the first user message."""
    [doc] = import_sessions([bench.home / ".claude" / "projects"])
    imported = [t["request"]["messages"] for t in doc["turns"]]
    rendered = [
        render_request(parse_request(t.body), CORPUS_MODEL)["messages"]
        for t in bench.report.turns
        if t.body.get("tools")
    ]
    wire = [[m for m in w if m["role"] != "system"] for w in rendered]
    assert len(imported) == len(wire) >= 4
    assert [m[1:] for m in imported] == [m[1:] for m in wire]
    first_wire, first_log = wire[0][0]["content"], imported[0][0]["content"]
    assert first_wire[0]["text"].startswith("<system-reminder>")
    assert first_wire[-1]["text"] == first_log == TASK


def test_claude_code_fixes_the_test_in_one_warm_session(tmp_path: Path) -> None:
    bench, result = run_claude(tmp_path, "fix")
    assert result["subtype"] == "success" and not result["is_error"]
    assert_served_one_session(bench.report, min_turns=4)
    assert bench.report.session_sources == {"header:x-claude-code-session-id"}
    assert_cache_warm(bench.report)
    assert bench.calc_fixed() and bench.tests_pass()
    assert_session_log_imports_as_sent(bench)


def test_claude_code_failure_loop_escalates_to_the_strong_tier(tmp_path: Path) -> None:
    bench, _ = run_claude(tmp_path, "loop")
    assert_escalated_by_strikes(bench.report)
    assert not bench.tests_pass()
    assert_session_log_imports_as_sent(bench)
