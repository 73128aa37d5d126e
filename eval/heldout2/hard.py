# ruff: noqa: E501  (hand-written transcript text: long lines read as they appear in a terminal)
"""Hard sessions: long struggles where failures survive edits, and steady but deep work.

Two shapes, both labelled hard:
- *struggle*: long exploration, a reproduction that fails, hypotheses whose edits
  leave the same failure standing, edit-revert cycles, instrumentation, and error
  messages that grow more varied before the real fix lands;
- *steady*: concurrency or distributed-protocol work (Raft, CRDTs, fencing, MVCC,
  2PC, lock-free buffers) that proceeds without a single error; the difficulty is
  in the content, stated by the task itself.
"""

from __future__ import annotations

import random
from typing import Any

from eval.heldout2.hard_content import KINDS
from eval.heldout2.steady import STEADY, steady
from eval.heldout2.world import Step, World, git_diff, grep_hits, ls_tree, pytest_pass
from eval.heldout2.world import fill as _fmt


def _explore(rng: random.Random, w: World, m: str, spec: dict[str, Any], n: int) -> list[Step]:
    path = _fmt(spec["file"], w, m)
    code = [_fmt(c, w, m) for c in spec["code"]]
    other = [x for x in w.modules if x != m]
    pool: list[Step] = [
        Step(
            rng.choice(
                [
                    "Let me get oriented in the repository first.",
                    "Start by looking at the layout of the project.",
                    "First, the repository structure.",
                ]
            ),
            "bash",
            {
                "cmd": rng.choice(
                    [
                        "find . -name '*.py' | grep -v .venv | sort | head -60",
                        "ls -R src tests | head -80",
                        "git ls-files | head -70",
                    ]
                )
            },
            ls_tree(w, rng),
        ),
        Step(
            f"Which call sites use {m}?",
            "search",
            {"pattern": f"from {w.pkg}.{m} import", "path": "src tests"},
            grep_hits(
                [
                    (
                        f"src/{w.pkg}/{o}.py",
                        rng.randint(3, 30),
                        f"from {w.pkg}.{m} import {rng.choice(['Pool', 'encode', 'Store', 'merge_batches', 'line_total', 'Connection', 'get_user'])}",
                    )
                    for o in rng.sample(other, 3)
                ]
                + [(f"tests/test_{m}.py", rng.randint(2, 12), f"from {w.pkg}.{m} import *")]
            ),
        ),
        Step(
            "Check the recent history of this file; the problem may be a regression.",
            "bash",
            {"cmd": f"git log --oneline -8 -- {path}"},
            "\n".join(
                f"{rng.getrandbits(28):07x} {msg}"
                for msg in rng.sample(
                    [
                        "Speed up hot path",
                        "Refactor internals for readability",
                        "Fix typo in docstring",
                        f"Bump version to {rng.randint(1, 4)}.{rng.randint(0, 12)}.0",
                        "Drop py3.8 support",
                        "Preserve ordering in output",
                        "Add idle reaper",
                        "Make close() idempotent",
                        "Use monotonic clock",
                        f"Merge pull request #{rng.randint(100, 999)} from fork/main",
                        "Handle empty input",
                        "Type hints",
                    ],
                    6,
                )
            ),
        ),
        Step(
            "Let me see the tests that cover this, to know what behaviour is pinned down.",
            "bash",
            {"cmd": f"grep -n 'def test_' tests/test_{m}.py | head -30"},
            "\n".join(
                f"{rng.randint(5, 400)}:def test_{t}("
                + rng.choice(["):", "store):", "tmp_path):", "monkeypatch):"])
                for t in rng.sample(
                    [
                        "basic",
                        "roundtrip",
                        "empty",
                        "large_input",
                        "timeout",
                        "close",
                        "concurrent",
                        "order",
                        "errors",
                        "defaults",
                        "reuse",
                        "idempotent",
                        "resume",
                        "unicode",
                        "limits",
                    ],
                    8,
                )
            ),
        ),
        Step(
            "I want to see how the configuration feeds into this module.",
            "view",
            {"path": f"src/{w.pkg}/{rng.choice(other)}.py", "start": str(rng.randint(1, 80))},
            "\n".join(
                [
                    f"from {w.pkg} import {m}",
                    "",
                    "",
                    f"def build_{m}(settings):",
                    f"    opts = settings.get('{m}', {{}})",
                    f"    return {m}.from_options(**opts)",
                    "",
                ]
            ),
        ),
        Step(
            "Check installed versions; behaviour may depend on them.",
            "bash",
            {
                "cmd": "pip list 2>/dev/null | grep -i -E 'pytest|sqlalchemy|pydantic|anyio|uvloop|numpy' "
            },
            "\n".join(
                rng.sample(
                    [
                        "anyio              4.4.0",
                        "numpy              1.26.4",
                        "pydantic           2.7.1",
                        "pytest             8.2.2",
                        "pytest-asyncio     0.23.7",
                        "SQLAlchemy         1.4.52",
                        "uvloop             0.19.0",
                        "pytest-randomly    3.15.0",
                        "pytest-repeat      0.9.3",
                    ],
                    5,
                )
            ),
        ),
    ]
    views = [
        Step(
            rng.choice(
                [
                    "Let me read the core of it.",
                    "Now the implementation.",
                    f"Look at {path} more closely.",
                    "Reading the next part of the file.",
                ]
            ),
            "view",
            {"path": path, "start": str(rng.randint(20, 260))},
            c,
        )
        for c in code
    ]
    rng.shuffle(pool)
    steps = pool[: max(1, n - len(views))]
    steps[1:1] = views
    return steps[: max(n, len(views) + 1)]


