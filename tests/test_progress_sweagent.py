"""SWE-agent's (and CodeR's) editor commands in the progress fold, each rule as a
small hand-written session: `create`, `open`, `edit N:M ... end_of_edit` on the
open file, the `[File: ...]` header and `(Open file: ...)` footer that name it,
and the text form of `str_replace_editor`.

The rules: the open file is tracked per session from the harness's footer (else
its header, else the last `open`/`create` that did not fail), so an edit names
its file; a relative path is resolved against the footer's directory; a file the
agent `create`s is one of its scratch files (progress' existing rule for a
whole-file write to a path not read before), so editing it is not a fix attempt;
an edit's identity keeps its text as written (indentation is content).
"""

from __future__ import annotations

from tiergate.core.model import Message, TextPart
from tiergate.routing.actions import editor_action, in_editor, text_action
from tiergate.routing.progress import Progress, progress_of

REPO = "/repo"
ISSUE = (
    "We're currently solving the following issue within our repository.\n"
    "ISSUE:\nparse() rejects dates with a trailing Z.\n\n"
    "(Open file: n/a)\n(Current directory: /repo)\nbash-$"
)
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "reproduce.py", line 3, in <module>\n'
    "    parse('2020-01-01Z')\n"
    '  File "/repo/pkg/dates.py", line 41, in parse\n'
    "    raise ValueError(value)\n"
    "ValueError: 2020-01-01Z\n"
)
LINT = (
    "Your proposed edit has introduced new syntax error(s). Please understand the "
    "fixes and retry your edit commmand.\n\nERRORS:\n"
    "- E999 IndentationError: unexpected indent\n"
)


def window(path: str, lines: int, body: str = "1:") -> str:
    return f"[File: {path} ({lines} lines total)]\n{body}\n"


class Session:
    """A SWE-agent text session: a DISCUSSION and one fenced command per reply, the
    command's output back as a user message ending with the harness's footer."""

    def __init__(self, opening: str = ISSUE) -> None:
        self.messages: list[Message] = [Message("user", [TextPart(opening)])]
        self.open = "n/a"

    def run(self, command: str, output: str, open_file: str | None = None) -> Session:
        if open_file is not None:
            self.open = open_file
        reply = f"DISCUSSION\nNext step.\n\n```\n{command}\n```"
        self.messages.append(Message("assistant", [TextPart(reply)]))
        footer = f"\n(Open file: {self.open})\n(Current directory: {REPO})\nbash-$"
        self.messages.append(Message("user", [TextPart(output + footer)]))
        return self

    def progress(self) -> Progress:
        return progress_of(self.messages)

    def reasons(self) -> list[str]:
        return [s.reason for s in self.progress().stuck]


def edit(lines: str, body: str) -> str:
    return f"edit {lines}\n{body}\nend_of_edit"


def reproduction_loop(s: Session, rounds: int) -> Session:
    """The agent rewrites its own reproduction script, which keeps failing the same way."""
    for n in range(rounds):
        s.run(edit("1:3", f"from pkg.dates import parse\n# try {n}\nparse('2020-01-01Z')"), "ok")
        s.run("python reproduce.py", TRACEBACK)
    return s


# ---- create: a scratch file -----------------------------------------------------------


def test_a_created_reproduction_script_and_its_edits_are_not_fix_attempts() -> None:
    s = Session().run("create reproduce.py", window("/repo/reproduce.py", 1), "/repo/reproduce.py")
    reproduction_loop(s, 3)
    p = s.progress()
    assert p.scratch == {"/repo/reproduce.py"}  # named as the footer names it
    assert p.fix_edits == 0 and p.edits == 4
    assert p.files_edited == {"/repo/reproduce.py"}
    assert s.reasons() == []


