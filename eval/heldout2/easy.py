# ruff: noqa: E501  (hand-written transcript text: long lines read as they appear in a terminal)
"""Easy and medium sessions: routine changes, including their routine mishaps.

Easy kinds: typo fix, rename, add a CLI flag, small config change, one-line bug
with an obvious traceback. Realism the earlier corpora lacked: some easy sessions
run a failing reproduction *on purpose* before the edit, and some make a routine
syntax slip in an edit that the next turn fixes. Medium kinds add a small feature
with a test, chase a deprecation across a few files, or fix a two-module bug with
one wrong first guess.
"""

from __future__ import annotations

import random

from eval.heldout2.world import (
    Step,
    World,
    git_diff,
    grep_hits,
    pick,
    pytest_fail,
    pytest_pass,
    traceback,
)

_TYPOS = [
    ("recieved", "received"),
    ("seperator", "separator"),
    ("occured", "occurred"),
    ("lenght", "length"),
    ("accomodate", "accommodate"),
    ("dependancy", "dependency"),
    ("succesfully", "successfully"),
    ("enviroment", "environment"),
]
_FLAGS = [
    ("--dry-run", "dry_run", "print what would be done without doing it"),
    ("--no-color", "no_color", "disable ANSI colours in output"),
    ("--verbose", "verbose", "log more detail"),
    ("--limit", "limit", "stop after N items"),
    ("--output-format", "output_format", "json or table"),
]
_RENAMES = [
    ("get_cfg", "load_config"),
    ("proc_item", "process_item"),
    ("mk_client", "make_client"),
    ("do_retry", "retry_call"),
    ("fmtTime", "format_time"),
    ("calc", "compute_total"),
]
_CONFIG = [
    ("timeout", "30", "60"),
    ("max_retries", "3", "5"),
    ("log_level", "'INFO'", "'WARNING'"),
    ("page_size", "50", "100"),
    ("cache_ttl", "300", "900"),
]
_BUGS = [
    ("KeyError: 'user_id'", "row['user_id']", "row.get('user_id')", "def owner_of(row):"),
    (
        "IndexError: list index out of range",
        "items[len(items)]",
        "items[len(items) - 1]",
        "def last(items):",
    ),
    (
        "AttributeError: 'NoneType' object has no attribute 'strip'",
        "name.strip()",
        "(name or '').strip()",
        "def clean(name):",
    ),
    (
        'TypeError: can only concatenate str (not "int") to str',
        "'page ' + n",
        "f'page {n}'",
        "def label(n):",
    ),
    (
        "ZeroDivisionError: division by zero",
        "done / total",
        "done / total if total else 0.0",
        "def ratio(done, total):",
    ),
    ("NameError: name 'json' is not defined", "import os", "import json\nimport os", "import os"),
]
_TASK_WRAP = [
    "{t}",
    "Small one: {t}",
    "{t}\n\nShould be a quick fix.",
    "Hi! {t} Thanks.",
    "Issue #{n}: {t}",
    "{t}\n\nSteps to reproduce are in the description above.",
]


def _wrap(rng: random.Random, text: str) -> str:
    return rng.choice(_TASK_WRAP).format(t=text, n=rng.randint(12, 4800))


def _slip(rng: random.Random, w: World, path: str, new: str) -> tuple[str, list[Step]]:
    """A routine slip: the edit introduces a syntax/indentation error fixed next turn."""
    kind = rng.choice(["colon", "indent", "paren"])
    if kind == "colon" and "def " in new:
        bad = new.replace("):", ")", 1)
        err = "SyntaxError: expected ':'"
    elif kind == "paren":
        bad = new.replace(")", "", 1)
        err = "SyntaxError: '(' was never closed"
    else:
        bad = "  " + new
        err = "IndentationError: unexpected indent"
    if bad == new:
        bad, err = new + ")", "SyntaxError: unmatched ')'"
    tb = traceback(
        [(f"{w.root}/{path}", rng.randint(10, 120), "<module>", bad.splitlines()[0].strip())], err
    )
    run = Step(
        pick(rng, "Quick check that it imports.", "Run it again.", "Check the change."),
        "bash",
        {"cmd": f"python -c 'import {w.pkg}'"},
        tb,
        1,
    )
    fix = Step(
        pick(
            rng,
            "Typo in my edit; fix it.",
            "Oops, I broke the syntax. Correcting.",
            "My edit has a syntax error; fixing that line.",
        ),
        "edit",
        {"path": path, "old": bad, "new": new, "line": str(rng.randint(10, 120))},
        new,
    )
    return bad, [run, fix]


