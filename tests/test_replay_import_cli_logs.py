"""`tiergate replay import` of the coding CLIs' own session stores: Claude Code's
project JSONL, Codex CLI rollouts and opencode's SQLite database.

The samples follow the files the live CLI tests leave (tests/test_agents_*.py,
which also compare each import with the requests the gateway received).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from import_support import CODEX, TRACES, assert_cumulative, one, roles
from tiergate.replay.importers import ImportStats, detect, import_sessions


def test_claude_code_joins_streamed_blocks_and_skips_meta() -> None:
    doc = one(TRACES / "claude-code" / "5d0c1e8a.jsonl")
    assert doc["session_id"] == "5d0c1e8a-2f4b-4c1e-9a77-0c3b1f2e9d10"
    assert doc["source"]["protocol"] == "tool-call"
    assert len(doc["turns"]) == 3  # msg_01 came as two lines: one reply
    first = doc["turns"][0]["response"]
    assert first["content"] == "I'll read the test."
    assert first["tool_calls"][0]["function"]["name"] == "Read"
    last = doc["turns"][2]["request"]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool"]
    assert last[2]["tool_call_id"] == "toolu_A"
    assert all("/cost" not in str(m.get("content")) for m in last)
    assert_cumulative(doc)


def test_claude_code_sub_agent_file_is_its_own_session(tmp_path: Path) -> None:
    main_lines = (TRACES / "claude-code" / "5d0c1e8a.jsonl").read_text().splitlines()
    sub = []
    for raw in main_lines:
        line = orjson.loads(raw)
        if line.get("type") in ("user", "assistant"):
            line["isSidechain"] = True
            line["agentId"] = "a1"
        sub.append(orjson.dumps(line).decode())
    (tmp_path / "agent-a1.jsonl").write_text("\n".join(sub) + "\n")
    # A main session with a sub-agent line in it: that line is not main traffic.
    stray = orjson.loads(sub[4])
    stray["message"]["id"] = "msg_sub"
    mixed = [*main_lines[:3], orjson.dumps(stray).decode(), *main_lines[3:]]
    (tmp_path / "mixed.jsonl").write_text("\n".join(mixed) + "\n")
    docs = {Path(d["source"]["file"]).name: d for d in import_sessions([tmp_path])}
    assert len(docs["agent-a1.jsonl"]["turns"]) == 3
    assert len(docs["mixed.jsonl"]["turns"]) == 3


def test_codex_rollout_one_turn_per_model_call() -> None:
    doc = one(CODEX)
    assert doc["session_id"] == doc["source"]["key"] == "0199c0de-7a11-7e55-9c2d-5a3f0e1b2c3d"
    assert doc["source"]["framework"] == "codex"
    assert doc["source"]["model"] == "gpt-5-codex"  # from turn_context
    assert doc["source"]["protocol"] == "tool-call"
    assert len(doc["turns"]) == 4  # four token_usage_record lines, four calls
    first, second, third, last = doc["turns"]
    # base instructions, then the developer message: both system text for chat
    assert roles(first) == ["system", "system", "user", "user"]
    assert first["request"]["messages"][0]["content"].startswith("You are a coding agent")
    assert first["response"]["content"] == "Looking for the parser."
    # one response with two calls is one assistant message, both outputs answer it
    assert [c["id"] for c in second["response"]["tool_calls"]] == ["call_demo_2", "call_demo_3"]
    sent = third["request"]["messages"]
    assert [m.get("tool_call_id") for m in sent[-2:]] == ["call_demo_2", "call_demo_3"]
    assert "unconverted data remains" in sent[-1]["content"]
    # the custom (freeform) apply_patch call and its output are a call like any other
    assert third["response"]["tool_calls"][0]["function"]["name"] == "apply_patch"
    assert last["request"]["messages"][-1]["tool_call_id"] == "call_demo_4"
    assert last["response"] == {
        "content": "parse_date now accepts a trailing Z.",
        "finish_reason": "stop",
    }
    assert [t["idle_seconds_before"] for t in doc["turns"]] == [0.0, 3.0, 3.0, 3.0]
    # Codex's private item fields never reach a request
    assert "internal_chat_message_metadata_passthrough" not in orjson.dumps(doc).decode()
    assert_cumulative(doc)


def test_codex_rollout_without_a_model_call_is_no_session(tmp_path: Path) -> None:
    lines = CODEX.read_text().splitlines()
    head = [raw for raw in lines if '"role":"assistant"' not in raw and "_call" not in raw]
    cut = tmp_path / "rollout-cut.jsonl"
    cut.write_text("\n".join(head) + "\n")
    assert detect(cut) == "codex"
    assert list(import_sessions([cut])) == []


def _opencode_db(folder: Path) -> Path:
    """An opencode 1.18 database with the columns the importer reads (the layout of
    the databases the live opencode tests leave, tests/test_agents_opencode.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(folder / "opencode.db")
    db.executescript(
        "CREATE TABLE session (id text PRIMARY KEY, parent_id text, time_created integer);"
        "CREATE TABLE message (id text PRIMARY KEY, session_id text, time_created integer,"
        " data text);"
        "CREATE TABLE part (id text PRIMARY KEY, message_id text, session_id text,"
        " time_created integer, data text);"
    )
    step = {"type": "step-start", "snapshot": "ab12"}
    done = {"type": "step-finish", "reason": "tool-calls", "tokens": {"input": 900}}
    rows = {
        "ses_main": [
            ("user", [{"type": "text", "text": "Make slugify() keep digits."}]),
            (
                "assistant",
                [
                    step,
                    {"type": "reasoning", "text": "Look at the function first."},
                    {"type": "text", "text": "Reading it."},
                    {
                        "type": "tool",
                        "tool": "read",
                        "callID": "call_1",
                        "state": {
                            "status": "completed",
                            "input": {"filePath": "/w/slug.py"},
                            "output": "def slugify(s):\n    return re.sub('[^a-z]', '', s)",
                        },
                    },
                    done,
                    {"type": "patch", "hash": "ab12", "files": []},
                ],
            ),
            (
                "assistant",
                [
                    step,
                    {
                        "type": "tool",
                        "tool": "edit",
                        "callID": "call_2",
                        "state": {
                            "status": "error",
                            "input": {"filePath": "/w/slug.py", "oldString": "a-z"},
                            "error": "oldString not found in file",
                        },
                    },
                    done,
                    step,
                    {"type": "text", "text": "Done: digits are kept."},
                    {"type": "step-finish", "reason": "stop"},
                ],
            ),
        ],
        "ses_sub": [("user", [{"type": "text", "text": "List the tests."}])],  # never answered
    }
    for s_i, (sid, messages) in enumerate(rows.items()):
        parent = "ses_main" if sid == "ses_sub" else None
        db.execute("INSERT INTO session VALUES (?, ?, ?)", (sid, parent, 1000 + s_i))
        for m_i, (role, parts) in enumerate(messages):
            mid = f"msg_{sid}_{m_i}"
            data = (
                {"role": role, "modelID": "orcarouter/coding"}
                if role == "assistant"
                else {"role": role}
            )
            created = 1_796_000_000_000 + 2_000 * m_i
            db.execute(
                "INSERT INTO message VALUES (?, ?, ?, ?)", (mid, sid, created, orjson.dumps(data))
            )
            for p_i, part in enumerate(parts):
                db.execute(
                    "INSERT INTO part VALUES (?, ?, ?, ?, ?)",
                    (f"prt_{mid}_{p_i:02d}", mid, sid, created, orjson.dumps(part)),
                )
    db.commit()
    db.close()
    return folder / "opencode.db"


def test_opencode_database_one_turn_per_step(tmp_path: Path) -> None:
    db = _opencode_db(tmp_path / "share" / "opencode")
    assert detect(db) == "opencode"
    docs = list(import_sessions([tmp_path]))  # the folder: found by walking to the file
    assert len(docs) == 1  # the sub-agent session has no model reply: no session
    doc = docs[0]
    assert doc["session_id"] == "ses_main" and doc["source"]["model"] == "orcarouter/coding"
    first, _, third = doc["turns"]  # three steps: the second message holds two
    assert first["response"]["content"] == "Reading it."  # reasoning is not sent back
    call = first["response"]["tool_calls"][0]["function"]
    assert call == {"name": "read", "arguments": '{"filePath":"/w/slug.py"}'}
    failed = third["request"]["messages"][-1]
    assert failed == {
        "role": "tool",
        "tool_call_id": "call_2",
        "content": "oldString not found in file",
    }
    assert third["response"] == {"content": "Done: digits are kept.", "finish_reason": "stop"}
    # a message's later steps log no time of their own
    assert [t.get("idle_seconds_before") for t in doc["turns"]] == [0.0, 2.0, None]
    assert_cumulative(doc)


def test_opencode_file_that_is_not_its_database(tmp_path: Path) -> None:
    fake = tmp_path / "opencode.db"
    fake.write_text("not sqlite")
    assert detect(fake) is None
    wrong = tmp_path / "other" / "opencode.db"
    wrong.parent.mkdir()
    sqlite3.connect(wrong).execute("CREATE TABLE x (y text)").connection.commit()
    stats = ImportStats()
    assert list(import_sessions([wrong], stats=stats)) == []
    assert len(stats.failed) == 1 and "not an opencode database" in stats.failed[0]