def test_the_same_failure_surviving_edits_of_the_project_still_strikes() -> None:
    s = Session().run("create reproduce.py", window("/repo/reproduce.py", 1), "/repo/reproduce.py")
    s.run("python reproduce.py", TRACEBACK)
    s.run("open pkg/dates.py 41", window("/repo/pkg/dates.py", 90), "/repo/pkg/dates.py")
    for n in range(2):
        s.run(edit("41:41", f"        value = value.rstrip('Z')  # {n}"), "ok")
        s.run("python reproduce.py", TRACEBACK)
    p = s.progress()
    assert p.fix_edits == 2 and "/repo/pkg/dates.py" in p.files_edited
    assert "failure_survives_edits" in s.reasons()


def test_create_of_a_file_that_exists_is_no_edit_and_makes_no_scratch_file() -> None:
    s = Session().run("open pkg/dates.py", window("/repo/pkg/dates.py", 90), "/repo/pkg/dates.py")
    s.run("create pkg/dates.py", "Error: File 'pkg/dates.py' already exists.\n")
    s.run(edit("41:41", "        value = value.rstrip('Z')"), "ok")
    p = s.progress()
    assert p.scratch == set() and p.edits == 1 and p.fix_edits == 1


def test_a_file_that_could_not_be_opened_was_not_read() -> None:
    """`open` of a missing file leaves another file open: creating it next is new."""
    s = Session().run("open pkg/dates.py", window("/repo/pkg/dates.py", 90), "/repo/pkg/dates.py")
    s.run("open doc/index.rst", "File doc/index.rst not found")  # footer: dates.py still open
    s.run("create doc/index.rst", window("/repo/doc/index.rst", 1), "/repo/doc/index.rst")
    s.run(edit("1:1", ".. autoclass:: pkg.dates.Parser"), "ok")
    p = s.progress()
    assert p.scratch == {"/repo/doc/index.rst"} and p.fix_edits == 0


# ---- edit N:M: the open file ----------------------------------------------------------


def test_an_edit_changes_the_file_open_before_it() -> None:
    s = Session().run("create reproduce.py", window("/repo/reproduce.py", 1), "/repo/reproduce.py")
    s.run("open pkg/dates.py", window("/repo/pkg/dates.py", 90), "/repo/pkg/dates.py")
    s.run(edit("41:41", "        value = value.rstrip('Z')"), "ok")
    p = s.progress()
    assert p.open_file == "/repo/pkg/dates.py" and p.cwd == REPO
    assert p.files_edited == {"/repo/reproduce.py", "/repo/pkg/dates.py"}
    assert p.fix_edits == 1


def test_without_a_footer_the_header_names_the_edited_file() -> None:
    """SWE-agent 1.x text mode: "OBSERVATION:" and a window, no footer."""
    msgs = [
        Message("user", [TextPart("Fix parse() for dates with a trailing Z.")]),
        Message("assistant", [TextPart("```\n" + edit("41:41", "    v = v[:-1]") + "\n```")]),
        Message("user", [TextPart("OBSERVATION:\n" + window("/repo/pkg/dates.py", 90))]),
    ]
    p = progress_of(msgs)
    assert p.files_edited == {"/repo/pkg/dates.py"} and p.open_file == "/repo/pkg/dates.py"


def test_an_edit_with_no_file_open_is_refused_not_an_edit() -> None:
    s = Session().run(edit("1:1", "x = 1"), "No file open. Use the `open` command first.")
    p = s.progress()
    assert p.edits == 0 and p.failed_observations == 1


def test_an_edit_resent_with_its_indentation_changed_is_not_a_repeat() -> None:
    s = Session().run("open pkg/dates.py", window("/repo/pkg/dates.py", 90), "/repo/pkg/dates.py")
    s.run(edit("41:41", "value = value.rstrip('Z')"), LINT)
    s.run(edit("41:41", "        value = value.rstrip('Z')"), LINT)
    assert s.reasons() == []
    s.run(edit("41:41", "        value = value.rstrip('Z')"), LINT)  # the same edit again
    assert s.reasons() == ["repeated_failing_command"]


def test_an_edit_of_the_open_file_is_resolved_from_the_editor_state() -> None:
    action = editor_action(edit("3:4", "    return x"), "bash")
    assert action is not None and action.edit and action.on_open_file and action.paths == ()
    known = in_editor(action, "/repo/pkg/a.py", REPO, "")
    assert known.paths == ("/repo/pkg/a.py",) and known.edit_keys[0][0] == "/repo/pkg/a.py:3:4"
    assert in_editor(action, "", "", "") is action  # nothing known: unchanged


