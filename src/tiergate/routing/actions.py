"""What an agent did, whatever protocol it speaks: its tool calls and text commands.

A tool-call agent acts through tool calls (OpenAI tool calls, Anthropic
`tool_use`); a text agent writes its command in the reply (a ```bash block,
`<command>`, OpenHands' `<function=...>`, AutoCodeRover's tagged
`<file>/<original>/<patched>` replacements). Each becomes an `Action`: its
identity for repeat detection, whether it edited files, which files, whether
it reverted them. Observations (what came back) are routing.observations.
Pure; classifications are memoised by the text's hash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

import orjson

from tiergate.core.model import ToolCall

# ---- actions: tool calls ------------------------------------------------------------

PATH_ARGUMENT_KEYS: tuple[str, ...] = (
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "target_file",
    "notebook_path",
)
"""Argument names that carry the edited file's path in common agent tool schemas."""

_EDIT_NAME_TOKENS = frozenset(
    {"write", "edit", "patch", "apply", "replace", "insert", "multiedit", "applypatch"}
)
_FILE_VERB_TOKENS = frozenset({"create", "save", "append", "update", "modify", "overwrite"})
_FILE_ARG_KEYS = frozenset({"path", "file", "file_path", "filepath", "filename", "target_file"})
_EDIT_ARG_KEYS = frozenset(
    {"old_string", "new_string", "old_str", "new_str", "patch", "diff", "file_text", "edits"}
)
_READ_ONLY_COMMANDS = frozenset({"view", "read", "cat", "list", "ls", "search", "find"})
_SHELL_EDIT = re.compile(
    r"\bsed\s+(?:-\w+\s+)*-i"
    r"|\bperl\s+-\w*i"
    r"|\bapply_patch\b"
    r"|\bgit\s+apply\b"
    r"|\bpatch\s+(?:-\w+\s+)*-p\d"
    r"|(?:^|[^>&\d])>{1,2}\s*['\"]?[\w./-]+\.\w+"
    r"|\btee\s+(?:-a\s+)?['\"]?[\w./-]+\.\w+"
)
_TOKEN_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_PATCH_PATH_RE = re.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: |\+\+\+ b/)(\S+)", re.M)


def parse_args(arguments: str) -> Any:
    """A call's JSON arguments ({} when empty), or None when they are not JSON."""
    if not arguments.strip():
        return {}
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return None


def is_edit_call(call: ToolCall) -> bool:
    """Does this tool call look like it changed files (write/edit/patch/apply)?"""
    tokens = {t.lower() for t in _TOKEN_SPLIT.split(call.name) if t}
    args = parse_args(call.arguments)
    if isinstance(args, dict):
        command = args.get("command")
        if isinstance(command, str) and command.strip().lower() in _READ_ONLY_COMMANDS:
            return False
        if _EDIT_ARG_KEYS.intersection(args):
            return True
        if tokens & _FILE_VERB_TOKENS and _FILE_ARG_KEYS.intersection(args):
            return True
        shell = " ".join(v for v in args.values() if isinstance(v, str))
        if isinstance(command, list):
            shell += " " + " ".join(str(v) for v in command)
        if _SHELL_EDIT.search(shell):
            return True
        if not any(isinstance(v, str) for v in args.values()):
            return False  # a file edit names a file or carries text (TodoWrite's list does not)
    return bool(tokens & _EDIT_NAME_TOKENS)


def edited_paths(call: ToolCall) -> list[str]:
    """Paths a tool call edits, or [] when it is not a file-changing call."""
    return list(call_action(call.name, call.arguments).paths)


EditKey = tuple[str, int, int]
"""(path, hash of the text replaced, hash of the text written); 0 for "whole file"."""


