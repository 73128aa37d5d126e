"""Trivial-edit traffic: the requests, replies and tool output of easy turns.

Templates are filled from the session's `Project`, wrapped in varied openers
and closers, and occasionally chained ("Thanks. Now ..."), so a 25-turn
session of renames and nil checks does not repeat a sentence.
"""

from __future__ import annotations

import random

from tiergate.replay.texts_common import Project

EASY_TEMPLATES = (
    "rename `{var}` to `{var2}` in {file}",
    "in {file}, change the default timeout from {n} seconds to {m} seconds",
    'fix the typo "{typo}" in the comment above {func}',
    "add a nil check for `{var}` at the top of {func}",
    "bump the version in {manifest} to {ver}",
    "sort the imports in {file}",
    "remove the unused import in {file}",
    "add a debug log line when {func} starts",
    'change the log level of the "{noun} flushed" message from info to debug',
    "update the copyright year in the header of {file} to 2026",
    "add a `{var2}` field to {Type} next to `{var}`",
    "make {func} return early when the input list is empty",
    "replace the magic number {n} in {file} with a named constant {CONST}",
    "add a one-line doc comment to {func}",
    "rename the test {test} to {test2}",
    "include the {noun} id in the error message returned by {func}",
    "delete the commented-out block at the bottom of {file}",
    "add a `--{flag}` flag to the CLI with a default of {n}",
    "move the {CONST} constant to the top of {file}",
    "add a return type annotation to {func}",
    "mention the new `--{flag}` flag in the README usage section",
    "make {CONST} configurable through the {ENV} environment variable",
    "lowercase the {noun} keys before storing them in {func}",
    "add `{path}` to .gitignore",
    "fix the lint warning about the unused variable `{var}` in {file}",
    "wrap the error returned by {func} with some context",
    "increase the retry count in {file} from {n} to {m}",
    "run {formatter} on {file}",
    "add a TODO above {func} about cleaning up the {noun} handling",
    "swap the order of the two arguments in the call to {func} in {file}",
    "set the default page size to {m}",
    "change the HTTP status for a missing {noun} from 500 to 404",
    "add a `{header}` header to the outgoing requests in {func}",
    "rename the {noun} package alias to {noun2} in {file}",
    "make the `{var}` parameter of {func} optional with a default of {n}",
    "add a short unit test that {func} handles an empty {noun}",
    "use the existing {func2} helper instead of the inline loop in {func}",
    "change `{var}` from a list to a set in {func}",
    "trim whitespace from the {noun} name before saving it",
    "update the example config in the docs to use port {port}",
    "add {noun2} to the list of allowed values in {file}",
    "make the {noun} error message start with a capital letter",
    "print the {noun} count at the end of the {func} run",
    "drop the deprecated `{var}` alias from {file}",
    "reorder the fields of {Type} alphabetically",
)

OPENERS = (
    "", "", "", "Please ", "Can you ", "Quick one: ", "Next, ", "Now ", "Small thing: ",
    "Also ", "One more: ", "Could you ", "Ok, ", "Great. Next: ", "Thanks! Now ",
)  # fmt: skip
CLOSERS = (
    "", "", "", " Thanks.", " Keep the rest as is.", " No other changes.", " Don't touch the "
    "tests.",
    " Run the tests after.", " Just that file.", " Should be a one-liner.", " :)",
)  # fmt: skip
FOLLOWUPS = (
    "Looks good.", "Perfect, thanks.", "Nice.", "Ok that works.", "LGTM.", "Great.",
    "Thanks, tests pass on my side too.", "Cool.",
)  # fmt: skip
TYPOS = ("recieve", "seperate", "occured", "lenght", "adress", "definately", "wich", "teh")
HEADERS = ("X-Request-Id", "User-Agent", "X-Tenant", "Accept-Encoding", "X-Trace-Parent")
FLAGS = ("dry-run", "verbose", "max-retries", "batch-size", "timeout", "since", "limit", "json")


def easy_request(rng: random.Random, p: Project, *, chain: bool = True) -> str:
    """One trivial edit request in natural phrasing."""
    fill = {
        "var": p.var(),
        "var2": p.var(),
        "file": p.file(),
        "func": p.func(),
        "func2": p.func(),
        "n": rng.choice((3, 5, 10, 30, 50, 100, 250)),
        "m": rng.choice((2, 8, 15, 20, 60, 200, 500)),
        "typo": rng.choice(TYPOS),
        "manifest": p.facts["manifest"],
        "ver": f"{rng.randint(0, 4)}.{rng.randint(0, 19)}.{rng.randint(0, 9)}",
        "noun": p.noun(),
        "noun2": p.noun(),
        "Type": p.type_name(),
        "CONST": p.const(),
        "test": p.test_name(),
        "test2": p.test_name(),
        "flag": rng.choice(FLAGS),
        "ENV": p.const(),
        "path": rng.choice(("dist/", "*.log", ".env.local", "coverage/", "tmp/", "*.pprof")),
        "formatter": p.facts["formatter"],
        "header": rng.choice(HEADERS),
        "port": rng.choice((8080, 8443, 9000, 3000, 5001)),
    }
    body = rng.choice(EASY_TEMPLATES).format(**fill)
    opener = rng.choice(OPENERS)
    text = opener + (body if opener else body[0].upper() + body[1:])
    text += "?" if opener.strip() in ("Can you", "Could you") else "."
    text += rng.choice(CLOSERS)
    if chain and rng.random() < 0.25:
        text = rng.choice(FOLLOWUPS) + " " + text
    return text


