# ruff: noqa: E501  (hand-written transcript text: long lines read as they appear in a terminal)
"""Render scenario steps as chat-completions turns in one of two agent protocols.

Text protocol (mini-swe-agent, SWE-agent, plain shells): one bash block per
assistant reply, the command output returned as the next *user* message with the
wrapper of that harness (`<returncode>`, `OBSERVATION:`, exit-code banners).
Tool-call protocol (OpenHands, Claude Code, a generic function-calling agent):
OpenAI `tool_calls` on the assistant message and a `tool` message with the result.
"""

from __future__ import annotations

import json
import random
from typing import Any

from eval.heldout2.world import Step, World, numbered

TEXT_STYLES = ("mini", "sweagent", "plain")
TOOL_STYLES = ("openhands", "claude_code", "generic")


# ---- system prompts -----------------------------------------------------------------


def system_prompt(style: str, w: World, rng: random.Random) -> str:
    if style == "mini":
        return (
            "You are a helpful assistant that can interact multiple times with a computer shell "
            "to solve programming tasks.\nYour response must contain exactly ONE bash code block "
            "with ONE command (or commands connected with && or ||).\n\nInclude a THOUGHT section "
            "before your command where you explain your reasoning process.\nFormat your response "
            "as shown in <format_example>.\n\n<format_example>\nTHOUGHT: Your reasoning and "
            "analysis here\n\n```bash\nyour_command_here\n```\n</format_example>\n\nFailure to "
            "follow these rules will cause your response to be rejected."
        )
    if style == "sweagent":
        return (
            "SETTING: You are an autonomous programmer, and you're working directly in the command "
            "line with a special interface.\n\nThe special interface consists of a file editor that "
            "shows you 100 lines of a file at a time.\nIn addition to typical bash commands, you can "
            "also use the following commands: open <path> [<line>], goto <n>, scroll_down, "
            "scroll_up, create <filename>, search_dir <term> [<dir>], search_file <term> [<file>], "
            "find_file <name> [<dir>], edit <start>:<end> followed by the replacement text and "
            "end_of_edit, submit.\n\nRESPONSE FORMAT:\nYour shell prompt is formatted as follows:\n"
            "(Open file: <path>) <cwd> $\n\nYou need to format your output using two fields; "
            "discussion and command.\nEverything you include in the DISCUSSION section will be saved "
            "for future reference. Include exactly ONE command in a code block."
        )
    if style == "plain":
        lang = rng.choice(["concise", "careful", "pragmatic"])
        return (
            f"You are a {lang} senior engineer working in a Linux container on the repository at "
            f"{w.root}. Each reply must contain one ```bash block; it is executed and the output is "
            "sent back to you. Do not ask the user questions. When you are finished, run "
            "`echo TASK_DONE` on its own."
        )
    if style == "openhands":
        return (
            "You are OpenHands agent, a helpful AI assistant that can interact with a computer to "
            "solve tasks.\n<ROLE>\nYour primary role is to assist users by executing commands, "
            "modifying code, and solving technical problems effectively. You should be thorough, "
            "methodical, and prioritize quality over speed.\n</ROLE>\n<EFFICIENCY>\n* Each action "
            "you take is somewhat expensive. Wherever possible, combine multiple actions into a "
            "single action.\n</EFFICIENCY>\n<FILE_SYSTEM_GUIDELINES>\n* When a user provides a file "
            "path, do NOT assume it's relative to the current working directory.\n* If asked to edit "
            "a file, edit the file directly, rather than creating a new file with a different "
            "filename.\n</FILE_SYSTEM_GUIDELINES>"
        )
    if style == "claude_code":
        return (
            "You are Claude Code, Anthropic's official CLI for Claude.\nYou are an interactive CLI "
            "tool that helps users with software engineering tasks. Use the instructions below and "
            "the tools available to you to assist the user.\n\n# Tone and style\nYou should be "
            "concise, direct, and to the point.\n\n# Doing tasks\n- Use the available search tools "
            "to understand the codebase and the user's query.\n- Implement the solution using all "
            "tools available to you\n- Verify the solution if possible with tests.\n\n"
            f"<env>\nWorking directory: {w.root}\nIs directory a git repo: Yes\nPlatform: linux\n"
            "</env>"
        )
    return (
        f"You are a coding agent operating on the {w.repo} repository ({w.root}). Use the provided "
        "functions to inspect and change files and to run commands. Keep changes minimal and run "
        "the relevant tests before calling submit."
    )


