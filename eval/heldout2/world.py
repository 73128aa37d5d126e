# ruff: noqa: E501  (hand-written transcript text: long lines read as they appear in a terminal)
"""Shared building blocks of the second held-out corpus: project worlds and tool output.

Why a module of its own: every scenario (easy, medium, hard) draws its repository,
paths and names from here, and renders shell output (pytest summaries, tracebacks,
grep hits, numbered file views) the same way, so scenarios differ in what happens,
not in how a terminal looks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class World:
    """One fictional repository a session works in."""

    repo: str
    pkg: str
    root: str
    modules: tuple[str, ...]
    test_count: int
    py: str


@dataclass
class Step:
    """One agent turn: what it says, what it does, and what comes back.

    `kind` is bash | view | edit | create | search | finish; `args` holds the
    action's parameters. `hard_from_here` marks the first step whose *request*
    carries the evidence that the task is hard (the labelling rule, README).
    """

    thought: str
    kind: str
    args: dict[str, str] = field(default_factory=dict)
    output: str = ""
    rc: int = 0
    hard_from_here: bool = False


_REPOS = [
    ("ledgerline", "ledgerline"),
    ("pyrelay", "pyrelay"),
    ("tidewater", "tidewater"),
    ("quillstack", "quill"),
    ("mossdb", "mossdb"),
    ("harbor-sync", "harbor_sync"),
    ("plumeq", "plumeq"),
    ("cartographer", "cartographer"),
    ("fernet-kv", "fernkv"),
    ("brisk-http", "brisk"),
    ("orchard-ml", "orchard"),
    ("sableflow", "sableflow"),
    ("kestrel-cli", "kestrel"),
    ("granite-orm", "granite"),
    ("wick", "wick"),
    ("lumen-metrics", "lumen"),
    ("pebble-sched", "pebble"),
    ("cinder-auth", "cinder"),
    ("marlin-etl", "marlin"),
    ("vesper-rpc", "vesper"),
    ("tallow", "tallow"),
    ("nimbus-cache", "nimbus"),
    ("drift-geo", "driftgeo"),
    ("saffron-docs", "saffron"),
]
_MODULES = [
    "config",
    "cli",
    "client",
    "server",
    "storage",
    "cache",
    "models",
    "utils",
    "io",
    "parser",
    "scheduler",
    "worker",
    "pool",
    "auth",
    "billing",
    "export",
    "serializers",
    "handlers",
    "routing",
    "metrics",
    "retry",
    "queue",
    "session",
    "schema",
    "validators",
    "compat",
    "plugins",
    "backends",
    "transport",
    "events",
]


def make_world(rng: random.Random) -> World:
    repo, pkg = rng.choice(_REPOS)
    root = rng.choice(["/testbed", f"/workspace/{repo}", f"/home/dev/src/{repo}", "/repo"])
    mods = tuple(rng.sample(_MODULES, 7))
    return World(
        repo=repo,
        pkg=pkg,
        root=root,
        modules=mods,
        test_count=rng.randint(40, 900),
        py=rng.choice(["3.10.14", "3.11.9", "3.12.4", "3.9.19"]),
    )


def numbered(lines: list[str], start: int = 1) -> str:
    """A `cat -n` style view."""
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(lines, start))


def ls_tree(w: World, rng: random.Random) -> str:
    files = ["README.md", "pyproject.toml", "setup.cfg" if rng.random() < 0.4 else "tox.ini"]
    files += [f"src/{w.pkg}/__init__.py"] + [f"src/{w.pkg}/{m}.py" for m in w.modules]
    files += [f"tests/test_{m}.py" for m in w.modules[: rng.randint(3, 6)]]
    if rng.random() < 0.5:
        files += ["docs/index.md", "CHANGELOG.md"]
    rng.shuffle(files)
    return "\n".join(f"./{f}" for f in sorted(files))


def pytest_header(w: World, rng: random.Random, n: int) -> str:
    return (
        "============================= test session starts ==============================\n"
        f"platform linux -- Python {w.py}, pytest-{rng.choice(['7.4.4', '8.1.1', '8.2.2', '8.3.3'])}, "
        "pluggy-1.5.0\n"
        f"rootdir: {w.root}\n"
        f"configfile: {rng.choice(['pyproject.toml', 'setup.cfg', 'tox.ini'])}\n"
        f"collected {n} items\n"
    )


def pytest_pass(w: World, rng: random.Random, target: str, n: int | None = None) -> str:
    n = n or rng.randint(3, 60)
    dots = "." * min(n, 70)
    secs = round(rng.uniform(0.05, 9.5), 2)
    return (
        pytest_header(w, rng, n)
        + f"\n{target} {dots} [100%]\n\n"
        + f"============================== {n} passed in {secs}s =============================="
    )


def pytest_fail(
    w: World,
    rng: random.Random,
    target: str,
    test: str,
    body: str,
    err: str,
    n: int | None = None,
    failed: int = 1,
) -> str:
    n = n or rng.randint(failed + 2, 50)
    passed = n - failed
    marks = list("." * passed + "F" * failed)
    rng.shuffle(marks)
    secs = round(rng.uniform(0.1, 12.0), 2)
    return (
        pytest_header(w, rng, n)
        + f"\n{target} {''.join(marks[:70])} [100%]\n\n"
        + "=================================== FAILURES ===================================\n"
        + f"_{'_' * 10} {test.split('::')[-1]} {'_' * 10}\n\n"
        + body
        + f"\nE   {err}\n\n"
        + "=========================== short test summary info ============================\n"
        + f"FAILED {test} - {err[:80]}\n"
        + f"========================= {failed} failed, {passed} passed in {secs}s ========================="
    )


def traceback(frames: list[tuple[str, int, str, str]], err: str) -> str:
    """frames: (file, line, function, source line)."""
    out = ["Traceback (most recent call last):"]
    for f, ln, fn, src in frames:
        out.append(f'  File "{f}", line {ln}, in {fn}')
        out.append(f"    {src}")
    out.append(err)
    return "\n".join(out)


def grep_hits(hits: list[tuple[str, int, str]]) -> str:
    return "\n".join(f"{f}:{ln}:{text}" for f, ln, text in hits)


def git_diff(path: str, old: str, new: str, line: int) -> str:
    o, n = old.splitlines(), new.splitlines()
    body = "\n".join([f"-{x}" for x in o] + [f"+{x}" for x in n])
    return (
        f"diff --git a/{path} b/{path}\nindex 3f2a1c9..8be07d1 100644\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{line},{len(o)} +{line},{len(n)} @@\n{body}"
    )


def fill(text: str, w: World, m: str) -> str:
    """Fill the {pkg}/{m}/{root} placeholders of hand-written content."""
    return (
        text.replace("{pkg}", w.pkg)
        .replace("{m}", m)
        .replace("{root}", w.root)
        .replace("{{", "{")
        .replace("}}", "}")
    )


def pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)