@dataclass(frozen=True, slots=True)
class Action:
    """What the agent did in one step.

    signature: identity for "the same command again" (tool name plus canonical
        arguments, or the whitespace-normalised shell command).
    tool: the tool's name ("bash" for a shell block in text).
    edit: it changes files (when it succeeds; see `compound`).
    compound: a shell command with more than one step (`sed -i ... && pytest`): when
        it fails, its edit may still have happened before a later step failed.
    paths: files it edited, when known.
    edit_keys: its edits as EditKeys, to spot an edit undone or redone.
    revert: it discards changes (`git checkout -- f`, `git restore`, `git stash`, ...).
    reads: files a non-editing tool call names (a Read or a `view`), so that a
        whole-file write to a file read before is known to replace existing content.
    writes: files it writes whole (a `create`/Write tool's content, `cat > f <<EOF`),
        as opposed to changing part of them (a replacement, a patch).
    opens: the file it opens in the agent's editor (SWE-agent's `open f` and
        `create f`): the file later `edit N:M` commands change.
    on_open_file: it edits the file open in the agent's editor (SWE-agent's
        `edit N:M ... end_of_edit`, `insert`, `append`), which the command does
        not name: `in_editor` fills it in from the session's editor state.
    """

    signature: str
    tool: str
    edit: bool = False
    compound: bool = False
    paths: tuple[str, ...] = ()
    edit_keys: tuple[EditKey, ...] = ()
    revert: bool = False
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    opens: str = ""
    on_open_file: bool = False


_SHELL_NAMES = frozenset({"bash", "shell", "sh", "run", "command", "terminal", "exec", "execute"})
_REVERT = re.compile(
    r"\bgit\s+(?:checkout\s+(?:HEAD\s+)?--\s|restore\s|stash(?:\s+push)?\s*(?:$|[;&|])|reset\s+--hard)"
    r"|\bundo_edit\b",
    re.MULTILINE,
)
_STASH_RESTORE = re.compile(r"\bstash\s+(?:pop|apply)\b")  # stash, run, pop: a check
_SED_SUBST = re.compile(  # sed -i 's/old/new/g' file
    r"\bsed\s+(?:-\w+\s+)*-i\S*\s+(?:-e\s+)?(['\"])s(.)(.*?)\2(.*?)\2\w*\1\s+(\S+)"
)
_HEREDOC_WRITE = re.compile(  # cat > file <<'EOF' ... EOF
    r"\bcat\s*>\s*['\"]?([\w./-]+)['\"]?\s*<<-?\s*['\"]?(\w+)['\"]?\n(.*?)\n\2\b", re.S
)


_SWE_EDIT = re.compile(r"^\s*edit\s+(\d+:\d+)\s*\n(.*?)^end_of_edit\b", re.S | re.M)
_STEP_SEPARATOR = re.compile(r"&&|\|\||;|\n")


def shell_action(command: str, tool: str, signature: str | None = None) -> Action:
    """An Action for a shell command (from a text block or a shell tool's arguments)."""
    editor = editor_action(command, tool, signature)
    if editor is not None:
        return editor
    keys: list[EditKey] = []
    paths: list[str] = []
    writes: list[str] = []
    for m in _SED_SUBST.finditer(command):
        keys.append((m.group(5), hash(m.group(3)), hash(m.group(4))))
        paths.append(m.group(5))
    for m in _HEREDOC_WRITE.finditer(command):
        keys.append((m.group(1), 0, hash(m.group(3))))
        paths.append(m.group(1))
        writes.append(m.group(1))
    swe_edit = _SWE_EDIT.search(command)
    if swe_edit:
        keys.append((f"edit {swe_edit.group(1)}", 0, hash(swe_edit.group(2))))
    edit = bool(keys) or _SHELL_EDIT.search(command) is not None
    steps = _SWE_EDIT.sub("", _HEREDOC_WRITE.sub("", command)).strip()
    return Action(
        signature=signature if signature is not None else " ".join(command.split()),
        tool=tool,
        edit=edit,
        compound=_STEP_SEPARATOR.search(steps) is not None,
        paths=tuple(paths),
        edit_keys=tuple(keys),
        revert=_REVERT.search(command) is not None and _STASH_RESTORE.search(command) is None,
        writes=tuple(writes),
    )


# ---- actions: SWE-agent's editor commands -------------------------------------------