def first_user(style: str, task: str, w: World) -> str:
    if style == "mini":
        return (
            f"<pr_description>\nConsider the following PR description:\n{task}\n</pr_description>"
            "\n\n<instructions>\n# Task Instructions\n\nYou're a software engineer interacting "
            "continuously with a computer by submitting commands.\nYour task is to make changes to "
            f"non-test files in the current directory ({w.root}) in order to fix the issue "
            "described in the PR description.\n\nWhen you've completed your work, issue exactly "
            "this command:\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && "
            "git diff --cached\n```\n</instructions>"
        )
    if style == "sweagent":
        return (
            "We're currently solving the following issue within our repository. Here's the issue "
            f"text:\nISSUE:\n{task}\n\nINSTRUCTIONS:\nNow, you're going to solve this issue on your "
            "own. When you're satisfied with all of the changes you've made, you can submit your "
            "changes to the code base by simply running the submit command.\n\n"
            f"(Open file: n/a)\n(Current directory: {w.root})\nbash-$"
        )
    if style == "openhands":
        return (
            f"<uploaded_files>\n{w.root}\n</uploaded_files>\nI've uploaded a python code repository "
            f"in the directory {w.root}. Consider the following issue description:\n\n"
            f"<issue_description>\n{task}\n</issue_description>\n\nCan you help me implement the "
            "necessary changes to the repository so that the requirements specified in the "
            "<issue_description> are met?"
        )
    return task


# ---- tool schemas ---------------------------------------------------------------------


