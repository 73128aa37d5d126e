"""`tiergate replay import`: every log format in, a corpus the real engine replays out.

The coding CLIs' own session stores (Claude Code, Codex, opencode) are in
tests/test_replay_import_cli_logs.py.

The samples under tests/data/traces follow the layouts of real public logs
(see its README). Each test checks what a gateway would have seen: one turn
per model call, each request the cumulative history the agent sent, the
reply as the turn's response, and the request accepted by tiergate's codec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from eval.realtraffic import independent
from eval.realtraffic.build import BUCKETS, issue_key

from import_support import CODEX, TRACES, assert_cumulative, one, roles
from tiergate.cli import main
from tiergate.replay.corpus import load_corpus
from tiergate.replay.importers import (
    FORMATS,
    ImportStats,
    UnknownFormat,
    detect,
    expand,
    import_sessions,
)
from tiergate.replay.importers.labels import load_labels
from tiergate.replay.pipeline import prepare
from tiergate.replay_cli import IMPORT_FORMATS


def test_every_cli_format_has_an_importer() -> None:
    assert set(IMPORT_FORMATS) == {"auto", *FORMATS}


def test_mini_swe_agent_text_protocol() -> None:
    doc = one(TRACES / "mini-swe-agent" / "demo__calc-1.traj.json")
    assert doc["source"]["protocol"] == "text"
    assert doc["source"]["key"] == "demo__calc-1"
    assert doc["source"]["model"] == "anthropic/claude-sonnet-4-20250514"
    assert len(doc["turns"]) == 3  # three replies; the closing `exit` is no model call
    # The command output goes back as a user message: the text protocol.
    assert roles(doc["turns"][1]) == ["system", "user", "assistant", "user"]
    assert "```bash" in doc["turns"][0]["response"]["content"]
    assert_cumulative(doc)


def test_mini_swe_agent_tool_call_mode_drops_framework_extras() -> None:
    doc = one(TRACES / "mini-swe-agent" / "demo__text-2.traj.json")
    assert doc["source"]["protocol"] == "tool-call"
    first, second = doc["turns"]
    assert first["response"]["tool_calls"][0]["function"]["name"] == "bash"
    assert roles(second) == ["system", "user", "assistant", "tool"]
    sent = second["request"]["messages"][2]
    assert set(sent) == {"role", "content", "tool_calls"}  # no `extra`, `function_call`...
    assert set(sent["tool_calls"][0]) == {"id", "type", "function"}
    assert second["idle_seconds_before"] == 19.0  # 1775874690 - 1775874671
    assert_cumulative(doc)


def test_swe_agent_multi_agent_keeps_each_agent_its_own_history() -> None:
    doc = one(TRACES / "swe-agent" / "demo__parser-3.traj")
    assert doc["source"]["framework"] == "swe-agent (multi-agent)"
    assert doc["source"]["protocol"] == "text"
    manager, repro1, repro2 = doc["turns"]
    assert manager["request"]["messages"][0]["content"].startswith("SETTING: You are a Manager")
    # The reproducer's calls carry the reproducer's conversation, not the manager's.
    assert repro1["request"]["messages"][0]["content"].startswith("SETTING: You are a helpful")
    assert roles(repro2) == ["system", "user", "assistant", "user"]
    for turn in doc["turns"]:
        for m in turn["request"]["messages"]:
            assert set(m) <= {"role", "content"}  # `agent`, `thought`, `action` dropped
    prepare([doc], "test")


def test_swe_agent_function_calling_answers_calls_by_tool_call_ids() -> None:
    doc = one(TRACES / "swe-agent" / "demo__fc-6.traj")
    assert doc["source"]["framework"] == "swe-agent"
    assert doc["source"]["protocol"] == "tool-call"
    last = doc["turns"][1]["request"]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool"]
    assert last[3] == {"role": "tool", "tool_call_id": "call_fc1", "content": "344"}
    assert "TimeDelta" in last[1]["content"]  # list-of-parts content read as text
    assert_cumulative(doc)


@pytest.mark.parametrize("path", ["output.jsonl", "session-7f3a"])
def test_openhands_output_row_and_session_folder_agree(path: str) -> None:
    doc = one(TRACES / "openhands" / path)
    assert doc["source"]["framework"] == "openhands"
    assert doc["source"]["protocol"] == "tool-call"
    # Three model responses; the second made two tool calls at once (one turn, not two).
    assert len(doc["turns"]) == 3
    assert len(doc["turns"][1]["response"]["tool_calls"]) == 2
    third = doc["turns"][2]
    assert [c["id"] for c in third["request"]["messages"][-3]["tool_calls"]] == [
        "toolu_02",
        "toolu_03",
    ]
    assert roles(third)[-2:] == ["tool", "tool"]
    # The malformed-call error went back to the model as user text; bookkeeping did not.
    assert roles(doc["turns"][0]) == ["system", "user", "user"]
    assert doc["turns"][0]["request"]["tools"][0]["function"]["name"] == "execute_bash"
    assert third["idle_seconds_before"] == 18.0
    assert_cumulative(doc)


def test_openhands_before_function_calling_is_a_text_protocol() -> None:
    doc = one(TRACES / "openhands" / "legacy-output.jsonl")
    assert doc["source"]["protocol"] == "text"
    first, second, third = doc["turns"]  # run, run_ipython, finish
    assert first["response"]["content"] == (
        "Let me look at the CLI first.\n<execute_bash>\ncat cli.py\n</execute_bash>"
    )
    assert "<execute_ipython>" in second["response"]["content"]
    assert roles(third) == ["user", "assistant", "user", "assistant", "user"]
    assert third["request"]["messages"][2]["content"].startswith("OBSERVATION:\nimport yaml")
    assert_cumulative(doc)


def test_openhands_row_names_its_instance() -> None:
    assert one(TRACES / "openhands" / "output.jsonl")["source"]["key"] == "demo__login-4"
    assert one(TRACES / "openhands" / "session-7f3a")["source"]["key"] == "session-7f3a"


def _pretty(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    return path


@pytest.mark.parametrize("form", ["row", "bare-list"])
def test_openhands_single_file_trajectory_reads_as_its_output_row(
    tmp_path: Path, form: str
) -> None:
    jsonl = TRACES / "openhands" / "output.jsonl"
    row = orjson.loads(jsonl.read_bytes().splitlines()[0])
    data = row if form == "row" else row["history"]
    single = _pretty(tmp_path / "demo__login-4.json", data)
    assert single.read_bytes().count(b"\n") > 100  # pretty-printed: not one row a line
    assert detect(single) == "openhands"
    doc, want = one(single), one(jsonl)
    assert doc["turns"] == want["turns"]
    assert doc["source"]["key"] == "demo__login-4"  # the row's id, or the file's name
    # A bare list names no model but its logged responses do.
    model = want["source"]["model"] if form == "row" else "claude-sonnet-4"
    assert doc["source"]["model"] == model


V1 = TRACES / "openhands" / "demo__cache-7.json"


def test_openhands_v1_events_rebuild_the_messages_the_agent_sent() -> None:
    doc = one(V1)
    assert doc["source"]["key"] == "demo__cache-7"
    assert doc["source"]["protocol"] == "tool-call"
    assert doc["source"]["model"] == "litellm_proxy/claude-sonnet-4-5-20250929"
    turns = doc["turns"]
    assert len(turns) == 4  # four responses; five ActionEvents, two from one response
    assert roles(turns[0]) == ["system", "user"]  # the state update is no message
    system = turns[0]["request"]["messages"][0]["content"]
    assert system.endswith("edit code.\nWorking directory: /workspace/demo")  # + dynamic context
    tools = [t["function"]["name"] for t in turns[0]["request"]["tools"]]
    assert tools == ["terminal", "file_editor", "finish"]
    # The second response's two calls are one assistant message, its thought the text.
    both = turns[1]["response"]
    assert both["content"] == "Read the cache and run its tests."
    assert [c["id"] for c in both["tool_calls"]] == ["toolu_v2", "toolu_v3"]
    assert orjson.loads(both["tool_calls"][1]["function"]["arguments"]) == {
        "command": "python -m pytest -q tests/test_cache.py"
    }
    last = turns[3]["request"]["messages"]
    assert roles(turns[3]) == [
        "system", "user", "assistant", "tool", "assistant", "tool", "tool", "assistant", "tool"
    ]  # fmt: skip
    calls = [c["id"] for m in last if m["role"] == "assistant" for c in m["tool_calls"]]
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == calls
    # The agent error answering the timed-out call went back as its tool result.
    assert last[6] == {
        "role": "tool",
        "tool_call_id": "toolu_v3",
        "content": "Command timed out after 120 seconds.",
    }
    assert last[3]["content"].startswith("src/cache.py:4:")  # observation content parts
    assert turns[3]["response"] == {
        "content": "The ttl is now stored; expiry can read it.",
        "finish_reason": "stop",
    }
    assert turns[1]["idle_seconds_before"] == 7.0  # 10:00:12 - 10:00:05
    assert_cumulative(doc)


@pytest.mark.parametrize("form", ["output.jsonl", "bare-list"])
def test_openhands_v1_reads_the_same_in_every_container(tmp_path: Path, form: str) -> None:
    row = orjson.loads(V1.read_bytes())
    if form == "output.jsonl":
        path = tmp_path / "output.jsonl"
        path.write_bytes(orjson.dumps(row) + b"\n")
    else:
        path = _pretty(tmp_path / "demo__cache-7.json", row["history"])
    assert detect(path) == "openhands"
    doc = one(path)
    assert doc["source"]["key"] == "demo__cache-7"
    assert doc["turns"] == one(V1)["turns"]


def test_openhands_v1_error_results_and_older_sdk_layouts(tmp_path: Path) -> None:
    row = orjson.loads(V1.read_bytes())
    events = row["history"]
    # SDK 1.0 (Oct 2025): tools in OpenAI form, terminal output in `output`.
    events[0]["tools"] = [{"type": "function", "function": {"name": "execute_bash"}}]
    obs = events[4]["observation"]
    obs["output"] = obs.pop("content")[0]["text"]
    events[11]["observation"]["is_error"] = True
    # A long system prompt pushes every event but the first past the sniffed head.
    events[0]["system_prompt"]["text"] += " Be careful." * 500
    # A second user message (with skill text the agent context added) right after
    # the first: the SDK sends adjacent user messages as one.
    more = orjson.loads(orjson.dumps(events[1]))
    more["llm_message"]["content"] = [{"type": "text", "text": "Keep the API."}]
    more["extended_content"] = [{"type": "text", "text": "Skill: cache-notes"}]
    events.insert(2, more)
    path = _pretty(tmp_path / "demo__cache-7.json", events)
    assert detect(path) == "openhands"
    doc = one(path)
    assert doc["turns"][0]["request"]["tools"] == events[0]["tools"]
    assert roles(doc["turns"][0]) == ["system", "user"]
    user = doc["turns"][0]["request"]["messages"][1]["content"]
    assert user.endswith("</issue_description>\nKeep the API.\nSkill: cache-notes")
    last = doc["turns"][3]["request"]["messages"]
    assert last[3]["content"] == obs["output"]
    assert last[8]["content"] == (
        "[An error occurred during execution.]\n"
        "The file /workspace/demo/src/cache.py has been edited."
    )


def test_openhands_file_without_history_is_reported_failed(tmp_path: Path) -> None:
    from tiergate.replay.importers import ImportStats

    empty = _pretty(tmp_path / "demo__none-1.json", {"instance_id": "x", "history": []})
    cut = tmp_path / "demo__cut-2.json"
    cut.write_bytes(V1.read_bytes()[:2000])
    rows = tmp_path / "output.jsonl"
    rows.write_bytes(b'{"instance_id": "y", "test_result": {}}\n')
    paths = [empty, cut, rows]
    assert [detect(p) for p in paths] == ["openhands"] * 3
    stats = ImportStats()
    assert list(import_sessions(paths, stats=stats)) == []
    assert len(stats.failed) == 3
    assert "no OpenHands event history" in stats.failed[0]
    assert stats.failed[1].startswith(str(cut))


def test_autocoderover_retrieval_then_patch_conversation() -> None:
    folder = TRACES / "autocoderover" / "demo__calc-4_2024-04-06_13-51-50"
    doc = one(folder)  # the folder: its other files are not inputs of their own
    assert doc == one(folder / "conversation_round_0.json", "autocoderover")
    assert doc["session_id"] == doc["source"]["key"] == "demo__calc-4"
    assert doc["source"]["protocol"] == "text"
    assert doc["source"]["model"] == "gpt-4-0125-preview"
    # Three retrieval calls (the latest round file), then two patch attempts; the
    # retrieval replies pasted into the patch conversation are history, not calls,
    # and the proxy agent's call is not read.
    turns = doc["turns"]
    assert len(turns) == 5
    assert turns[0]["response"]["content"] == 'search_method("divide")'
    search, patch = turns[:3], turns[3:]
    assert all(t["request"]["messages"][0]["content"].startswith("You are") for t in turns)
    assert {t["request"]["messages"][0]["content"] for t in search} != {
        t["request"]["messages"][0]["content"] for t in patch
    }
    first_patch = patch[0]["request"]["messages"]
    assert [m["role"] for m in first_patch[1:]] == [*roles(search[-1])[1:], "assistant", "user"]
    assert patch[1]["request"]["messages"][-1]["content"].startswith("Written an applicable")
    assert all("idle_seconds_before" not in t for t in turns)  # the logs keep no times
    prepare([doc], "test")


def test_moatless_turns_are_the_logged_requests_not_a_rebuilt_history() -> None:
    doc = one(TRACES / "moatless" / "demo__calc-5")
    assert doc["session_id"] == doc["source"]["key"] == "demo__calc-5"
    assert doc["source"]["protocol"] == "tool-call"
    assert doc["source"]["model"] == "claude-3-5-sonnet-20241022"
    turns = doc["turns"]
    assert len(turns) == 4  # three agent calls and one search helper call
    assert roles(turns[0]) == ["system", "user"]
    assert roles(turns[1]) == ["system", "user", "assistant", "tool"]
    assert roles(turns[2]) == ["user"]  # the helper's prompt is not logged: no system
    assert turns[2]["response"]["content"] == "calc/stats.py: mean"
    # The last call's history has the first observation rewritten, as logged.
    last = turns[3]["request"]["messages"]
    assert roles(turns[3]) == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert "shown in file context" in last[3]["content"]
    assert last[2]["tool_calls"][0]["function"]["name"] == "FindFunction"
    assert turns[3]["response"]["tool_calls"][0]["function"]["name"] == "Finish"
    prepare([doc], "test")


def test_openai_requests_are_grouped_into_conversations() -> None:
    docs = {d["session_id"]: d for d in import_sessions([TRACES / "openai" / "requests.jsonl"])}
    assert sorted(len(d["turns"]) for d in docs.values()) == [1, 1, 2]
    agent = next(d for d in docs.values() if len(d["turns"]) == 2)
    assert agent["source"]["protocol"] == "tool-call"
    assert agent["turns"][0]["response"]["tool_calls"][0]["id"] == "c1"
    assert "explicit-9" in docs
    assert all(
        t["request"]["model"] == "orcarouter/coding" for d in docs.values() for t in d["turns"]
    )
    prepare(list(docs.values()), "test")


def test_labels_join_mark_hard_sessions_and_hold_out_a_split() -> None:
    labels = load_labels(
        TRACES / "labels.csv",
        "instance_id",
        "difficulty",
        hard=("hard",),
        buckets=BUCKETS,
        include={"in_verified": "false"},
    )
    docs = list(import_sessions([TRACES], labels=labels, keep_unlabelled=False))
    by_key = {d["source"]["key"]: d for d in docs}
    # demo__login-4 is in the held-out split: dropped, in both of its OpenHands forms.
    assert set(by_key) == {"demo__calc-1", "demo__text-2", "demo__parser-3"}
    assert by_key["demo__text-2"]["archetype"] == "hard"
    assert by_key["demo__text-2"]["label"] == "1-4 hours"
    assert all(t["needs_strong"] for t in by_key["demo__text-2"]["turns"])
    assert by_key["demo__calc-1"]["archetype"] == "easy"
    assert not any(t["needs_strong"] for t in by_key["demo__calc-1"]["turns"])


def test_folder_detection_and_unknown_files(tmp_path: Path) -> None:
    found = {p.name: f for p, f in expand([TRACES])}
    assert found == {
        "demo__calc-1.traj.json": "mini-swe-agent",
        "demo__text-2.traj.json": "mini-swe-agent",
        "demo__parser-3.traj": "swe-agent",
        "demo__fc-6.traj": "swe-agent",
        "output.jsonl": "openhands",
        "legacy-output.jsonl": "openhands",
        "session-7f3a": "openhands",
        "demo__cache-7.json": "openhands",
        "5d0c1e8a.jsonl": "claude-code",
        CODEX.name: "codex",
        "conversation_round_0.json": "autocoderover",
        "trajectory.json": "moatless",
        "agent.log": "terminal-bench",
        "requests.jsonl": "openai",
    }
    stray = tmp_path / "notes.txt"
    stray.write_text("hello")
    assert detect(stray) is None
    with pytest.raises(UnknownFormat):
        list(expand([stray]))


def test_a_truncated_log_is_skipped_not_fatal(tmp_path: Path) -> None:
    bad = tmp_path / "cut.traj.json"
    good = TRACES / "mini-swe-agent" / "demo__calc-1.traj.json"
    bad.write_bytes(good.read_bytes()[:300])
    stats = ImportStats()
    docs = list(import_sessions([bad, good], stats=stats))
    assert len(docs) == 1 and len(stats.failed) == 1 and "cut.traj.json" in stats.failed[0]


def test_cli_import_then_replay_through_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, metrics = tmp_path / "corpus.jsonl", tmp_path / "metrics.json"
    argv = ["replay", "import", str(TRACES), "--out", str(out), "--no-progress"]
    argv += ["--labels", str(TRACES / "labels.csv"), "--hard-label", "hard"]
    argv += ["--bucket", "<15 min fix=easy", "--bucket", "1-4 hours=hard"]
    argv += ["--only", "in_verified=false", "--labelled-only"]
    assert main(argv) == 0
    assert "imported 3 sessions" in capsys.readouterr().err
    corpus = load_corpus(out)
    assert {d["archetype"] for d in corpus} == {"easy", "hard", "15 min - 1 hour"}
    assert main(["replay", "--corpus", str(out), "--json", str(metrics), "--no-progress"]) == 0
    doc = orjson.loads(metrics.read_bytes())
    assert doc["corpus"]["sessions"] == 3
    assert set(doc["policies"]["escalation"]["archetypes"]) == {"easy", "hard", "15 min - 1 hour"}


def test_cli_import_id_prefix_keeps_two_agents_runs_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for name in ("agent-a", "agent-b"):
        out = tmp_path / f"{name}.jsonl"
        argv = ["replay", "import", str(TRACES / "mini-swe-agent"), "--out", str(out)]
        assert main([*argv, "--id-prefix", name, "--no-progress"]) == 0
        paths.append(out)
    a, b = (load_corpus(p) for p in paths)
    assert [d["session_id"] for d in a] == [f"agent-a/{d['source']['key']}" for d in a]
    ids = [d["session_id"] for d in a + b]
    assert len(ids) == len(set(ids)) == 2 * len(a) > 0
    # the label join key is unchanged: both runs still join one instance's label
    assert [d["source"]["key"] for d in a] == [d["source"]["key"] for d in b]


def test_cli_import_errors_and_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stray = tmp_path / "x.txt"
    stray.write_text("nothing")
    assert main(["replay", "import", str(stray), "--no-progress"]) == 2
    assert "not a log format" in capsys.readouterr().err
    assert main(["replay", "import", str(TRACES), "--bucket", "nolabel", "--no-progress"]) == 2
    with pytest.raises(SystemExit) as exit_:
        main(["replay", "import", "--help"])
    assert exit_.value.code == 0
    assert "--labels" in capsys.readouterr().out


def test_independent_corpus_is_deterministic_and_replayable() -> None:
    a, b = independent.generate(20, seed=5), independent.generate(20, seed=5)
    assert a == b and a != independent.generate(20, seed=6)
    protocols = {d["source"]["protocol"] for d in independent.generate(40)}
    assert protocols == {"text", "tool-call"}
    prepare(a, "test")


def test_issue_key_matches_the_same_issue_across_frameworks() -> None:
    coder = "We're currently solving...\nISSUE:\nParser  hangs on\nempty input.\n"
    openhands = (
        "<uploaded_files>/w</uploaded_files>\n<issue_description>\nParser hangs on empty input."
    )
    assert issue_key(coder) == issue_key(openhands) == "Parser hangs on empty input."
    assert issue_key("no marker") is None