_EDITOR_COMMAND = re.compile(
    r"(open|create|edit|insert|append|str_replace_editor)(?:[^\S\n]+([^\n]*))?(?=\n|$)"
)
_LINE_RANGE = re.compile(r"(\d+):(\d+)\s*$")
_OPTION = re.compile(r"--(\w+)")


def editor_action(command: str, tool: str, signature: str | None = None) -> Action | None:
    """The Action of a SWE-agent (or CodeR) editor command, or None for another command.

    `open f` reads f and opens it; `create f` writes f whole (a new, empty file)
    and opens it; `edit N:M ... end_of_edit`, `edit 'search' 'replace'` (SWE-agent
    1.x), `insert` and `append` edit the *open* file (`on_open_file`: the command
    does not name it; `in_editor` fills it in). The text form of
    `str_replace_editor <command> <path> [--option value ...]` is read as the tool
    call it stands for (`call_action`). Only the command's first line decides.

    Its identity (`signature`) keeps the text it writes as written: only the
    command line's whitespace is normalised, since an edit sent again with its
    indentation changed is a different edit, not the same command repeated.
    """
    command = command.lstrip()
    m = _EDITOR_COMMAND.match(command)
    if m is None:
        return None
    verb, rest = m.group(1), (m.group(2) or "").strip()
    if verb == "str_replace_editor":
        return _str_replace_editor(command, tool, signature)
    sig = signature
    if sig is None:
        sig = " ".join(m.group(0).split()) + command[m.end() :].rstrip()
    if verb in ("open", "create"):
        words = _split(rest) or rest.split()
        if not words:
            return None
        path = words[0]
        if verb == "open":
            return Action(sig, tool, reads=(path,), opens=path)
        return Action(sig, tool, edit=True, paths=(path,), writes=(path,), opens=path)
    keys: tuple[EditKey, ...] = ()
    if verb == "edit":
        lines = _LINE_RANGE.match(rest)
        body = _SWE_EDIT.match(command)
        if lines is not None and body is not None:
            keys = ((f"{lines.group(1)}:{lines.group(2)}", 0, hash(body.group(2))),)
        elif lines is None and rest:  # edit 'search' 'replace' [replace_all]
            args = _split(command[m.start(2) :])
            if args is not None and len(args) >= 2:
                keys = (("", hash(args[0]), hash(args[1])),)
    return Action(sig, tool, edit=True, edit_keys=keys, on_open_file=True)


def _split(text: str) -> list[str] | None:
    """Shell words, or None when the quoting does not parse."""
    try:
        return shlex.split(text)
    except ValueError:
        return None


def _str_replace_editor(command: str, tool: str, signature: str | None) -> Action | None:
    words = _split(command)
    if words is None:  # unbalanced quotes in the text: its command and path still count
        words = command.split()[:3]
    if len(words) < 3:
        return None
    args: dict[str, str] = {"command": words[1], "path": words[2]}
    for i in range(3, len(words) - 1):
        option = _OPTION.fullmatch(words[i])
        if option is not None:
            args[option.group(1)] = words[i + 1]
    called = call_action("str_replace_editor", orjson.dumps(args).decode())
    return dataclasses.replace(called, signature=signature or called.signature, tool=tool)


def in_editor(action: Action, open_file: str, cwd: str, shown: str) -> Action:
    """`action` with its files made concrete from the agent's editor state.

    An edit of the open file (`on_open_file`) gets the file open before the
    command (`open_file`), else the one its output shows (`shown`: SWE-agent's
    "(Open file: f)" footer or "[File: f (N lines total)]" header). Relative
    paths are resolved against the shell's directory (`cwd`, from the "(Current
    directory: d)" footer), or, when that is unknown, matched to the shown file,
    so `create reproduce.py` and a later edit of `/repo/reproduce.py` are one
    file. "" means unknown; with nothing known the action is returned as it is.
    """
    if not (cwd or shown or action.on_open_file):
        return action
    target = (open_file or shown) if action.on_open_file else ""
    if action.on_open_file and not target:
        return action

    def where(path: str) -> str:
        return _absolute(path, cwd, shown)

    if action.opens and shown and not _same_file(where(action.opens), shown):
        # another file is still open: the harness did not open this one ("File f not
        # found"), so it neither read nor created it
        return Action(action.signature, action.tool)

    paths = (target,) if target else tuple(where(p) for p in action.paths)
    if target:
        keys = tuple((f"{target}:{w}" if w else target, o, n) for w, o, n in action.edit_keys)
    else:
        keys = tuple((where(w), o, n) for w, o, n in action.edit_keys)
    return dataclasses.replace(
        action,
        paths=paths,
        edit_keys=keys,
        reads=tuple(where(p) for p in action.reads),
        writes=tuple(where(p) for p in action.writes),
        opens=where(action.opens) if action.opens else "",
    )


