# ruff: noqa: E501  (hand-written transcript text: long lines read as they appear in a terminal)
"""Steady hard sessions: deep concurrency/protocol work that proceeds without a single error.

The task statement itself names the difficulty, so every turn is labelled
`needs_strong` (README, labelling rule).
"""

from __future__ import annotations

import random

from eval.heldout2.steady_content import STEADY, STEADY_CODE
from eval.heldout2.world import Step, World, ls_tree, pytest_pass
from eval.heldout2.world import fill as _fmt

__all__ = ["STEADY", "steady"]


def _module_code(rng: random.Random, spec_name: str, tests: list[str], design: list[str]) -> str:
    cls = "".join(p.capitalize() for p in spec_name.split("_"))
    body = [
        f'"""{design[0][:90]}"""',
        "",
        "from __future__ import annotations",
        "",
        "import threading",
        "from dataclasses import dataclass, field",
        "",
        "",
        "@dataclass",
        f"class {cls}State:",
        "    term: int = 0",
        "    seq: int = 0",
        "    entries: list = field(default_factory=list)",
        "",
        "",
        f"class {cls}:",
        "    def __init__(self, node_id: str) -> None:",
        "        self.node_id = node_id",
        f"        self.state = {cls}State()",
        "        self._mu = threading.Lock()",
        "",
    ]
    for t in tests:
        name = t.removeprefix("test_")
        body += [
            f"    def {name}(self, *args):",
            f"        # {rng.choice(design)[:80]}",
            "        with self._mu:",
            "            self.state.seq += 1",
            "            return self.state.seq",
            "",
        ]
    return "\n".join(body)


def steady(rng: random.Random, w: World, kind: str, target: int) -> tuple[str, list[Step]]:
    """A hard session that makes steady progress: no errors, deep content."""
    spec = STEADY[kind]
    m = rng.choice(w.modules)
    task = _fmt(rng.choice(spec["task"]), w, m)
    design = [_fmt(d, w, m) for d in spec["design"]]
    files = [_fmt(f, w, m) for f in spec["files"]]
    tests = list(spec["tests"])
    core, test_src = STEADY_CODE[kind]
    steps = [
        Step(
            "Look at the project layout and the module I will change.",
            "bash",
            {"cmd": "git ls-files | head -60"},
            ls_tree(w, rng),
        ),
        Step(
            design[0],
            "view",
            {"path": files[0], "start": "1"},
            "\n".join(
                [
                    f'"""{m}: current implementation."""',
                    "",
                    "import threading",
                    "",
                    "",
                    f"class {m.capitalize()}Node:",
                    "    def __init__(self, node_id, peers):",
                    "        self.node_id = node_id",
                    "        self.peers = peers",
                    "        self.log = []",
                    "        self.commit_index = 0",
                ]
            ),
        ),
    ]
    k = 0
    while len(steps) < target - 4:
        d = design[k % len(design)]
        t = tests[k % len(tests)]
        k += 1
        r = rng.random()
        if r < 0.3:
            steps.append(
                Step(
                    d,
                    "view",
                    {"path": files[0], "start": str(rng.randint(1, 200))},
                    core if k > 2 else _module_code(rng, kind, tests[:2], design)[:600],
                )
            )
        elif r < 0.55:
            steps.append(
                Step(
                    f"{d} Writing that down as code.",
                    "edit",
                    {
                        "path": files[0],
                        "old": f"    def {t.removeprefix('test_')}(self, *args):",
                        "new": f'    def {t.removeprefix("test_")}(self, *args):\n        """{d[:70]}"""',
                        "line": str(rng.randint(20, 200)),
                    },
                    f'    def {t.removeprefix("test_")}(self, *args):\n        """{d[:70]}"""',
                )
            )
        elif r < 0.7 and k < 3:
            steps.append(
                Step(
                    f"New module for the core logic. {d}",
                    "create",
                    {
                        "path": files[0],
                        "content": _module_code(rng, kind, tests, design) + "\n" + core,
                    },
                )
            )
        elif r < 0.85:
            steps.append(
                Step(
                    f"A test that pins this property: {t.replace('_', ' ')}.",
                    "create",
                    {
                        "path": files[-1],
                        "content": "\n".join(
                            [f"import pytest\n\nfrom {w.pkg}.{m} import *", "", test_src, ""]
                            + [
                                f"def {x}():\n    check_{x.removeprefix('test_')}(build_fixture())\n"
                                for x in tests[: k + 1]
                                if x not in test_src
                            ]
                        ),
                    },
                )
            )
        else:
            steps.append(
                Step(
                    "Run the new tests.",
                    "bash",
                    {"cmd": f"pytest -q {files[-1]}"},
                    pytest_pass(w, rng, files[-1], min(k + 1, len(tests))),
                )
            )
    steps += [
        Step(
            "Full module tests, repeated, to shake out ordering issues.",
            "bash",
            {"cmd": f"pytest -q {files[-1]} -p no:randomly --count=20"},
            pytest_pass(w, rng, files[-1], len(tests) * 20),
        ),
        Step(
            "Type-check the package.",
            "bash",
            {"cmd": f"mypy src/{w.pkg}"},
            f"Success: no issues found in {rng.randint(12, 60)} source files",
        ),
        Step(
            "Everything passes; document the guarantees in the module docstring.",
            "bash",
            {"cmd": "git diff --stat"},
            "\n".join(f" {f} | {rng.randint(20, 240)} ++++++++--" for f in files),
        ),
        Step("Done.", "finish", {"summary": f"Implemented {kind.replace('_', ' ')} with tests."}),
    ]
    steps[0].hard_from_here = True
    return task, steps
