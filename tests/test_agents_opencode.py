"""opencode (`opencode run`) through tiergate, on an OpenAI-compatible provider.

The provider lines are the ones docs/agents.md gives; opencode names the
session with an `x-session-id` header (its title request shares it).
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
from tiergate.replay.importers import import_sessions

pytestmark = pytest.mark.agents

#: opencode 1.18 installs @opencode-ai/plugin into each config dir in the
#: background at start, with no switch to stop it; offline it logs a warning.
OPENCODE_PLUGIN_INSTALL = frozenset({"registry.npmjs.org"})


def opencode_config(gateway_url: str) -> dict[str, object]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "tiergate": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "tiergate",
                "options": {"baseURL": f"{gateway_url}/v1", "apiKey": "{env:TIERGATE_TOKEN}"},
                "models": {ROUTER_MODEL: {"name": "tiergate coding router"}},
            }
        },
        "model": f"tiergate/{ROUTER_MODEL}",
        "autoupdate": False,
        "share": "disabled",
    }


def run_opencode(tmp_path: Path, script: str) -> AgentBench:
    binary = agent_binary("node/bin/opencode", "opencode-ai")
    bench = AgentBench(tmp_path, script)
    with bench.running():
        (bench.repo / "opencode.json").write_bytes(orjson.dumps(opencode_config(bench.url)))
        done = bench.run([str(binary), "run", "--auto", TASK], bench.env(TIERGATE_TOKEN=TOKEN))
        assert done.returncode == 0, done.stderr[-3000:]
        assert_stayed_offline(bench, OPENCODE_PLUGIN_INSTALL)
        bench.report = bench.session_report()
    return bench


def assert_database_imports_as_sent(bench: AgentBench) -> None:
    """`tiergate replay import` of opencode's own session database gives, turn by
    turn, the requests it sent to the gateway, less the system prompt (built per
    request, never stored) and the session-title side request (no tools)."""
    [doc] = import_sessions([bench.home / ".local" / "share" / "opencode"])
    imported = [t["request"]["messages"] for t in doc["turns"]]
    wire = [
        [m for m in t.body["messages"] if m["role"] != "system"]
        for t in bench.report.turns
        if t.body.get("tools")
    ]
    assert len(imported) == len(wire) >= 4
    assert imported == wire
    assert doc["source"]["framework"] == "opencode"


def test_opencode_fixes_the_test_in_one_warm_session(tmp_path: Path) -> None:
    bench = run_opencode(tmp_path, "fix")
    report = bench.report
    assert_served_one_session(report, min_turns=4)
    assert report.session_sources == {"header:x-session-id"}
    assert_cache_warm(report)
    assert bench.calc_fixed() and bench.tests_pass()
    assert_database_imports_as_sent(bench)


def test_opencode_failure_loop_escalates_to_the_strong_tier(tmp_path: Path) -> None:
    bench = run_opencode(tmp_path, "loop")
    assert_escalated_by_strikes(bench.report)
    assert not bench.tests_pass()
    assert_database_imports_as_sent(bench)