def _same_file(path: str, shown: str) -> bool:
    return path == shown or shown.endswith("/" + posixpath.normpath(path))


def _absolute(path: str, cwd: str, shown: str) -> str:
    norm = posixpath.normpath(path)
    if norm.startswith("/"):
        return norm
    if cwd:
        return posixpath.normpath(posixpath.join(cwd, norm))
    if shown.endswith("/" + norm):
        return shown
    return path


@functools.lru_cache(maxsize=16_384)
def call_action(name: str, arguments: str) -> Action:
    """The Action of a tool call. Memoised by name and arguments: agents resend
    every earlier call each turn, and reading a call parses its arguments."""
    args = parse_args(arguments)
    if args is None:
        signature = name + " " + " ".join(arguments.split())
    else:
        signature = name + " " + orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    if not isinstance(args, dict):
        return Action(signature, name, edit=is_edit_call(ToolCall("", name, arguments)))
    command = args.get("command") or args.get("cmd")
    if isinstance(command, list):
        command = " ".join(str(v) for v in command)
    tokens = {t.lower() for t in _TOKEN_SPLIT.split(name) if t}
    if isinstance(command, str) and tokens & _SHELL_NAMES and " " in command.strip():
        return shell_action(command, name, signature)
    paths = [args[k] for k in PATH_ARGUMENT_KEYS if isinstance(args.get(k), str) and args[k]]
    if not is_edit_call(ToolCall("", name, arguments)):
        revert = _REVERT.search(str(command or "")) is not None
        return Action(signature, name, revert=revert, reads=tuple(paths))
    for v in args.values():  # apply_patch-style tools carry paths inside the patch text
        if isinstance(v, str) and ("*** " in v or "+++ " in v):
            paths.extend(_PATCH_PATH_RE.findall(v))
    path = paths[0] if paths else ""
    old = args.get("old_str", args.get("old_string"))
    new = args.get("new_str", args.get("new_string"))
    keys: list[EditKey] = []
    writes: tuple[str, ...] = ()
    if isinstance(old, str) and isinstance(new, str):
        keys.append((path, hash(old), hash(new)))
    elif isinstance(args.get("file_text") or args.get("content"), str):
        keys.append((path, 0, hash(args.get("file_text") or args.get("content"))))
        writes = (path,) if path else ()
    elif isinstance(args.get("patch"), str):
        keys.append((path, 0, hash(args["patch"])))
    revert = isinstance(command, str) and command == "undo_edit"
    return Action(signature, name, True, False, tuple(paths), tuple(keys), revert, writes=writes)


_CALL_NAME = re.compile(r"[A-Za-z_][\w.]*")


@functools.lru_cache(maxsize=16_384)
def named_call_action(call: str) -> Action:
    """The Action of a call a harness ran for the agent and echoes back
    (`search_class("Media")`): the call, whitespace-normalised, is its identity,
    so the same search again is a repeat. Exploration, never an edit."""
    name = _CALL_NAME.match(call)
    return Action(" ".join(call.split()), name.group(0) if name else "call")


# ---- actions: text ------------------------------------------------------------------

_FENCE = re.compile(r"```([\w.+-]*)([^\S\n]*\n)?")
_SHELL_FENCES = frozenset({"", "bash", "sh", "shell", "console", "zsh", "mswea_bash_command"})
_TAGGED = re.compile(r"<(command|execute_bash)>\s*(.*?)\s*</\1>", re.S)
_FUNCTION = re.compile(r"<function=([\w.-]+)>(.*?)</function>", re.S)
_PARAMETER = re.compile(r"<parameter=(\w+)>\n?(.*?)\n?</parameter>", re.S)