def struggle(
    rng: random.Random, w: World, kind: str, explicit: bool, target: int
) -> tuple[str, list[Step]]:
    """A hard session in which the failure survives several edits before the real fix."""
    spec = KINDS[kind]
    m = rng.choice(w.modules)
    task = _fmt(rng.choice(spec["explicit" if explicit else "vague"]), w, m)
    path = _fmt(spec["file"], w, m)
    fails = [_fmt(f, w, m) for f in spec["failures"]]
    hyps = [_fmt(h, w, m) for h in spec["hypotheses"]]
    code = [_fmt(c, w, m) for c in spec["code"]]
    steps = _explore(rng, w, m, spec, rng.randint(4, min(14, max(4, target // 3))))
    repro = _fmt(spec["repro"], w, m)
    steps.append(
        Step(
            rng.choice(
                [
                    "Let me reproduce it before changing anything.",
                    "First a reproduction, so I can tell whether a change helps.",
                    "I'll try to trigger the problem locally.",
                ]
            ),
            "bash",
            {"cmd": repro},
            fails[0],
            1,
        )
    )
    first_fail = len(steps) - 1
    remaining = target - len(steps) - 5
    attempt = 0
    seen = 1
    last_reverted: tuple[str, str] | None = None
    while remaining > 0:
        hyp = hyps[attempt % len(hyps)]
        edits = [(_fmt(o, w, m), _fmt(n, w, m)) for o, n in spec["edits"]]
        if last_reverted is not None and rng.random() < 0.5:
            old, new = last_reverted
            hyp = (
                rng.choice(
                    [
                        "Re-applying the earlier change, since it was necessary even if not sufficient, and combining it with the next idea.",
                        "Put back the change I reverted; the new evidence says it was part of the answer.",
                    ]
                )
                + " "
                + hyp
            )
        elif rng.random() < 0.8:
            old, new = rng.choice(edits)
        else:
            lines = rng.choice(code).splitlines()
            old = rng.choice([x for x in lines if x.strip()] or lines)
            indent = old[: len(old) - len(old.lstrip())]
            new = f"{indent}log.debug({rng.choice(spec['trace'])[:40]!r})\n{old}"
        snippet = next((c for c in code if old in c), rng.choice(code))
        lines = snippet.splitlines()
        i = next((j for j, x in enumerate(lines) if x in old.splitlines()[:1]), 0)
        last_reverted = None
        attempt += 1
        if rng.random() < 0.3:
            steps.append(
                Step(
                    "Look at the exact lines again before editing.",
                    "view",
                    {"path": path, "start": str(rng.randint(30, 200))},
                    snippet,
                )
            )
            remaining -= 1
        bad_edit = rng.random() < 0.12
        steps.append(
            Step(
                hyp,
                "edit",
                {
                    "path": path,
                    "old": old if not bad_edit else old + " ",
                    "new": new,
                    "line": str(rng.randint(30, 200)),
                },
                "\n".join(new.splitlines() + lines[i + 1 : i + 4])
                if not bad_edit
                else f"No replacement was performed, old_str `{old} ` did not appear verbatim in {path}.",
                1 if bad_edit else 0,
            )
        )
        remaining -= 1
        if bad_edit:
            steps.append(
                Step(
                    "Whitespace mismatch; retry with the exact line.",
                    "edit",
                    {"path": path, "old": old, "new": new, "line": str(rng.randint(30, 200))},
                    "\n".join(new.splitlines() + lines[i + 1 : i + 3]),
                )
            )
            remaining -= 1
        # The same failure survives the first attempts; later new errors appear.
        if attempt <= 2 or rng.random() < 0.4:
            out = fails[0] if rng.random() < 0.7 else fails[min(seen, len(fails) - 1)]
        else:
            seen = min(seen + 1, len(fails) - 1)
            out = fails[seen]
        steps.append(
            Step(
                rng.choice(
                    [
                        "Run the reproduction again.",
                        "Did that change anything?",
                        "Re-run.",
                        "Check whether the failure is gone.",
                        "Run it a few more times; intermittent failures need repetition.",
                    ]
                ),
                "bash",
                {
                    "cmd": repro
                    if rng.random() < 0.7
                    else f"for i in $(seq 1 {rng.choice([5, 10, 20])}); do {repro.splitlines()[0] if chr(10) not in repro else 'python repro.py'} 2>&1 | tail -2; done"
                },
                out,
                1,
            )
        )
        remaining -= 1
        roll = rng.random()
        if roll < 0.25 and remaining > 0:
            steps.append(
                Step(
                    rng.choice(
                        [
                            "That made it worse, not better. Reverting this edit before trying the next idea.",
                            "The edit does not address the cause; revert so I don't stack speculative changes.",
                            "Back this out; the symptom moved but did not go away.",
                        ]
                    ),
                    "bash",
                    {
                        "cmd": rng.choice(
                            [
                                f"git checkout -- {path} && git status --short",
                                f"git diff --stat && git checkout -- {path}",
                                "git stash && git stash drop",
                            ]
                        )
                    },
                    rng.choice(
                        [
                            "",
                            f" {path} | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)",
                            "Saved working directory and index state WIP on main: 3f2a1c9 Merge pull request\nDropped refs/stash@{0}",
                        ]
                    ),
                )
            )
            last_reverted = (old, new)
            remaining -= 1
        elif roll < 0.45 and remaining > 1:
            steps.append(
                Step(
                    "I need more visibility into the interleaving. Add temporary tracing and run with logs.",
                    "bash",
                    {
                        "cmd": f"PYTHONFAULTHANDLER=1 {w.pkg.upper()}_DEBUG=1 {repro.splitlines()[0]} 2>&1 | grep -E 'state=|DEBUG|WARN' | tail -20"
                    },
                    "\n".join(
                        f"DEBUG {w.pkg}.{m} t={rng.uniform(0, 3):.4f} {_fmt(rng.choice(spec['trace']), w, m)}"
                        for _ in range(rng.randint(4, 12))
                    ),
                )
            )
            steps.append(
                Step(
                    rng.choice(
                        [
                            "The trace narrows it down, but not to the line I edited.",
                            "Interesting: the bad value appears only after a step I had not looked at; ordering matters here, not just the value.",
                            "The log contradicts my last hypothesis. Reading that part of the code again.",
                        ]
                    ),
                    "view",
                    {"path": path, "start": str(rng.randint(30, 200))},
                    rng.choice(code),
                )
            )
            remaining -= 2
    fix_old, fix_new = _fmt(spec["fix_old"], w, m), _fmt(spec["fix_new"], w, m)
    steps += [
        Step(
            rng.choice(
                [
                    "Now I understand the actual cause. Rather than patching symptoms, fix it where the invariant is broken.",
                    "Putting the pieces together: the earlier edits treated symptoms. The real fix belongs here.",
                    "With the trace, the root cause is clear. Apply the targeted fix.",
                ]
            ),
            "edit",
            {"path": path, "old": fix_old, "new": fix_new, "line": str(rng.randint(30, 200))},
            fix_new,
        ),
        Step(
            "Run the reproduction several times to be sure.",
            "bash",
            {"cmd": repro},
            _fmt(spec["pass"], w, m),
        ),
        Step(
            "And the test suite for the module.",
            "bash",
            {"cmd": f"pytest -q {_fmt(spec['test'], w, m)}"},
            pytest_pass(
                w,
                rng,
                _fmt(spec["test"], w, m) if spec["test"] != "tests" else f"tests/test_{m}.py",
            ),
        ),
        Step(
            "Review the final diff.",
            "bash",
            {"cmd": "git diff"},
            git_diff(path, fix_old, fix_new, rng.randint(20, 200)),
        ),
        Step(
            "The fix is in place and verified.",
            "finish",
            {"summary": f"Fixed the root cause in {path}; reproduction and tests pass."},
        ),
    ]
    steps[first_fail + 1].hard_from_here = True
    return task, steps


def build_hard(rng: random.Random, w: World) -> tuple[str, list[Step], str]:
    """One hard session; returns (task, steps, kind label)."""
    target = rng.randint(15, 56)
    if rng.random() < 0.3:
        kind = rng.choice(sorted(STEADY))
        task, steps = steady(rng, w, kind, max(15, min(target, 40)))
        return task, steps, f"steady:{kind}"
    kind = rng.choice(sorted(KINDS))
    explicit = rng.random() < 0.4
    task, steps = struggle(rng, w, kind, explicit, target)
    if explicit:
        for s in steps:
            s.hard_from_here = False
        steps[0].hard_from_here = True
    return task, steps, f"{'explicit' if explicit else 'latent'}:{kind}"
