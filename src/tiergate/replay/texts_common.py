"""Shared vocabulary of the synthetic corpus: projects, identifiers, system prompts, tools.

Every session gets a `Project`: a language, a repository, and a pool of
identifiers drawn from verb and noun lists, so two sessions rarely mention the
same function or file. The text banks (texts_easy, texts_hard, traces, source)
read their names from it. Nothing here knows about the difficulty scorer: the
vocabulary is what coding-agent traffic contains, not what any feature counts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

LANGUAGES = ("go", "python", "java", "rust", "typescript")

VERBS = (
    "load", "parse", "flush", "resolve", "fetch", "encode", "decode", "apply", "merge",
    "sync", "schedule", "dispatch", "retry", "validate", "render", "compact", "index",
    "reconcile", "drain", "acquire", "release", "rotate", "refresh", "emit", "collect",
    "build", "lookup", "split", "prune", "publish", "consume", "normalize", "expire",
)  # fmt: skip
NOUNS = (
    "config", "session", "token", "batch", "cursor", "ledger", "invoice", "payload",
    "shard", "lease", "queue", "worker", "snapshot", "manifest", "route", "tenant",
    "webhook", "bucket", "segment", "checkpoint", "cache", "buffer", "record", "order",
    "account", "export", "report", "metric", "span", "job", "quota", "upload", "cart",
    "schema", "message", "partition", "replica", "offset", "profile", "channel",
)  # fmt: skip
ADJECTIVES = (
    "pending", "stale", "active", "raw", "local", "remote", "cached", "default", "max",
    "last", "next", "retry", "batch", "total", "current", "primary", "shadow", "dirty",
)  # fmt: skip
REPOS = (
    "ledger-svc", "tiny-scheduler", "payments-gateway", "acme-billing", "geo-indexer",
    "webhook-relay", "feature-flags", "log-shipper", "inventory-api", "search-backend",
    "auth-proxy", "report-builder", "chat-bridge", "metrics-agent", "image-resizer",
    "order-router", "quota-keeper", "edge-cache", "doc-renderer", "event-bus",
    "shardkv", "mailer", "audit-trail", "pricing-engine", "sync-daemon", "job-runner",
)  # fmt: skip
ORGS = ("acme", "northwind", "globex", "initech", "umbrella", "hooli", "vandelay", "stark")

LANG_FACTS: dict[str, dict[str, Any]] = {
    "go": {
        "ext": "go",
        "dirs": ("internal/store", "internal/api", "pkg/queue", "cmd/server", "internal/sched"),
        "test_cmd": ("go test ./...", "go test -race ./internal/...", "go test -count=1 ./pkg/..."),
        "build_cmd": ("go build ./...", "go vet ./..."),
        "manifest": "go.mod",
        "formatter": "gofmt",
    },
    "python": {
        "ext": "py",
        "dirs": ("src/app", "src/app/services", "src/app/api", "src/app/workers", "tests"),
        "test_cmd": ("pytest -q", "pytest -x tests/", "python -m pytest -q tests/unit"),
        "build_cmd": ("mypy src", "ruff check src"),
        "manifest": "pyproject.toml",
        "formatter": "ruff format",
    },
    "java": {
        "ext": "java",
        "dirs": (
            "src/main/java/com/{org}/core",
            "src/main/java/com/{org}/api",
            "src/main/java/com/{org}/jobs",
        ),
        "test_cmd": ("mvn -q test", "./gradlew test", "mvn -pl core test"),
        "build_cmd": ("mvn -q compile", "./gradlew build -x test"),
        "manifest": "pom.xml",
        "formatter": "google-java-format",
    },
    "rust": {
        "ext": "rs",
        "dirs": ("src", "src/shard", "src/net", "src/storage", "crates/core/src"),
        "test_cmd": ("cargo test", "cargo test --workspace", "cargo nextest run"),
        "build_cmd": ("cargo build", "cargo clippy --all-targets"),
        "manifest": "Cargo.toml",
        "formatter": "rustfmt",
    },
    "typescript": {
        "ext": "ts",
        "dirs": ("src/services", "src/routes", "src/lib", "src/workers", "test"),
        "test_cmd": ("npm test", "npx jest --ci", "pnpm vitest run"),
        "build_cmd": ("npx tsc --noEmit", "npm run build"),
        "manifest": "package.json",
        "formatter": "prettier",
    },
}


def camel(*words: str) -> str:
    return words[0] + "".join(w.capitalize() for w in words[1:])


def pascal(*words: str) -> str:
    return "".join(w.capitalize() for w in words)


def snake(*words: str) -> str:
    return "_".join(words)


@dataclass
class Project:
    """One session's repository and naming context."""

    rng: random.Random
    lang: str
    repo: str
    org: str
    nouns: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def pick(cls, rng: random.Random, lang: str | None = None) -> Project:
        lang = lang or rng.choice(LANGUAGES)
        nouns = tuple(rng.sample(NOUNS, 8))
        return cls(rng, lang, rng.choice(REPOS), rng.choice(ORGS), nouns)

    @property
    def facts(self) -> dict[str, Any]:
        return LANG_FACTS[self.lang]

    def noun(self) -> str:
        """Mostly the session's own nouns, sometimes any: a project has a theme."""
        return self.rng.choice(self.nouns) if self.rng.random() < 0.8 else self.rng.choice(NOUNS)

    def func(self) -> str:
        verb, noun = self.rng.choice(VERBS), self.noun()
        if self.lang == "python" or self.lang == "rust":
            return snake(verb, noun)
        if self.lang == "go" and self.rng.random() < 0.5:
            return pascal(verb, noun)
        return camel(verb, noun)

    def type_name(self) -> str:
        if self.rng.random() < 0.4:
            return pascal(self.rng.choice(ADJECTIVES), self.noun())
        return pascal(
            self.noun(), self.rng.choice(("store", "service", "client", "manager", "pool"))
        )

    def var(self) -> str:
        a, n = self.rng.choice(ADJECTIVES), self.noun()
        if self.lang in ("python", "rust"):
            return self.rng.choice((n, snake(a, n), n + "s", n[:3]))
        return self.rng.choice((n, camel(a, n), n + "s", n[:3]))

    def const(self) -> str:
        return snake(
            self.rng.choice(ADJECTIVES),
            self.noun(),
            self.rng.choice(("ms", "size", "count", "limit")),
        ).upper()

    def file(self) -> str:
        d = self.rng.choice(self.facts["dirs"]).format(org=self.org)
        name = self.noun()
        if self.lang == "java":
            name = self.type_name()
        elif self.lang == "typescript":
            name = self.rng.choice((name, f"{name}.service", f"{name}-client"))
        elif self.rng.random() < 0.3:
            name = snake(name, self.rng.choice(("store", "util", "handler", "client")))
        return f"{d}/{name}.{self.facts['ext']}"

    def test_file(self) -> str:
        noun = self.noun()
        return {
            "go": f"{self.rng.choice(self.facts['dirs'])}/{noun}_test.go",
            "python": f"tests/test_{noun}.py",
            "java": f"src/test/java/com/{self.org}/{pascal(noun)}Test.java",
            "rust": f"tests/{noun}.rs",
            "typescript": f"test/{noun}.test.ts",
        }[self.lang]

    def test_name(self) -> str:
        verb, noun = self.rng.choice(VERBS), self.noun()
        tail = self.rng.choice(("", "_empty", "_concurrent", "_retry", "_last_page", "_expired"))
        if self.lang == "go":
            return "Test" + pascal(verb, noun) + pascal(*tail.strip("_").split("_") or [""])
        if self.lang in ("java", "typescript"):
            return camel(verb, noun) + pascal(*(tail.strip("_").split("_") if tail else [""]))
        return f"test_{verb}_{noun}{tail}"

    def test_cmd(self) -> str:
        return str(self.rng.choice(self.facts["test_cmd"]))

    def build_cmd(self) -> str:
        return str(self.rng.choice(self.facts["build_cmd"]))

    def module(self) -> str:
        if self.lang == "go":
            return f"github.com/{self.org}/{self.repo}"
        if self.lang == "java":
            return f"com.{self.org}.{self.repo.replace('-', '')}"
        return self.repo.replace("-", "_")