def latent_opener(rng: random.Random, p: Project) -> str:
    """A first turn that reads as routine; the session turns hard later."""
    return rng.choice(
        (
            f"The {p.noun()} export job is a bit slow lately, can you take a look at {p.file()}?",
            f"Add a retry to the {p.noun()} client in {p.file()}.",
            f"Can you clean up {p.func()} a little? It's gotten messy.",
            f"Users report the {p.noun()} page sometimes shows old data. Check {p.file()} first.",
            f"Let's add a metric for how long {p.func()} takes.",
            f"The nightly {p.noun()} reconcile sometimes takes twice as long. Have a look.",
            f"Please bump the {p.noun()} worker pool size from 4 to 8.",
            f"Some {p.noun()} requests time out in staging. Start by reading {p.file()}.",
            f"Move the {p.noun()} cleanup into its own function.",
            f"Can you add a test for {p.func()}? It has none.",
        )
    )


# ---- assistant replies to easy turns ------------------------------------------

_DONE = (
    "Done: {what}.",
    "I've made the change: {what}.",
    "Updated {file}: {what}.",
    "{what_cap}. Nothing else touched.",
    "Changed it. {what_cap}.",
    "All set, {what}.",
)
_WHAT = (
    "renamed the variable and its {k} uses",
    "added the check before the first dereference",
    "replaced the literal with the constant",
    "updated the value and the matching test fixture",
    "added the line and kept the formatting",
    "applied the one-line fix",
    "edited the function signature and the {k} call sites",
    "moved the block without changing behaviour",
)


def easy_reply(rng: random.Random, p: Project) -> str:
    what = rng.choice(_WHAT).format(k=rng.randint(1, 6))
    return rng.choice(_DONE).format(what=what, what_cap=what[0].upper() + what[1:], file=p.file())


def short_code_line(rng: random.Random, p: Project) -> tuple[str, str]:
    """An (old, new) pair for an edit call's arguments."""
    v, v2, n = p.var(), p.var(), rng.randint(1, 500)
    pairs = {
        "go": (f"{v} := {n}", f"{v2} := {n + 1}"),
        "python": (f"{v} = {n}", f"{v2} = {n + 1}"),
        "java": (f"int {v} = {n};", f"int {v2} = {n + 1};"),
        "rust": (f"let {v} = {n};", f"let {v2} = {n + 1};"),
        "typescript": (f"const {v} = {n};", f"const {v2} = {n + 1};"),
    }
    return pairs[p.lang]


# ---- tool output of easy turns ------------------------------------------------


def edit_ok(rng: random.Random, path: str) -> str:
    return rng.choice(
        (
            f"The file {path} has been edited. 1 occurrence replaced.",
            f"Applied edit to {path} (+1 -1).",
            "OK",
            f"Success. Updated the following files:\nM {path}",
            f"{path}: 1 replacement",
        )
    )


def tests_pass(rng: random.Random, p: Project) -> str:
    n = rng.randint(8, 240)
    secs = f"{rng.uniform(0.2, 9.0):.2f}"
    if p.lang == "python":
        dots = "." * min(n, 60)
        return f"{dots} [100%]\n{n} passed in {secs}s"
    if p.lang == "go":
        pkgs = [f"{p.module()}/{d}" for d in p.facts["dirs"][:3]]
        return "\n".join(f"ok  \t{pk}\t{rng.uniform(0.01, 2.0):.3f}s" for pk in pkgs)
    if p.lang == "rust":
        return (
            f"running {n} tests\n" + "test result: ok. "
            f"{n} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in {secs}s"
        )
    if p.lang == "java":
        return (
            f"[INFO] Tests run: {n}, Failures: 0, Errors: 0, Skipped: 0\n"
            f"[INFO] BUILD SUCCESS\n[INFO] Total time:  {secs} s"
        )
    suites = rng.randint(1, 12)
    return f"Test Suites: {suites} passed\nTests:       {n} passed, {n} total\nTime: {secs} s"


def grep_output(rng: random.Random, p: Project) -> str:
    var = p.var()
    lines = []
    for _ in range(rng.randint(1, 6)):
        lines.append(f"{p.file()}:{rng.randint(3, 400)}:    {var} = {p.func()}({p.var()})")
    return "\n".join(lines)


def git_status(rng: random.Random, p: Project) -> str:
    files = sorted({p.file() for _ in range(rng.randint(1, 3))})
    return "On branch main\nChanges not staged for commit:\n" + "\n".join(
        f"\tmodified:   {f}" for f in files
    )
