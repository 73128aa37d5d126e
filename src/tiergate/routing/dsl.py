"""The `dsl` routing strategy: YAML rules, first match wins.

A rule is `when` (conditions, all of which must hold) and `use` (a model name or
"@pool:<name>"); a rule without `when` always matches, which makes a default:

    rules:
      - name: failing-tests-go-strong
        when:
          agent_state.tests_failed: true
          agent_state.turns: ">= 5"
        use: "@pool:strong"
      - when:
          difficulty: ">= 0.6"
          any:
            - header.x-team: infra
            - request.has_tools: true
        use: anthropic/claude-sonnet-5
      - use: openai/gpt-5-mini

Condition values, by field kind (FIELDS lists every field):
- number: `0.6` (equals), `">= 0.6"` (one of >= > <= < == !=), or a list (any of).
- bool: `true` / `false`.
- string: a case-insensitive glob ("infra", "gpt-*"), a list of globs (any of), or
  `null` for "absent".
- set (tools used, files edited): a glob matches if any element matches, a list
  if any of its globs does, `true`/`false` test non-empty, and `">= 3"` compares
  the size.
Combinators, usable wherever conditions are: `any: [{...}, ...]`,
`all: [{...}, ...]`, `not: {...}`.

Rules are validated once at load; every problem is reported with its line and
column (from YAML text) or its path (from already-parsed data). Evaluation is
pure and reads only what the rules reference (agent state is derived lazily).
"""

from __future__ import annotations

import fnmatch
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from tiergate.core.model import ChatRequest
from tiergate.routing import difficulty
from tiergate.routing.features import AgentState, agent_state
from tiergate.routing.tiers import POOL_REF_PREFIX

FieldKind = Literal["number", "bool", "string", "set"]

FIELDS: dict[str, FieldKind] = {
    "difficulty": "number",  # the router's gate score (StrategyContext.score)
    "difficulty.full": "number",  # full-transcript score
    "difficulty.delta": "number",  # latest-turn score
    "request.model": "string",
    "request.user": "string",
    "request.has_tools": "bool",
    "request.has_images": "bool",
    "request.wants_json": "bool",
    "request.stream": "bool",
    "request.prompt_tokens": "number",
    "request.messages": "number",
    "request.max_tokens": "number",
    "agent_state.turns": "number",
    "agent_state.tools_used": "set",
    "agent_state.files_edited": "set",
    "agent_state.tool_calls": "number",
    "agent_state.tests_failed": "bool",
    "agent_state.tool_errors": "number",
}
"""Every condition field and its kind. Plus two open families of string fields:
`header.<name>` (request headers, name case-insensitive) and
`request.metadata.<key>` (the request's metadata object)."""

FIELD_ALIASES: dict[str, str] = {"agent_state.tests_just_failed": "agent_state.tests_failed"}

_COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_RULE_KEYS = {"name", "when", "use"}
_COMBINATORS = {"any", "all", "not"}
BAND_POOLS = ("weak", "mid", "strong")