def _fn(name: str, desc: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


def _s(desc: str) -> dict[str, str]:
    return {"type": "string", "description": desc}


def tool_schemas(style: str) -> list[dict[str, Any]]:
    if style == "openhands":
        return [
            _fn(
                "execute_bash",
                "Execute a bash command in the terminal.",
                {"command": _s("The bash command to execute."), "is_input": _s("true|false")},
                ["command"],
            ),
            _fn(
                "str_replace_editor",
                "Custom editing tool for viewing, creating and editing files.",
                {
                    "command": {
                        "type": "string",
                        "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                    },
                    "path": _s("Absolute path to file or directory."),
                    "old_str": _s("old"),
                    "new_str": _s("new"),
                    "file_text": _s("content"),
                    "view_range": {"type": "array", "items": {"type": "integer"}},
                },
                ["command", "path"],
            ),
            _fn("think", "Log a thought.", {"thought": _s("The thought to log.")}, ["thought"]),
            _fn("finish", "Finish the interaction.", {"message": _s("Final message")}, ["message"]),
        ]
    if style == "claude_code":
        return [
            _fn(
                "Bash",
                "Executes a given bash command in a persistent shell session.",
                {
                    "command": _s("The command to execute"),
                    "description": _s("Clear, concise description of what this command does"),
                },
                ["command"],
            ),
            _fn(
                "Read",
                "Reads a file from the local filesystem.",
                {
                    "file_path": _s("absolute path"),
                    "offset": {"type": "number"},
                    "limit": {"type": "number"},
                },
                ["file_path"],
            ),
            _fn(
                "Edit",
                "Performs exact string replacements in files.",
                {
                    "file_path": _s("absolute path"),
                    "old_string": _s("text to replace"),
                    "new_string": _s("replacement"),
                },
                ["file_path", "old_string", "new_string"],
            ),
            _fn(
                "Write",
                "Writes a file to the local filesystem.",
                {"file_path": _s("absolute path"), "content": _s("content")},
                ["file_path", "content"],
            ),
            _fn(
                "Grep",
                "A powerful search tool built on ripgrep.",
                {"pattern": _s("regex"), "path": _s("dir"), "output_mode": _s("content")},
                ["pattern"],
            ),
            _fn(
                "TodoWrite",
                "Create and manage a structured task list.",
                {"todos": {"type": "array", "items": {"type": "object"}}},
                ["todos"],
            ),
        ]
    return [
        _fn(
            "run_shell",
            "Run a shell command and return stdout/stderr and the exit code.",
            {"cmd": _s("command line"), "timeout": {"type": "integer"}},
            ["cmd"],
        ),
        _fn(
            "read_file",
            "Read a file, optionally a line range.",
            {"path": _s("path"), "start": {"type": "integer"}, "end": {"type": "integer"}},
            ["path"],
        ),
        _fn(
            "apply_edit",
            "Replace one exact occurrence of `search` with `replace`.",
            {"path": _s("path"), "search": _s("exact text"), "replace": _s("new text")},
            ["path", "search", "replace"],
        ),
        _fn(
            "write_file",
            "Create or overwrite a file.",
            {"path": _s("path"), "content": _s("content")},
            ["path", "content"],
        ),
        _fn(
            "search_code",
            "Search the repository for a regex.",
            {"query": _s("regex"), "glob": _s("file glob")},
            ["query"],
        ),
        _fn(
            "submit",
            "Submit the work with a short summary.",
            {"summary": _s("summary")},
            ["summary"],
        ),
    ]


# ---- text protocol ------------------------------------------------------------------------


def _py_replace(path: str, old: str, new: str) -> str:
    return (
        "python - <<'PY'\nfrom pathlib import Path\n"
        f"p = Path({path!r})\ns = p.read_text()\n"
        f"assert {old!r} in s\ns = s.replace({old!r}, {new!r}, 1)\np.write_text(s)\nPY"
    )


def text_command(style: str, st: Step, w: World, rng: random.Random) -> str:
    a = st.args
    if st.kind == "bash":
        return a["cmd"]
    if st.kind == "view":
        start = int(a.get("start", "1"))
        end = start + len(st.output.splitlines()) - 1
        if style == "sweagent":
            return f"open {a['path']} {start}"
        return rng.choice(
            [
                f"nl -ba {a['path']} | sed -n '{start},{end}p'",
                f"sed -n '{start},{end}p' {a['path']}",
            ]
        )
    if st.kind == "edit":
        if style == "sweagent":
            line = int(a.get("line", "1"))
            n = max(1, len(a["old"].splitlines()))
            return f"edit {line}:{line + n - 1}\n{a['new']}\nend_of_edit"
        if (
            "\n" not in a["old"]
            and "\n" not in a["new"]
            and "/" not in a["old"] + a["new"]
            and (rng.random() < 0.5)
        ):
            o = a["old"].replace("'", "'\\''")
            nw = a["new"].replace("'", "'\\''")
            return f"sed -i 's/{o}/{nw}/' {a['path']}"
        return _py_replace(a["path"], a["old"], a["new"])
    if st.kind == "create":
        if style == "sweagent":
            return f"create {a['path']}"
        return f"cat <<'EOF' > {a['path']}\n{a['content']}\nEOF"
    if st.kind == "search":
        if style == "sweagent":
            return f'search_dir "{a["pattern"]}" {a.get("path", ".")}'
        return f'grep -rn "{a["pattern"]}" {a.get("path", ".")}'
    if style == "mini":
        return "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    if style == "sweagent":
        return "submit"
    return "echo TASK_DONE"


def text_reply(style: str, st: Step, cmd: str) -> str:
    if style == "mini":
        return f"THOUGHT: {st.thought}\n\n```bash\n{cmd}\n```"
    if style == "sweagent":
        return f"DISCUSSION\n{st.thought}\n\n```\n{cmd}\n```"
    return f"{st.thought}\n\n```bash\n{cmd}\n```"


def text_observation(style: str, st: Step, w: World, rng: random.Random) -> str:
    out = st.output
    if st.kind == "edit" and st.rc != 0 and style != "sweagent":
        out = (
            'Traceback (most recent call last):\n  File "<stdin>", line 4, in <module>\nAssertionError'
            if "python -" in text_command(style, st, w, random.Random(0))
            else ""
        )
        if not out:
            out = "sed: -e expression #1, char 12: unterminated `s' command"
    if st.kind == "view" and st.rc == 0:
        start = int(st.args.get("start", "1"))
        out = numbered(out.splitlines(), start)
        if style == "sweagent":
            out = f"[File: {st.args['path']} ({rng.randint(start + 40, start + 400)} lines total)]\n{out}"
    if style == "mini":
        return f"<returncode>{st.rc}</returncode>\n<output>\n{out}\n</output>"
    if style == "sweagent":
        if not out.strip():
            out = "Your command ran successfully and did not produce any output."
        opened = st.args.get("path", "n/a") if st.kind in ("view", "edit") else "n/a"
        return f"OBSERVATION:\n{out}\n(Open file: {opened})\n(Current directory: {w.root})\nbash-$"
    return f"Command exited with code {st.rc}.\nOutput:\n```\n{out}\n```"


# ---- tool-call protocol ---------------------------------------------------------------


def tool_call(style: str, st: Step, w: World) -> tuple[str, dict[str, Any]]:
    a = st.args
    path = a.get("path", "")
    if path and not path.startswith("/"):
        path = f"{w.root}/{path}"
    if style == "openhands":
        if st.kind == "bash":
            return "execute_bash", {"command": a["cmd"]}
        if st.kind == "view":
            start = int(a.get("start", "1"))
            end = start + len(st.output.splitlines()) - 1
            return "str_replace_editor", {
                "command": "view",
                "path": path,
                "view_range": [start, end],
            }
        if st.kind == "edit":
            return "str_replace_editor", {
                "command": "str_replace",
                "path": path,
                "old_str": a["old"],
                "new_str": a["new"],
            }
        if st.kind == "create":
            return "str_replace_editor", {
                "command": "create",
                "path": path,
                "file_text": a["content"],
            }
        if st.kind == "search":
            return "execute_bash", {"command": f"grep -rn '{a['pattern']}' {a.get('path', '.')}"}
        return "finish", {"message": a.get("summary", "Done.")}
    if style == "claude_code":
        if st.kind == "bash":
            return "Bash", {"command": a["cmd"], "description": a.get("desc", st.thought[:60])}
        if st.kind == "view":
            start = int(a.get("start", "1"))
            return "Read", {
                "file_path": path,
                "offset": start,
                "limit": len(st.output.splitlines()),
            }
        if st.kind == "edit":
            return "Edit", {"file_path": path, "old_string": a["old"], "new_string": a["new"]}
        if st.kind == "create":
            return "Write", {"file_path": path, "content": a["content"]}
        if st.kind == "search":
            return "Grep", {
                "pattern": a["pattern"],
                "path": a.get("path", "."),
                "output_mode": "content",
            }
        return "", {}
    if st.kind == "bash":
        return "run_shell", {"cmd": a["cmd"], "timeout": 600}
    if st.kind == "view":
        start = int(a.get("start", "1"))
        return "read_file", {
            "path": path,
            "start": start,
            "end": start + len(st.output.splitlines()) - 1,
        }
    if st.kind == "edit":
        return "apply_edit", {"path": path, "search": a["old"], "replace": a["new"]}
    if st.kind == "create":
        return "write_file", {"path": path, "content": a["content"]}
    if st.kind == "search":
        return "search_code", {"query": a["pattern"], "glob": a.get("path", "**/*.py")}
    return "submit", {"summary": a.get("summary", "Done.")}


def tool_result(style: str, st: Step, w: World) -> str:
    out = st.output
    if st.kind == "view" and st.rc == 0:
        start = int(st.args.get("start", "1"))
        lines = out.splitlines()
        if style == "claude_code":
            return "\n".join(f"{i:6d}→{x}" for i, x in enumerate(lines, start))
        return f"Here's the result of running `cat -n` on {st.args['path']}:\n" + numbered(
            lines, start
        )
    if st.kind == "edit" and st.rc == 0:
        if style == "claude_code":
            return (
                f"The file {st.args['path']} has been updated. Here's the result of running "
                f"`cat -n` on a snippet of the edited file:\n{numbered(out.splitlines(), int(st.args.get('line', '1')))}"
            )
        if style == "openhands":
            return (
                f"The file {st.args['path']} has been edited. Here's the result of running "
                f"`cat -n` on a snippet of {st.args['path']}:\n"
                f"{numbered(out.splitlines(), int(st.args.get('line', '1')))}\nReview the "
                "changes and make sure they are as expected. Edit the file again if necessary."
            )
        return "ok: 1 replacement"
    if st.kind == "create" and st.rc == 0:
        return f"File created successfully at: {st.args['path']}"
    if style == "openhands" and st.kind in ("bash", "search"):
        return f"{out}\n[The command completed with exit code {st.rc}.]"
    if style == "claude_code" and st.rc != 0:
        return f"Error: Exit code {st.rc}\n{out}"
    if style == "generic" and st.kind in ("bash", "search"):
        return json.dumps({"exit_code": st.rc, "output": out})
    return out or "(no output)"