def _padding(rng: random.Random, w: World, m: str, path: str, new: str) -> list[Step]:
    """Routine extra turns of an easy session: looking around, linting, a changelog line."""
    pool = [
        Step(
            "Double-check there are no other occurrences.",
            "search",
            {"pattern": new.strip()[:20], "path": "src"},
            grep_hits([(path, rng.randint(5, 200), new.strip()[:60])]),
        ),
        Step(
            "Skim the README for conventions.",
            "bash",
            {"cmd": "head -30 README.md"},
            f"# {w.repo}\n\n{w.repo} is a small library for {pick(rng, 'syncing files', 'parsing logs', 'scheduling jobs', 'talking to HTTP APIs')}.\n\n## Install\n\n    pip install {w.repo}\n\n## Development\n\n    pip install -e '.[dev]'\n    pytest",
        ),
        Step(
            "Recent commits, for the message style.",
            "bash",
            {"cmd": "git log --oneline -5"},
            "\n".join(
                f"{rng.getrandbits(28):07x} {x}"
                for x in rng.sample(
                    [
                        "Fix typo",
                        "Bump deps",
                        f"Add tests for {m}",
                        "Release 1.4.2",
                        "Docs: clarify config",
                        "CI: test on 3.12",
                    ],
                    5,
                )
            ),
        ),
        Step(
            "Lint the file I touched.", "bash", {"cmd": f"ruff check {path}"}, "All checks passed!"
        ),
        Step(
            "Look at the existing tests for this module.",
            "view",
            {"path": f"tests/test_{m}.py", "start": "1"},
            f"import pytest\n\nfrom {w.pkg} import {m}\n\n\ndef test_{m}_smoke():\n    assert {m} is not None",
        ),
        Step(
            "Add a changelog entry.",
            "edit",
            {
                "path": "CHANGELOG.md",
                "old": "## Unreleased",
                "new": f"## Unreleased\n\n- {m}: small fix",
                "line": "1",
            },
            f"## Unreleased\n\n- {m}: small fix",
        ),
        Step(
            "Is the package installed in editable mode?",
            "bash",
            {"cmd": f"pip show {w.repo} | head -3"},
            f"Name: {w.repo}\nVersion: {rng.randint(0, 3)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}\nLocation: {w.root}/src",
        ),
        Step(
            "Run the wider test suite too.",
            "bash",
            {"cmd": "pytest -q -x"},
            pytest_pass(w, rng, "tests", w.test_count),
        ),
        Step(
            "Type-check the module.",
            "bash",
            {"cmd": f"mypy {path}"},
            "Success: no issues found in 1 source file",
        ),
        Step("Check git status.", "bash", {"cmd": "git status --short"}, f" M {path}"),
    ]
    rng.shuffle(pool)
    return pool


