"""Session progress: one fold over the messages that says whether the agent is stuck.

Failing is normal work: an agent runs a reproduction that fails before it edits
anything, edits, then runs the tests, and a test that fails and then passes
after the next edit is progress. So a failure on its own is no evidence. What
this fold flags is evidence of *no* progress:

- failure_survives_edits: the same failure (test id, exception type and
  location, diagnostic) is seen again after `SURVIVAL_STRIKE` edits meant to
  fix it;
- repeated_failing_command: the same command fails again with the same failure
  and no edit in between;
- edit_revert_cycle: edits undone and redone (an inverse replacement, a file
  written back to an earlier content, `git checkout --`/`restore`/`stash`/
  `undo_edit` after edits), `CYCLE_STRIKE` times since the last progress;
- diverging_failures: `DIVERSITY_STRIKE` distinct failures after fix edits,
  with nothing passing in between (no test run passing, no failing command
  fixed): every fix attempt breaks something new. A check the agent runs again
  counts once per attempt; first runs (new scripts, `python -c` probes) count
  once per attempt between them, because probes run between two edits fail
  in many ways without any attempt failing.

"Edits meant to fix it" are edits to the project: an edit that only touches
the agent's own scratch files (a file it created in the conversation with a
whole-file write, such as a reproduction script, and later edits of it) is
writing a probe, not attempting a fix, so it neither ages a failure nor opens
a diversity window. SWE-agent's `edit N:M` names no file: it changes the file
open in the agent's editor, which the fold tracks from the harness's footer
(`open_file`, `cwd`; routing.actions.in_editor), so an edit of a `create`d
reproduction script is a scratch edit like any other.

A failure's identity for survival is a structured one (test id, exception
type and location, diagnostic, lint message): the digest of an output's last
lines (`out:`) also matches warning noise that every command of an environment
prints, whatever ran, and a warning diagnostic (`file.py:3: DeprecationWarning:
...`) is printed by runs that succeed.

An edit a harness refuses to apply (observation kind "apply") is a failed
attempt: it changed nothing, but the same refusal again after another attempt
survives it like a failure survives an edit. A harness's tests failing after a
patch it applied (kind "validation") is a failing test run after an edit. A
search that finds nothing (kind "search") is exploration: it counts as a failed
observation in the behaviour counts, never as evidence.

Progress (a failing command now succeeding, a test run passing) clears the
evidence it answers. `Progress` also keeps the agent-state counts (user turns,
tool calls, tools used, files edited) because they need the same
action/observation pairing. It reads each message once, in order, so the
transcript summary extends it incrementally; `progress_of` folds a whole
request. Pure and bounded: every map has a size limit.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tiergate.core.model import Message
from tiergate.routing.actions import (
    Action,
    EditKey,
    call_action,
    in_editor,
    named_call_action,
    shell_action,
    text_action,
)
from tiergate.routing.observations import Follows, Observation, observe

#: Edits a failure must survive (seen again after each) before it strikes.
SURVIVAL_STRIKE = 2
#: Occurrences of the same command with the same failure, no edit between.
MIN_COMMAND_REPEATS = 2
#: Undo/redo events (reverts, re-applied edits) before they strike.
CYCLE_STRIKE = 2
#: Distinct failures after edits, with nothing passing, before they strike.
DIVERSITY_STRIKE = 4
#: Entries kept per map (oldest first out): a session's state stays small (a few
#: KB; commands and failure sets are kept as hashes).
STATE_LIMIT = 64
_STUCK_KEPT = 8
#: Distinct action signatures counted (exploration breadth saturates here).
ACTIONS_COUNTED = 256
#: Weight of the latest observation in the recent failure rate (an EMA).
RECENT_WEIGHT = 0.25


@dataclass(frozen=True, slots=True)
class Stuck:
    """Evidence of no progress raised by the observation at `index`."""

    index: int
    reason: str
    detail: str = ""


_WARNING = re.compile(r"\w*Warning\b")


def is_identity(key: str) -> bool:
    """Does this failure key identify a failure (module docstring)? Test ids,
    exceptions, errors and lint messages do; an output digest and a warning
    diagnostic do not."""
    if key.startswith("out:"):
        return False
    if key.startswith("diag:"):
        parts = key.split(":", 2)
        return len(parts) < 3 or _WARNING.match(parts[2]) is None
    return True


def _bounded_set(d: dict[str, tuple[int, int]], key: str, value: tuple[int, int]) -> None:
    d.pop(key, None)
    if len(d) >= STATE_LIMIT:
        d.pop(next(iter(d)))
    d[key] = value


@dataclass(slots=True)
class Progress:
    """The fold's state after some prefix of a conversation's messages."""

    # agent state
    turns: int = 0
    tool_calls: int = 0
    tools_used: set[str] = field(default_factory=set)
    files_edited: set[str] = field(default_factory=set)
    last_kind: str | None = None  # role, with text observations counted as "tool"
    # pairing actions with observations
    pending_calls: dict[str, Action] = field(default_factory=dict)
    pending_text: Action | None = None
    replied: bool = False  # an assistant message has been read
    # the agent's editor, as its harness reports it (SWE-agent's footer; "" unknown)
    open_file: str = ""
    cwd: str = ""
    # stuck detection
    edits: int = 0
    fix_edits: int = 0  # edits that touch a project file, not only scratch files
    attempts: int = 0  # fix edits plus edits a harness refused (what a failure survives)
    touched: set[str] = field(default_factory=set)  # paths read or edited so far
    scratch: set[str] = field(default_factory=set)  # paths the agent created itself
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (attempts, survived)
    # hash of a command -> (its last failure, edits then, times in a row)
    failing: dict[int, tuple[frozenset[str], int, int]] = field(default_factory=dict)
    applied: set[EditKey] = field(default_factory=set)
    contents: dict[str, tuple[int, ...]] = field(default_factory=dict)
    cycles: int = 0
    diverse: set[int] = field(default_factory=set)  # hashes of failure sets
    diverse_at: int = 0  # fix_edits when a first run's failure last joined `diverse`
    checked: dict[int, int] = field(default_factory=dict)  # command hash -> fix_edits then
    edits_at_progress: int = 0
    stuck: tuple[Stuck, ...] = ()
    # behaviour counts the learned session scorer reads (routing.session_scorer)
    observations: int = 0
    failed_observations: int = 0
    failure_streak: int = 0  # consecutive failed observations, now
    longest_failure_streak: int = 0
    steps_since_progress: int = 0
    passes: int = 0  # observations reporting a passing test run
    progress_events: int = 0  # a failure fixed, a test run passing (`_progressed`)
    recent_failure: float = 0.0  # EMA of failed observations (RECENT_WEIGHT)
    first_edit_step: int | None = None  # observations read when the first edit landed
    last_edit_step: int = 0
    actions: set[int] = field(default_factory=set)  # hashes of distinct action signatures
    replies: int = 0  # assistant messages
    reply_chars: int = 0
    output_chars: int = 0  # characters of observations (tool results, command output)

    def copy(self) -> Progress:
        """An independent copy (the containers are the mutable parts). Built
        positionally from every field: the transcript summary copies one per
        request, and dataclasses.replace costs about four times as much."""
        other = Progress(*_every_field(self))
        other.tools_used = set(self.tools_used)
        other.files_edited = set(self.files_edited)
        other.pending_calls = dict(self.pending_calls)
        other.seen = dict(self.seen)
        other.failing = dict(self.failing)
        other.applied = set(self.applied)
        other.contents = dict(self.contents)
        other.touched = set(self.touched)
        other.scratch = set(self.scratch)
        other.diverse = set(self.diverse)
        other.checked = dict(self.checked)
        other.actions = set(self.actions)
        return other

    def stuck_since(self, index: int) -> list[Stuck]:
        """Evidence raised by messages at `index` or later."""
        return [s for s in self.stuck if s.index >= index]

    # ---- reading messages ----------------------------------------------------------

    def add(self, m: Message, index: int) -> None:
        """Read the message at `index` (messages must come in order)."""
        follows: Follows = (
            "action" if self.pending_text is not None else "reply" if self.replied else "opening"
        )
        if m.role == "assistant":
            self.replied = True
            self.replies += 1
            self.reply_chars += len(m.text())
            self.pending_calls = {}
            for call in m.tool_calls:
                called = call_action(call.name, call.arguments)
                self.pending_calls[call.id] = called
                self.tool_calls += 1
                self.tools_used.add(call.name)
                self.files_edited.update(called.paths if called.edit else ())
            self.pending_text = None if m.tool_calls else text_action(m.text())
            self.last_kind = "assistant"
        elif m.role == "tool":
            obs = observe(m, follows)
            self.pending_text = None
            self.last_kind = "tool"
            if obs is not None:
                self.output_chars += len(m.text())
                self.step(self.pending_calls.pop(m.tool_call_id or "", None), obs, index)
        elif m.role == "user":
            obs = observe(m, follows)
            action, self.pending_text = self.pending_text, None
            if obs is None:
                if self.last_kind != "user":
                    self.turns += 1
                self.last_kind = "user"
                return
            self.output_chars += len(m.text())
            self.last_kind = "tool"
            if obs.parts:  # several calls answered at once: one step each
                for part in obs.parts:
                    self._step_text(named_call_action(part.command or ""), part, index)
                return
            if action is None and obs.command:
                action = shell_action(obs.command, "bash")
            if action is not None:
                action = in_editor(action, self.open_file, self.cwd, obs.open_file or "")
            self._step_text(action, obs, index)
            self._follow_editor(action, obs)
        elif m.role != "system":  # an injected instruction neither splits a turn nor
            self.pending_text = None  # answers a pending command
            self.last_kind = m.role

    def _follow_editor(self, action: Action | None, obs: Observation) -> None:
        """Keep the editor state the next command's files are read against: what the
        harness reports, else the file an `open`/`create` that did not fail opened."""
        if obs.cwd:
            self.cwd = obs.cwd
        if obs.open_file is not None:
            self.open_file = obs.open_file
        elif action is not None and action.opens and not obs.failed:
            self.open_file = action.opens

    # ---- one action and its observation --------------------------------------------

    def _step_text(self, action: Action | None, obs: Observation, index: int) -> None:
        """Step a text observation, counting its action as a call."""
        if action is not None:
            self.tool_calls += 1
            self.tools_used.add(action.tool)
            self.files_edited.update(action.paths if action.edit else ())
        self.step(action, obs, index)

    def step(self, action: Action | None, obs: Observation, index: int) -> None:
        """Fold one action/observation pair; record any evidence of no progress."""
        self.observations += 1
        self.steps_since_progress += 1
        self.recent_failure += RECENT_WEIGHT * (float(obs.failed) - self.recent_failure)
        rerun = action is not None and hash(action.signature) in self.actions
        if action is not None and len(self.actions) < ACTIONS_COUNTED:
            self.actions.add(hash(action.signature))
        if obs.failed:
            self.failed_observations += 1
            self.failure_streak += 1
            self.longest_failure_streak = max(self.longest_failure_streak, self.failure_streak)
        else:
            self.failure_streak = 0
        # an edit lands unless its observation failed; a compound command's edit may
        # have landed before a later step failed; a validation failure follows a landed patch
        landed = not obs.failed or obs.kind == "validation"
        if action is not None and action.edit and (landed or action.compound):
            self.edits += 1
            if self.first_edit_step is None:
                self.first_edit_step = self.observations
            self.last_edit_step = self.observations
            if self._fixing(action):
                self.fix_edits += 1
                self.attempts += 1
            self._edit_cycles(action, index)
        elif action is not None and action.revert and self.edits and not obs.failed:
            self._cycle(1, index)
        elif action is not None and action.edit and obs.kind == "apply":
            self.attempts += 1
        if action is not None and action.reads:
            self._touch(action.reads)
        signature = hash(action.signature) if action is not None else 0
        if obs.failed:
            if obs.kind != "search":  # a miss while exploring is normal
                self._failure(signature, action, obs, index, rerun)
            return
        fixed = self.failing.pop(signature, None)
        if fixed is not None:
            for key in fixed[0]:
                self.seen.pop(key, None)
            self._progressed()
        if obs.tests_passed:
            self.passes += 1
            for key in [k for k in self.seen if k.startswith("test:")]:
                del self.seen[key]
            self._progressed()

    def _failure(
        self, signature: int, action: Action | None, obs: Observation, i: int, rerun: bool
    ) -> None:
        failures = obs.failures
        before = self.failing.get(signature)
        repeats = 1
        if before is not None and before[0] == failures and before[1] == self.edits:
            repeats = before[2] + 1
            if repeats >= MIN_COMMAND_REPEATS:
                name = action.tool if action is not None else "command"
                self._raise(Stuck(i, "repeated_failing_command", f"{name} x{repeats}"))
        elif before is not None and failures < before[0]:
            self._progressed()  # some of what failed now passes
        self.failing.pop(signature, None)
        if len(self.failing) >= STATE_LIMIT:
            self.failing.pop(next(iter(self.failing)))
        self.failing[signature] = (failures, self.edits, repeats)

        failures = frozenset(k for k in failures if is_identity(k))
        survived_now = 0
        for key in failures:
            seen = self.seen.get(key)
            if seen is None:
                _bounded_set(self.seen, key, (self.attempts, 0))
            elif self.attempts > seen[0]:
                survived = seen[1] + 1
                _bounded_set(self.seen, key, (self.attempts, survived))
                survived_now = max(survived_now, survived)
        if survived_now >= SURVIVAL_STRIKE:
            self._raise(Stuck(i, "failure_survives_edits", f"survived {survived_now} edits"))

        identity = hash(failures)
        if failures and self.fix_edits > self.edits_at_progress and identity not in self.diverse:
            self._diverge(signature, rerun, identity, i)

    def _diverge(self, signature: int, rerun: bool, identity: int, i: int) -> None:
        """A new failure after a fix attempt: it counts once per attempt and check (a
        command run before) and once per attempt for all first runs together, so a
        reproduction and the tests both failing anew after an edit count twice, five
        fresh probes after one edit once."""
        if rerun:
            if self.checked.get(signature, -1) >= self.fix_edits:
                return
            self.checked.pop(signature, None)
            if len(self.checked) >= STATE_LIMIT:
                self.checked.pop(next(iter(self.checked)))
            self.checked[signature] = self.fix_edits
        elif self.diverse_at >= self.fix_edits:
            return
        else:
            self.diverse_at = self.fix_edits
        if len(self.diverse) < STATE_LIMIT:
            self.diverse.add(identity)
        if len(self.diverse) >= DIVERSITY_STRIKE:
            self._raise(Stuck(i, "diverging_failures", f"{len(self.diverse)} failures"))

    def _fixing(self, action: Action) -> bool:
        """Is this edit meant to fix the project? Not when every file it touches is
        a scratch file: created by the agent with a whole-file write to a path it had
        not read or edited before (a file read first existed), or edited after that.
        An edit whose files are unknown counts as a fix."""
        if not action.paths:
            return True
        fixing = False
        for path in action.paths:
            if path in self.scratch:
                continue
            created = path in action.writes and path not in self.touched
            if created and len(self.scratch) < STATE_LIMIT:
                self.scratch.add(path)
                continue
            fixing = True
        self._touch(action.paths)
        return fixing

    def _touch(self, paths: Sequence[str]) -> None:
        for path in paths:
            if len(self.touched) < 4 * STATE_LIMIT:
                self.touched.add(path)

    def _edit_cycles(self, action: Action, index: int) -> None:
        events = 1 if action.revert else 0
        for key in action.edit_keys:
            path, old, new = key
            if old:
                if (path, new, old) in self.applied or key in self.applied:
                    events += 1  # undone, or redone after an undo
                if len(self.applied) < STATE_LIMIT:
                    self.applied.add(key)
            else:
                history = self.contents.get(path, ())
                if history and history[-1] == new:
                    continue  # the content it already has: a no-op, not a revert
                if new in history:
                    events += 1  # written back to an earlier version
                if path in self.contents or len(self.contents) < STATE_LIMIT:
                    self.contents[path] = (*history[-7:], new)
        if events:
            self._cycle(events, index)

    def _cycle(self, events: int, index: int) -> None:
        self.cycles += events
        if self.cycles >= CYCLE_STRIKE:
            self._raise(Stuck(index, "edit_revert_cycle", f"{self.cycles} undo/redo"))

    def _progressed(self) -> None:
        self.progress_events += 1
        self.steps_since_progress = 0
        self.diverse.clear()
        self.cycles = 0
        self.edits_at_progress = self.fix_edits

    def _raise(self, stuck: Stuck) -> None:
        self.stuck = (*self.stuck[-(_STUCK_KEPT - 1) :], stuck)


_every_field = operator.attrgetter(*(f.name for f in dataclasses.fields(Progress)))
"""Every field of a Progress, in __init__ order (Progress.copy)."""


def progress_of(messages: Sequence[Message]) -> Progress:
    """The fold over a whole message list (the transcript summary extends it instead)."""
    progress = Progress()
    for i, m in enumerate(messages):
        progress.add(m, i)
    return progress
