"""Terminal-Bench trials: mini-swe-agent's console rebuilt as the conversation it sent."""

from __future__ import annotations

from pathlib import Path

from tiergate.replay.importers import ImportStats, detect, import_sessions, terminalbench

DATA = Path(__file__).parent / "data" / "traces" / "terminal-bench"
TRIAL = DATA / "fix-config.1-of-1.demo-run"


def test_console_becomes_system_task_and_one_turn_per_step() -> None:
    [t] = terminalbench.load(TRIAL / "sessions" / "agent.log")
    assert (t.session_id, t.key, t.framework) == (
        "fix-config.1-of-1.demo-run",
        "fix-config",
        "mini-swe-agent (terminal-bench)",
    )
    assert t.model == "anthropic/claude-sonnet-4-20250514"
    roles = [m["role"] for _, m in t.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    contents = [m["content"] for _, m in t.messages]
    assert contents[0].startswith("You are a helpful assistant")
    assert (
        contents[2]
        == "THOUGHT: Let me look at the config first.\n\n```bash\ncat /app/config.toml\n```"
    )
    assert contents[3] == '<returncode>0</returncode>\n<output>\nport = "eighty"\n</output>'
    # escape codes, the spinner, rule lines and LiteLLM's traceback never reach a message
    for text in contents:
        assert "\x1b" not in text and "Waiting for the LM" not in text
        assert "\u2500" not in text and "LiteLLM" not in text and "Traceback" not in text
    assert contents[4].startswith("THOUGHT: The port must be a number.")


def test_import_detects_the_trial_and_skips_an_agent_that_never_ran() -> None:
    assert detect(TRIAL / "sessions" / "agent.log") == "terminal-bench"
    assert detect(TRIAL / "results.json") is None
    stats = ImportStats()
    docs = list(import_sessions([DATA], stats=stats))
    assert [d["session_id"] for d in docs] == ["fix-config.1-of-1.demo-run"]
    [doc] = docs
    assert doc["source"]["protocol"] == "text" and doc["source"]["key"] == "fix-config"
    assert len(doc["turns"]) == 2
    last = doc["turns"][-1]["request"]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user"]
    assert len(stats.failed) == 1 and "no model call" in stats.failed[0]


def test_results_file_is_read_next_to_the_console() -> None:
    assert terminalbench.results(TRIAL / "sessions" / "agent.log")["is_resolved"] is True