# ---- system prompts -------------------------------------------------------------

_AGENTS = ("Forge", "Coda", "Patchwork", "Quill", "Ratchet", "Lathe", "Tern")

_SYSTEM_OPENERS = (
    "You are {agent}, an autonomous software engineering agent working in the {repo} repository "
    "(primary language: {lang}). You operate inside a sandboxed checkout and act only through "
    "the tools provided.",
    "You are a senior {lang} engineer pair-programming with the user on {org}/{repo}. "
    "You can read and modify files and run commands through two tools.",
    "{agent} is a coding assistant embedded in the developer's terminal. The current working "
    "directory is the root of {org}/{repo}, a {lang} project.",
    "You are an AI coding agent. Workspace: /workspace/{repo} ({lang}). The user is a developer "
    "on the {org} platform team.",
)
_SYSTEM_RULES = (
    "Read the relevant code before changing it; never guess at file contents.",
    "Keep changes minimal and focused on the request. Do not reformat unrelated code.",
    "Run the test suite after every non-trivial change and report failures verbatim.",
    "Prefer small, reviewable diffs. Explain what you changed in one or two sentences.",
    "Never commit secrets, credentials or generated files.",
    "If a command fails, read the error output carefully before retrying.",
    "Follow the existing code style; the project uses {formatter}.",
    "Do not push to remote branches or open pull requests unless asked.",
    "When you are unsure what the user wants, ask a short clarifying question.",
    "Use the project's existing helpers instead of adding new dependencies.",
    "Long-running commands time out after 120 seconds; split them if needed.",
    "Treat the main branch as protected; work on the current branch only.",
    "Write tests for behaviour you add or change, next to the existing tests.",
    "Do not delete files unless the user explicitly asks for it.",
    "Summarise the outcome at the end of each task: what changed, what was verified.",
)
_SYSTEM_FOOTERS = (
    "Environment: Linux x86_64, {lang} toolchain installed, network access disabled "
    "except for the package mirror.",
    "The repository uses conventional commits. CI runs `{test}` and `{build}` on every push.",
    "Today's date is available through `date`. The user's timezone is UTC.",
    "Answer in English. Use Markdown for code and keep prose short.",
)