class RuleError(ValueError):
    """Rules are invalid; `problems` lists each one with its line/column or path."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


# ---- facts: what conditions read -------------------------------------------------------


class RuleFacts:
    """The values rule conditions read, computed lazily and at most once."""

    def __init__(
        self,
        req: ChatRequest,
        headers: Mapping[str, str] | None = None,
        *,
        score: float | None = None,
        prompt_tokens: int | None = None,
        agent: AgentState | None = None,
    ) -> None:
        self.req = req
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self._score = score
        self._prompt_tokens = prompt_tokens
        self._agent = agent
        self._cache: dict[str, Any] = {}

    @property
    def agent(self) -> AgentState:
        if self._agent is None:
            self._agent = agent_state(self.req)
        return self._agent

    def get(self, field: str) -> Any:
        if field not in self._cache:
            self._cache[field] = self._compute(field)
        return self._cache[field]

    def _compute(self, field: str) -> Any:
        req = self.req
        if field.startswith("header."):
            return self.headers.get(field[7:].lower())
        if field.startswith("request.metadata."):
            value = req.metadata.get(field[17:])
            return None if value is None else str(value)
        if field.startswith("agent_state."):
            return getattr(self.agent, field[12:])
        match field:
            case "difficulty":
                return difficulty.full_score(req) if self._score is None else self._score
            case "difficulty.full":
                return difficulty.full_score(req)
            case "difficulty.delta":
                return difficulty.delta_score(req)
            case "request.prompt_tokens":
                if self._prompt_tokens is None:
                    self._prompt_tokens = difficulty.full_transcript_features(req).prompt_tokens
                return self._prompt_tokens
            case "request.model":
                return req.model
            case "request.user":
                return req.user
            case "request.has_tools":
                return bool(req.tools)
            case "request.has_images":
                return req.has_images()
            case "request.wants_json":
                return req.wants_json()
            case "request.stream":
                return req.stream
            case "request.messages":
                return len(req.messages)
            case "request.max_tokens":
                return req.max_tokens
        raise KeyError(field)  # unreachable for validated rules


# ---- compiled conditions ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldTest:
    """One field test. `op` is a comparator, "eq", "glob", "absent" or "nonempty"."""

    field: str
    kind: FieldKind
    op: str
    operands: tuple[Any, ...]

    def holds(self, facts: RuleFacts) -> bool:
        value = facts.get(self.field)
        if self.op == "absent":
            return value is None
        if value is None:
            return False
        if self.kind == "set":
            if self.op == "nonempty":
                return bool(value) == self.operands[0]
            if self.op in _COMPARATORS:
                return _COMPARATORS[self.op](len(value), self.operands[0])
            return any(_glob(str(v), p) for v in value for p in self.operands)
        if self.op == "glob":
            return any(_glob(str(value), p) for p in self.operands)
        if self.op in _COMPARATORS:
            return bool(_COMPARATORS[self.op](value, self.operands[0]))
        return any(value == o for o in self.operands)


@dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple[Condition, ...]

    def holds(self, facts: RuleFacts) -> bool:
        return all(p.holds(facts) for p in self.parts)


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Condition, ...]

    def holds(self, facts: RuleFacts) -> bool:
        return any(p.holds(facts) for p in self.parts)


@dataclass(frozen=True, slots=True)
class Not:
    part: Condition

    def holds(self, facts: RuleFacts) -> bool:
        return not self.part.holds(facts)


Condition = FieldTest | AllOf | AnyOf | Not


@dataclass(frozen=True, slots=True)
class Rule:
    use: str
    when: Condition
    name: str | None = None
    line: int | None = None

    def label(self) -> str:
        return self.name or (f"line {self.line}" if self.line else self.use)


def _glob(value: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(value.lower(), pattern.lower())


def first_match(rules: Sequence[Rule], facts: RuleFacts) -> Rule | None:
    """The first rule whose conditions hold, or None."""
    for rule in rules:
        if rule.when.holds(facts):
            return rule
    return None


# ---- parsing and validation -------------------------------------------------------------

Path = tuple[str | int, ...]


class _Parser:
    def __init__(
        self,
        marks: Mapping[Path, tuple[int, int]],
        root: Path,
        known_models: Iterable[str] | None,
        known_pools: Iterable[str] | None,
    ) -> None:
        self.marks = marks
        self.root = root
        self.models = None if known_models is None else list(known_models)
        self.pools = None if known_pools is None else {*known_pools, *BAND_POOLS}
        self._found: list[tuple[tuple[int, int], str]] = []

    def error(self, path: Path, message: str, *, at_key: bool = False) -> None:
        """Record a problem at the value (or, with at_key, the key) that `path` names."""
        key_mark = self.marks.get((*path, "<key>"))
        mark = key_mark if at_key and key_mark else self.marks.get(path) or key_mark
        where = f"line {mark[0]}, column {mark[1]}" if mark else _format_path(path)
        self._found.append((mark or (0, 0), f"{where}: {message}"))

    @property
    def problems(self) -> list[str]:
        """Problems in document order (insertion order when there are no marks)."""
        return [text for _, text in sorted(self._found, key=lambda f: f[0])]

    def rules(self, data: Any) -> list[Rule]:
        if not isinstance(data, list):
            self.error(self.root, "rules must be a list of mappings")
            return []
        out = []
        for i, item in enumerate(data):
            rule = self.rule((*self.root, i), item)
            if rule is not None:
                out.append(rule)
        return out

    def rule(self, path: Path, item: Any) -> Rule | None:
        if not isinstance(item, dict):
            self.error(path, "a rule must be a mapping with 'use' and optional 'when', 'name'")
            return None
        for key in item:
            if key not in _RULE_KEYS:
                problem = f"unknown rule key {key!r} (expected name, when, use)"
                self.error((*path, str(key)), problem, at_key=True)
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            self.error((*path, "name"), "name must be a string")
        use = self.use((*path, "use"), item.get("use"), path)
        when = item.get("when")
        cond: Condition = AllOf(()) if when is None else self.conditions((*path, "when"), when)
        mark = self.marks.get(path)
        if use is None:
            return None
        return Rule(
            use=use,
            when=cond,
            name=name if isinstance(name, str) else None,
            line=mark[0] if mark else None,
        )

    def use(self, path: Path, value: Any, rule_path: Path) -> str | None:
        if value is None:
            self.error(rule_path, "rule has no 'use' (a model name or '@pool:<name>')")
            return None
        if not isinstance(value, str) or not value.strip():
            self.error(path, "use must be a model name or '@pool:<name>'")
            return None
        if value.startswith(POOL_REF_PREFIX):
            if self.pools is not None and value[len(POOL_REF_PREFIX) :] not in self.pools:
                self.error(path, f"unknown pool {value!r} (known: {sorted(self.pools)})")
        elif self.models is not None and value not in self.models:
            self.error(path, f"unknown model {value!r}")
        return value

    def conditions(self, path: Path, value: Any) -> Condition:
        if not isinstance(value, dict) or not value:
            self.error(path, "conditions must be a non-empty mapping of field: value")
            return AllOf(())
        parts: list[Condition] = []
        for key, operand in value.items():
            p = (*path, str(key))
            if key in ("any", "all"):
                if not isinstance(operand, list) or not operand:
                    self.error(p, f"'{key}' takes a non-empty list of condition mappings")
                    continue
                subs = tuple(self.conditions((*p, i), c) for i, c in enumerate(operand))
                parts.append(AnyOf(subs) if key == "any" else AllOf(subs))
            elif key == "not":
                parts.append(Not(self.conditions(p, operand)))
            else:
                test = self.test(p, str(key), operand)
                if test is not None:
                    parts.append(test)
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))

    def test(self, path: Path, field: str, operand: Any) -> FieldTest | None:
        field = FIELD_ALIASES.get(field, field)
        kind = _field_kind(field)
        if kind is None:
            known = ", ".join([*FIELDS, "header.<name>", "request.metadata.<key>"])
            self.error(path, f"unknown field {field!r} (known: {known})", at_key=True)
            return None
        try:
            op, operands = _operand(kind, operand)
        except ValueError as err:
            self.error(path, f"{field}: {err}")
            return None
        return FieldTest(field, kind, op, operands)


def _field_kind(field: str) -> FieldKind | None:
    if field in FIELDS:
        return FIELDS[field]
    if field.startswith("header.") and len(field) > 7:
        return "string"
    if field.startswith("request.metadata.") and len(field) > 17:
        return "string"
    return None


def _comparison(text: str) -> tuple[str, float] | None:
    s = text.strip()
    for op in (">=", "<=", "==", "!=", ">", "<"):
        if s.startswith(op):
            try:
                return op, float(s[len(op) :].strip())
            except ValueError:
                return None
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _operand(kind: FieldKind, v: Any) -> tuple[str, tuple[Any, ...]]:
    """Turn a YAML value into (op, operands) for a field kind, or raise ValueError."""
    if kind == "bool":
        if not isinstance(v, bool):
            raise ValueError("expected true or false")
        return "eq", (v,)
    if kind == "number":
        if _is_number(v):
            return "eq", (float(v),)
        if isinstance(v, list) and v and all(_is_number(x) for x in v):
            return "eq", tuple(float(x) for x in v)
        if isinstance(v, str) and (cmp := _comparison(v)) is not None:
            return cmp[0], (cmp[1],)
        raise ValueError("expected a number, a list of numbers, or a comparison like '>= 0.6'")
    if kind == "string":
        if v is None:
            return "absent", ()
        if isinstance(v, str | int | float) and not isinstance(v, bool):
            return "glob", (str(v),)
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return "glob", tuple(v)
        raise ValueError("expected a string (glob), a list of strings, or null")
    if isinstance(v, bool):
        return "nonempty", (v,)
    if isinstance(v, str) and (cmp := _comparison(v)) is not None:
        return cmp[0], (cmp[1],)
    if isinstance(v, str):
        return "glob", (v,)
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "glob", tuple(v)
    raise ValueError("expected a glob, a list of globs, true/false, or a size comparison")


def _format_path(path: Path) -> str:
    out = ""
    for p in path:
        if p == "<key>":
            continue
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "rules"


def parse_rules(
    data: Any,
    *,
    known_models: Iterable[str] | None = None,
    known_pools: Iterable[str] | None = None,
    _marks: Mapping[Path, tuple[int, int]] | None = None,
    _root: Path = ("rules",),
) -> list[Rule]:
    """Validate already-parsed rules (e.g. RouterConfig.rules); raise RuleError.

    With `known_models` / `known_pools`, `use` targets are checked too ("weak",
    "mid" and "strong" are always valid pool names).
    """
    parser = _Parser(_marks or {}, _root, known_models, known_pools)
    rules = parser.rules(data)
    if parser.problems:
        raise RuleError(parser.problems)
    return rules


def parse_rules_yaml(
    text: str,
    at: Sequence[str | int] = (),
    *,
    known_models: Iterable[str] | None = None,
    known_pools: Iterable[str] | None = None,
) -> list[Rule]:
    """Validate rules from YAML text, reporting problems by line and column.

    `at` locates the rules list inside the document: () when the text is the
    list itself, ("routers", 0, "rules") to validate a router's rules in place
    inside a whole config file, so errors point at the config's own lines.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "rules"
        raise RuleError([f"{where}: YAML syntax error: {getattr(err, 'problem', err)}"]) from None
    marks: dict[Path, tuple[int, int]] = {}
    if node is not None:
        _index_marks(node, (), marks)
    for step in at:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            raise RuleError([f"{_format_path(tuple(at))}: not found in the document"]) from None
    root = tuple(at) or ("rules",)
    if not at:  # re-key marks so paths start at the synthetic "rules" root
        marks = {("rules", *k): v for k, v in marks.items()}
    return parse_rules(
        data, known_models=known_models, known_pools=known_pools, _marks=marks, _root=root
    )


def _index_marks(node: yaml.Node, path: Path, out: dict[Path, tuple[int, int]]) -> None:
    """Record the 1-based (line, column) of every node, keyed by its data path."""
    out[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            out[(*path, key, "<key>")] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
            _index_marks(value_node, (*path, key), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_marks(item, (*path, i), out)