def build_easy(rng: random.Random, w: World) -> tuple[str, list[Step], str]:
    kind = rng.choice(["typo", "rename", "flag", "config", "bug", "bug"])
    m = rng.choice(w.modules)
    path = f"src/{w.pkg}/{m}.py"
    steps: list[Step] = []
    test = f"tests/test_{m}.py"
    if kind == "typo":
        bad, good = rng.choice(_TYPOS)
        task = _wrap(rng, f'The error message in {w.pkg}.{m} says "{bad}" instead of "{good}".')
        old = f'        raise ValueError(f"{bad.capitalize()} unexpected value: {{value!r}}")'
        steps.append(
            Step(
                "Find the misspelling.",
                "search",
                {"pattern": bad, "path": "src"},
                grep_hits([(path, rng.randint(20, 300), old.strip())]),
            )
        )
        new = old.replace(bad.capitalize(), good.capitalize())
    elif kind == "rename":
        a, b = rng.choice(_RENAMES)
        task = _wrap(rng, f"Rename `{a}` to `{b}` in {w.pkg} (keep `{a}` as a deprecated alias).")
        hits = [
            (f"src/{w.pkg}/{x}.py", rng.randint(3, 200), f"    return {a}(x)")
            for x in rng.sample(w.modules, 3)
        ]
        steps.append(
            Step(
                f"Find every use of {a}.",
                "search",
                {"pattern": a, "path": "src tests"},
                grep_hits(hits),
            )
        )
        old, new = f"def {a}(x):", f"def {b}(x):"
        steps.append(
            Step(
                "Update the call sites.",
                "bash",
                {"cmd": f"sed -i 's/\\b{a}(/{b}(/g' " + " ".join(h[0] for h in hits)},
                "",
            )
        )
    elif kind == "flag":
        flag, dest, helptext = rng.choice(_FLAGS)
        path = f"src/{w.pkg}/cli.py"
        task = _wrap(rng, f"Add a `{flag}` option to the CLI ({helptext}).")
        old = '    parser.add_argument("--config", help="path to config file")'
        new = (
            old
            + f'\n    parser.add_argument("{flag}", dest="{dest}", action="store_true", help="{helptext}")'
        )
        steps.append(
            Step(
                "Look at the argument parser.",
                "view",
                {"path": path, "start": "12"},
                f'def build_parser():\n    parser = argparse.ArgumentParser(prog="{w.pkg}")\n{old}\n    return parser',
            )
        )
        if rng.random() < 0.5:  # confirm on purpose that the flag is not there yet
            steps.append(
                Step(
                    f"Confirm the current behaviour: {flag} should be rejected.",
                    "bash",
                    {"cmd": f"python -m {w.pkg} {flag}"},
                    f"usage: {w.pkg} [-h] [--config CONFIG]\n{w.pkg}: error: unrecognized arguments: {flag}",
                    2,
                )
            )
    elif kind == "config":
        key, a, b = rng.choice(_CONFIG)
        path = f"src/{w.pkg}/config.py"
        task = _wrap(rng, f"Change the default `{key}` from {a} to {b}; update the docs too.")
        old, new = f"    {key}: int = {a}" if a.isdigit() else f"    {key}: str = {a}", ""
        new = old.replace(a, b)
        if rng.random() < 0.5:  # a test for the new default, expected to fail before the edit
            steps.append(
                Step(
                    "Add a test for the new default first; it should fail until I change it.",
                    "bash",
                    {
                        "cmd": f"python -c 'from {w.pkg}.config import Settings; assert Settings().{key} == {b}, Settings().{key}'"
                    },
                    traceback(
                        [("<string>", 1, "<module>", "")], f"AssertionError: {a.strip(chr(39))}"
                    ),
                    1,
                )
            )
        steps.append(
            Step(
                "Where is the default defined?",
                "search",
                {"pattern": key, "path": "src docs"},
                grep_hits(
                    [
                        (path, rng.randint(10, 60), old.strip()),
                        ("docs/index.md", rng.randint(5, 90), f"| `{key}` | {a} | ... |"),
                    ]
                ),
            )
        )
    else:
        err, old_expr, new_expr, head = rng.choice(_BUGS)
        task = _wrap(
            rng,
            f"`{w.pkg}.{m}` crashes with `{err}` when the input is empty/missing. Traceback below.\n\n"
            + traceback(
                [
                    (
                        f"{w.root}/{path}",
                        rng.randint(10, 200),
                        head.removeprefix("def ").split("(")[0],
                        f"return {old_expr}",
                    )
                ],
                err,
            ),
        )
        old, new = (
            f"    return {old_expr}" if "import" not in old_expr else old_expr,
            f"    return {new_expr}" if "import" not in new_expr else new_expr,
        )
        steps.append(
            Step(
                "Look at the function from the traceback.",
                "view",
                {"path": path, "start": str(rng.randint(5, 150))},
                f"{head}\n{old}" if "import" not in old else old,
            )
        )
        if rng.random() < 0.7:  # failing reproduction on purpose
            steps.append(
                Step(
                    "Reproduce it first; this should fail with the reported error.",
                    "create",
                    {"path": "repro.py", "content": f"from {w.pkg}.{m} import *\nprint('ok')"},
                )
            )
            steps.append(
                Step(
                    "Run the reproduction; I expect the traceback.",
                    "bash",
                    {"cmd": "python repro.py"},
                    traceback(
                        [
                            (f"{w.root}/repro.py", 1, "<module>", "from ..."),
                            (f"{w.root}/{path}", rng.randint(10, 200), "f", old.strip()),
                        ],
                        err,
                    ),
                    1,
                )
            )
    if rng.random() < 0.3:
        steps.insert(
            0,
            Step(
                pick(rng, "Quick look around.", "Orient first.", "Let me see the repo."),
                "bash",
                {"cmd": pick(rng, "ls", "git status", "ls src/" + w.pkg)},
                "\n".join(["README.md", "pyproject.toml", "src", "tests"]),
            ),
        )
    steps.append(
        Step(
            pick(rng, "Make the change.", "Apply the fix.", "Edit it.", "Now the one-line change."),
            "edit",
            {"path": path, "old": old, "new": new, "line": str(rng.randint(5, 200))},
            new,
        )
    )
    if rng.random() < 0.3:
        _, slip = _slip(rng, w, path, new)
        steps[-1].args["new"] = slip[1].args["old"]
        steps[-1].output = slip[1].args["old"]
        steps += slip
    if kind == "bug" and any(s.args.get("path") == "repro.py" for s in steps):
        steps.append(
            Step(
                "Run the reproduction again; it should pass now.",
                "bash",
                {"cmd": "python repro.py"},
                "ok",
            )
        )
    if kind == "flag":
        steps.append(
            Step(
                "Check the help text.",
                "bash",
                {"cmd": f"python -m {w.pkg} --help | head -12"},
                f"usage: {w.pkg} [-h] [--config CONFIG] [{flag}]\n\noptions:\n  -h, --help  show this help message and exit\n  --config CONFIG  path to config file\n  {flag}  {helptext}",
            )
        )
    steps.append(
        Step(
            pick(rng, "Run the module's tests.", "Tests.", "Make sure nothing else broke."),
            "bash",
            {"cmd": f"python -m pytest -q {test}"},
            pytest_pass(w, rng, test),
        )
    )
    target = rng.choice([4, 5, 5, 6, 6, 7, 7, 8, 9, 10, 12, 14, 17, 20])
    pad = _padding(rng, w, m, path, new)
    while len(steps) + 2 < target and pad:
        steps.insert(rng.randint(1, len(steps) - 1), pad.pop())
    if rng.random() < 0.5:
        steps.append(
            Step(
                "Show the diff.",
                "bash",
                {"cmd": "git diff"},
                git_diff(path, old, new, rng.randint(5, 200)),
            )
        )
    steps.append(
        Step(
            pick(rng, "Done.", "That's all that was needed.", "Change complete."),
            "finish",
            {"summary": f"{kind}: updated {path}."},
        )
    )
    return task, steps, f"easy:{kind}"