def system_prompt(rng: random.Random, project: Project) -> str:
    """A realistic 1-2 KB agent system prompt, varied per session."""
    fill = {
        "agent": rng.choice(_AGENTS),
        "repo": project.repo,
        "org": project.org,
        "lang": {"typescript": "TypeScript"}.get(project.lang, project.lang.capitalize()),
        "formatter": project.facts["formatter"],
        "test": project.test_cmd(),
        "build": project.build_cmd(),
    }
    rules = rng.sample(_SYSTEM_RULES, rng.randint(7, 12))
    lines = [rng.choice(_SYSTEM_OPENERS).format(**fill), "", "Rules:"]
    lines += [f"{i}. {r.format(**fill)}" for i, r in enumerate(rules, 1)]
    lines += ["", *(f.format(**fill) for f in rng.sample(_SYSTEM_FOOTERS, 2))]
    return "\n".join(lines)


# ---- the two-tool arrays --------------------------------------------------------

TOOLSETS: dict[str, list[dict[str, Any]]] = {
    "run_edit": [
        {
            "type": "function",
            "function": {
                "name": "run_command",
                "description": "Run a shell command in the repository root and return its "
                "combined stdout and stderr with the exit code.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "The command line."},
                        "timeout_s": {"type": "integer", "description": "Timeout in seconds."},
                    },
                    "required": ["command"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "edit_file",
                "description": "Replace an exact snippet of a file with new text. The old "
                "snippet must match exactly once.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "old_str": {"type": "string"},
                        "new_str": {"type": "string"},
                    },
                    "required": ["path", "old_str", "new_str"],
                },
            },
        },
    ],
    "bash_editor": [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Execute a bash command. State is not kept between calls.",
                "parameters": {
                    "type": "object",
                    "properties": {"cmd": {"type": "string"}},
                    "required": ["cmd"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "str_replace_editor",
                "description": "View, create and edit files. `view` prints a file with line "
                "numbers; `str_replace` replaces old_str with new_str.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "enum": ["view", "str_replace", "create"]},
                        "path": {"type": "string"},
                        "old_str": {"type": "string"},
                        "new_str": {"type": "string"},
                        "file_text": {"type": "string"},
                    },
                    "required": ["command", "path"],
                },
            },
        },
    ],
    "shell_patch": [
        {
            "type": "function",
            "function": {
                "name": "shell",
                "description": "Run a command (argv form) and return its output.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "array", "items": {"type": "string"}},
                        "workdir": {"type": "string"},
                    },
                    "required": ["command"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "apply_patch",
                "description": "Apply a unified diff to the working tree.",
                "parameters": {
                    "type": "object",
                    "properties": {"patch": {"type": "string"}},
                    "required": ["patch"],
                },
            },
        },
    ],
}
