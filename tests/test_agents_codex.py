"""Codex CLI (`codex exec`) through tiergate's Responses API endpoint.

A provider entry in `$CODEX_HOME/config.toml` points it at tiergate
(docs/agents.md). It runs commands with its own shell tool and names the
session with a `session-id` header. With the token from a command and
`server.codex_instructions_file` set, it reads tiergate's model catalog
(GET /v1/models?client_version=) and no longer warns that the router's model
metadata is missing.
"""

from __future__ import annotations

import json
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
from tiergate.formats.openai.request import render_request
from tiergate.formats.responses.request import parse_request
from tiergate.replay.corpus import ROUTER_MODEL as CORPUS_MODEL
from tiergate.replay.importers import detect, import_sessions

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


#: Codex's fallback-metadata warning (for a model name it has no metadata for).
METADATA_WARNING = "Model metadata for `orcarouter/coding` not found"
#: Written here for the test; an operator points tiergate at the instructions
#: their Codex users should get (docs/agents.md).
INSTRUCTIONS = (
    "You are a coding agent working in the user's repository through a shell tool. "
    "Run the tests, read the failure, make the smallest fix, and run the tests again."
)


def catalog_config(gateway_url: str) -> str:
    """The token from a command, not `env_key`: only then does Codex fetch the
    provider's model catalog."""
    config = codex_config(gateway_url).replace('env_key = "TIERGATE_TOKEN"\n', "")
    return config.replace(
        "[analytics]",
        '[model_providers.tiergate.auth]\ncommand = "printenv"\nargs = ["TIERGATE_TOKEN"]\n\n'
        "[analytics]",
    )


def run_codex(tmp_path: Path, script: str, *, catalog: bool = False) -> AgentBench:
    binary = agent_binary("node/bin/codex", "@openai/codex")
    server: dict[str, str] = {}
    if catalog:
        instructions = tmp_path / "codex-instructions.md"
        instructions.write_text(INSTRUCTIONS)
        server["codex_instructions_file"] = str(instructions)
    bench = AgentBench(tmp_path, script, server=server)
    with bench.running():
        codex_home = bench.home / ".codex"
        codex_home.mkdir()
        config = catalog_config(bench.url) if catalog else codex_config(bench.url)
        (codex_home / "config.toml").write_text(config)
        env = bench.env(TIERGATE_TOKEN=TOKEN, CODEX_HOME=str(codex_home))
        argv = [str(binary), "exec", "--skip-git-repo-check"]
        argv += ["--dangerously-bypass-approvals-and-sandbox", TASK]
        done = bench.run(argv, env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert_stayed_offline(bench)
        bench.report = bench.session_report()
    return bench


def assert_rollout_imports_as_sent(bench: AgentBench, *, same_system: bool) -> None:
    """`tiergate replay import` of the session's own rollout file gives, turn by turn,
    the chat-completions requests the gateway got on the wire (via the same codec).

    Without tiergate's model catalog Codex sends its built-in prompt as the first
    developer message but logs a different `base_instructions` text (20,751 against
    16,979 characters from 0.171), so there the system prompt is compared apart."""
    rollouts = sorted((bench.home / ".codex" / "sessions").rglob("rollout-*.jsonl"))
    assert len(rollouts) == 1 and detect(rollouts[0]) == "codex"
    [doc] = import_sessions(rollouts)
    imported = [t["request"]["messages"] for t in doc["turns"]]
    wire = [
        render_request(parse_request(t.body), CORPUS_MODEL)["messages"] for t in bench.report.turns
    ]
    assert len(imported) == len(wire) >= 4
    skip = 0 if same_system else 1
    assert [m[skip:] for m in imported] == [m[skip:] for m in wire]
    assert imported[0][0]["role"] == wire[0][0]["role"] == "system"
    assert doc["source"]["protocol"] == "tool-call"


def test_codex_fixes_the_test_in_one_warm_session(tmp_path: Path) -> None:
    bench = run_codex(tmp_path, "fix")
    assert_rollout_imports_as_sent(bench, same_system=False)
    assert_served_one_session(bench.report, min_turns=4)
    assert {t.path for t in bench.report.turns} == {"/v1/responses"}
    assert bench.report.session_sources == {"header:session-id"}
    assert_cache_warm(bench.report)
    assert bench.calc_fixed() and bench.tests_pass()


def test_codex_failure_loop_escalates_to_the_strong_tier(tmp_path: Path) -> None:
    bench = run_codex(tmp_path, "loop")
    assert_escalated_by_strikes(bench.report)
    assert not bench.tests_pass()


def test_codex_reads_the_model_catalog_and_stops_warning(tmp_path: Path) -> None:
    bench = run_codex(tmp_path, "fix", catalog=True)
    assert METADATA_WARNING not in bench.output  # (stderr also had it without the catalog)
    cache = json.loads((bench.home / ".codex" / "models_cache.json").read_text())
    router = next(m for m in cache["models"] if m["slug"] == ROUTER_MODEL)
    assert router["context_window"] == 128_000  # the smallest of the router's models
    # the catalog's instructions replace Codex's built-in prompt (its first developer
    # message: 16,979 characters from Codex 0.171 without the catalog; none for an empty one)
    firsts = [t.body["input"][0] for t in bench.report.turns]
    assert {(m["role"], m["content"][0]["text"]) for m in firsts} == {("developer", INSTRUCTIONS)}
    assert_rollout_imports_as_sent(bench, same_system=True)
    assert_served_one_session(bench.report, min_turns=4)
    assert_cache_warm(bench.report)
    assert bench.calc_fixed() and bench.tests_pass()