def test_relative_paths_resolve_against_the_directory_else_the_shown_file() -> None:
    create = editor_action("create reproduce.py", "bash")
    assert create is not None and create.writes == ("reproduce.py",)
    assert in_editor(create, "", REPO, "").writes == ("/repo/reproduce.py",)
    assert in_editor(create, "", "", "/repo/reproduce.py").writes == ("/repo/reproduce.py",)
    opened = editor_action("open ./pkg/../pkg/a.py 40", "bash")
    assert opened is not None and not opened.edit
    assert in_editor(opened, "", REPO, "/repo/pkg/a.py").reads == ("/repo/pkg/a.py",)


# ---- SWE-agent 1.x forms --------------------------------------------------------------


def test_search_replace_edits_of_the_open_file_are_keyed_so_an_undo_is_seen() -> None:
    s = Session().run("open pkg/dates.py", window("/repo/pkg/dates.py", 90), "/repo/pkg/dates.py")
    for search, replace in [("v = 1", "v = 2"), ("v = 2", "v = 1"), ("v = 1", "v = 2")]:
        s.run(f"edit '{search}' '{replace}'", "Text replaced.\n" + window("/repo/pkg/dates.py", 90))
    p = s.progress()
    assert p.files_edited == {"/repo/pkg/dates.py"}
    assert "edit_revert_cycle" in s.reasons()


def test_str_replace_editor_in_text_is_read_as_its_tool_call() -> None:
    create = text_action(
        "```\nstr_replace_editor create /repo/reproduce.py --file_text 'parse(\"x\")'\n```"
    )
    assert create is not None and create.edit and create.writes == ("/repo/reproduce.py",)
    replace = text_action(
        "```\nstr_replace_editor str_replace /repo/pkg/a.py --old_str 'a = 1' "
        "--new_str '    a = 2'\n```"
    )
    assert replace is not None and replace.paths == ("/repo/pkg/a.py",)
    assert replace.edit_keys == (("/repo/pkg/a.py", hash("a = 1"), hash("    a = 2")),)
    view = text_action("```\nstr_replace_editor view /repo/pkg/a.py\n```")
    assert view is not None and not view.edit and view.reads == ("/repo/pkg/a.py",)
    broken = text_action("```\nstr_replace_editor str_replace /repo/pkg/a.py --old_str 'a\n```")
    assert broken is not None and broken.edit and broken.paths == ("/repo/pkg/a.py",)


def test_a_str_replace_editor_scratch_script_is_not_a_fix_attempt() -> None:
    msgs = [Message("user", [TextPart("Fix parse() for dates with a trailing Z.")])]
    commands = [
        ("str_replace_editor create /repo/reproduce.py --file_text 'parse()'", "File created"),
        ("python reproduce.py", TRACEBACK),
        (
            "str_replace_editor str_replace /repo/reproduce.py --old_str 'parse()' "
            "--new_str 'print(parse())'",
            "The file /repo/reproduce.py has been edited.",
        ),
        ("python reproduce.py", TRACEBACK),
    ]
    for command, output in commands:
        msgs.append(Message("assistant", [TextPart(f"```\n{command}\n```")]))
        msgs.append(Message("user", [TextPart(f"OBSERVATION:\n{output}")]))
    p = progress_of(msgs)
    assert p.edits == 2 and p.fix_edits == 0 and p.scratch == {"/repo/reproduce.py"}


# ---- CodeR ---------------------------------------------------------------------------


def test_coder_role_commands_are_not_edits() -> None:
    """CodeR's manager and roles end with `plan`, `succeed`, `fail`: no file changes."""
    for command in ('plan\n{"entry": "Reproducer"}', "succeed", "fail"):
        action = text_action(f"DISCUSSION\nDone.\n\n```\n{command}\n```")
        assert action is not None and not action.edit