_TAGGED_EDIT = re.compile(  # <file>f</file> <original>old</original> <patched>new</patched>
    r"<file>\s*([^<\n]+?)\s*</file>\s*<original>(.*?)</original>\s*<patched>(.*?)</patched>", re.S
)


def tagged_edit_action(text: str) -> Action | None:
    """An edit written as tagged replacements (AutoCodeRover's `# modification n`
    blocks: `<file>`, `<original>`, `<patched>`), or None. Its edit keys are the
    replacements, so a patch sent again, or undone, is recognised."""
    if "<patched>" not in text:
        return None
    edits = _TAGGED_EDIT.findall(text)
    if not edits:
        return None
    keys = tuple((path, hash(old.strip()), hash(new.strip())) for path, old, new in edits)
    paths = tuple(dict.fromkeys(path for path, _, _ in edits))
    signature = "patch " + " ".join(f"{p}:{o:x}:{n:x}" for p, o, n in keys)
    return Action(signature, "patch", edit=True, paths=paths, edit_keys=keys)


_text_action_memo: dict[tuple[int, int], Action | None] = {}


def text_action(text: str) -> Action | None:
    """The command in an assistant reply written as text, or None.

    The last ```bash (or unlabelled) block, `<command>`/`<execute_bash>` tags, an
    OpenHands `<function=name><parameter=...>` call, or tagged replacements
    (`tagged_edit_action`). Only a *candidate*: it
    becomes an action when the next user message is its observation, so a chat
    answer that merely shows a command is not counted. Memoised by (hash, length).
    """
    if "```" not in text and "<" not in text:
        return None
    key = (hash(text), len(text))
    if key in _text_action_memo:
        return _text_action_memo[key]
    action = _text_action(text)
    remember(_text_action_memo, key, action)
    return action


def _text_action(text: str) -> Action | None:
    tagged_edit = tagged_edit_action(text)
    if tagged_edit is not None:
        return tagged_edit
    function = _FUNCTION.search(text) if "<function=" in text else None
    if function is not None:
        params = dict(_PARAMETER.findall(function.group(2)))
        return call_action(function.group(1), orjson.dumps(params).decode())
    tagged = _TAGGED.findall(text) if "<" in text else []
    if tagged:
        return shell_action(tagged[-1][1], "bash")
    block = last_shell_block(text) if "```" in text else None
    if block is not None:
        return shell_action(block, "bash")
    return None


def last_shell_block(text: str) -> str | None:
    """The body of the text's last ```bash (`sh`, `shell`, `console`, `zsh`,
    `mswea_bash_command` or unlabelled) fenced block, or None.

    Fences are paired in order, whatever their language: a fence opens a block
    and the next one closes it. Pairing only shell fences would take the closing
    fence of a ```python block shown before the command for an opening one, and
    read the prose between the two blocks as the command. An opening fence must
    end its line; a block left open is not a command.
    """
    body: str | None = None
    opening: re.Match[str] | None = None
    for fence in _FENCE.finditer(text):
        if opening is None:
            opening = fence
            continue
        if opening.group(2) is not None and opening.group(1) in _SHELL_FENCES:
            body = text[opening.end() : fence.start()]
        opening = None
    return body


MEMO_LIMIT = 20_000
"""Entries per classification memo (keys are hashes, so texts are not kept)."""


def remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    """Store in a bounded memo, dropping the oldest entry when it is full."""
    if len(memo) >= MEMO_LIMIT:
        # StopIteration/RuntimeError: emptied or resized by another thread meanwhile.
        with contextlib.suppress(StopIteration, RuntimeError):
            memo.pop(next(iter(memo)), None)
    memo[key] = value


def clear_memos() -> None:
    """Forget memoised action classifications."""
    _text_action_memo.clear()
    call_action.cache_clear()
    named_call_action.cache_clear()