_MEDIUM = [
    (
        "since",
        "Add a `since` parameter to `{pkg}.{m}.list_events` that filters events newer than a datetime.",
        "def list_events(store, limit=100):",
        "def list_events(store, limit=100, since=None):",
        "AssertionError: assert 5 == 2",
        "TypeError: '>' not supported between instances of 'str' and 'datetime.datetime'",
    ),
    (
        "backoff",
        "The HTTP client in {pkg}.{m} should retry 429/503 with exponential backoff (max 3 attempts), honouring Retry-After.",
        "    resp = self._session.request(method, url, **kw)",
        "    resp = self._request_with_retry(method, url, **kw)",
        "AssertionError: assert 1 == 3  (calls made)",
        "AttributeError: 'Client' object has no attribute '_request_with_retry'",
    ),
    (
        "utcnow",
        "Python 3.12 deprecates `datetime.utcnow()`; we use it in several places. Replace with aware datetimes; tests run with -W error.",
        "    now = datetime.utcnow()",
        "    now = datetime.now(timezone.utc)",
        "DeprecationWarning: datetime.datetime.utcnow() is deprecated",
        "TypeError: can't compare offset-naive and offset-aware datetimes",
    ),
    (
        "csv",
        "CSV export in {pkg}.{m} breaks when a field contains a newline or the delimiter.",
        "        out.write(','.join(str(v) for v in row) + '\\n')",
        "        writer.writerow(row)",
        "AssertionError: assert 3 == 2  (rows read back)",
        "NameError: name 'writer' is not defined",
    ),
    (
        "none_fields",
        "Serializer drops fields whose value is None, but the API contract says they must be present as null.",
        "    return {k: v for k, v in data.items() if v}",
        "    return {k: v for k, v in data.items() if k in fields}",
        "AssertionError: assert 'deleted_at' in {...}",
        "AssertionError: assert {'count': 0} == {}",
    ),
]


def build_medium(rng: random.Random, w: World) -> tuple[str, list[Step], str]:
    name, task, old, new, err1, err2 = rng.choice(_MEDIUM)
    m = rng.choice(w.modules)
    task = _wrap(rng, task.format(pkg=w.pkg, m=m))
    path, test = f"src/{w.pkg}/{m}.py", f"tests/test_{m}.py"
    steps = [
        Step(
            "Find the code involved.",
            "search",
            {"pattern": old.strip()[:24], "path": "src"},
            grep_hits(
                [(path, rng.randint(10, 300), old.strip())]
                + [
                    (f"src/{w.pkg}/{x}.py", rng.randint(5, 99), old.strip())
                    for x in rng.sample(w.modules, rng.randint(0, 2))
                ]
            ),
        ),
        Step(
            "Read the surrounding function.",
            "view",
            {"path": path, "start": str(rng.randint(10, 200))},
            "\n".join(["", old, "    # ...", "    return result"]),
        ),
        Step(
            "Write a test first that captures the expected behaviour.",
            "edit",
            {
                "path": test,
                "old": "import pytest",
                "new": f"import pytest\n\n\ndef test_{name}():\n    ...",
                "line": "1",
            },
            f"import pytest\n\n\ndef test_{name}():\n    ...",
        ),
        Step(
            "Run it; it should fail now.",
            "bash",
            {"cmd": f"pytest -q {test} -k {name}"},
            pytest_fail(
                w, rng, test, f"{test}::test_{name}", f"    def test_{name}():\n>       ...\n", err1
            ),
            1,
        ),
        Step(
            "Implement the change.",
            "edit",
            {"path": path, "old": old, "new": new, "line": str(rng.randint(10, 200))},
            new,
        ),
        Step(
            "Run the test again.",
            "bash",
            {"cmd": f"pytest -q {test} -k {name}"},
            pytest_fail(
                w, rng, test, f"{test}::test_{name}", f"    def test_{name}():\n>       ...\n", err2
            ),
            1,
        ),
        Step(
            pick(
                rng,
                "Missed a piece: the helper it relies on. Adding it.",
                "Right, one more place needs the same change.",
                "The second error is a consequence of my change; handle it.",
            ),
            "edit",
            {
                "path": path,
                "old": new,
                "new": new + "\n    # handled",
                "line": str(rng.randint(10, 200)),
            },
            new,
        ),
        Step("Test again.", "bash", {"cmd": f"pytest -q {test}"}, pytest_pass(w, rng, test)),
    ]
    for _ in range(rng.randint(0, 8)):
        steps.insert(
            rng.randint(2, len(steps) - 1),
            Step(
                pick(
                    rng,
                    "Check the other call sites.",
                    "How do the docs describe this?",
                    "Look at a related test.",
                    "Check the changelog conventions.",
                ),
                rng.choice(["view", "search", "bash"]),
                {
                    "path": f"src/{w.pkg}/{rng.choice(w.modules)}.py",
                    "start": str(rng.randint(1, 200)),
                    "pattern": name,
                    "cmd": f"grep -rn {name} docs tests | head",
                },
                "\n".join([f"def helper_{name}(x):", "    return x", ""]),
            ),
        )
    steps += [
        Step(
            "Whole suite, quickly.",
            "bash",
            {"cmd": "pytest -q -x"},
            pytest_pass(w, rng, "tests", w.test_count),
        ),
        Step("Done.", "finish", {"summary": f"Implemented {name} with a test."}),
    ]
    return task, steps, f"medium:{name}"
