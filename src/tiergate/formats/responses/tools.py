"""Responses API tools: which ones tiergate can serve, and how they map to functions.

The neutral model (and every upstream tiergate speaks) knows only function
tools. The Responses API has three more kinds of tool the *client* executes:

- `function`: maps one to one.
- `custom` (freeform input, optionally a Lark/regex grammar; Codex's
  `apply_patch`): served as a function with one string parameter `input`; the
  grammar goes into the description, as upstreams cannot enforce it. The call
  goes back to the client as a `custom_tool_call` with that `input`.
- `local_shell`: served as a function `local_shell` whose arguments are the
  exec action; the call goes back as a `local_shell_call`.
- `namespace` (a group of function/custom tools, e.g. Codex's
  `multi_agent_v1`): each member is served as `<namespace>__<name>`, and its
  calls go back with `name` and `namespace` apart again.

Hosted tools run inside OpenAI (web_search, file_search, code_interpreter,
image_generation, computer_use_preview, remote mcp) and any tool type this
module does not know: dropped, so a request that lists them is still served,
just without that tool (docs/conversion.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tiergate.core.model import ToolCall, ToolSpec
from tiergate.formats import (
    arguments_object,
    dumps,
    expect_dict,
    expect_list,
    expect_str,
    opt_bool,
    opt_dict,
    opt_str,
)
from tiergate.formats.errors import FormatError

ToolKind = Literal["function", "custom", "local_shell"]

LOCAL_SHELL = "local_shell"

_CUSTOM_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The tool's freeform input"}},
    "required": ["input"],
    "additionalProperties": False,
}
_LOCAL_SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}},
        "working_directory": {"type": "string"},
        "timeout_ms": {"type": "integer"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["command"],
}
_LOCAL_SHELL_DESCRIPTION = (
    'Run a command on the user\'s machine. `command` is the argv list, e.g. ["bash", "-lc", "ls"].'
)
_TOOL_CHOICES = frozenset({"auto", "none", "required"})


@dataclass(frozen=True, slots=True)
class ToolRoute:
    """What a neutral tool name is to the client: its kind, name and namespace."""

    kind: ToolKind
    name: str
    namespace: str | None = None


FUNCTION = ToolRoute("function", "")  # a call to a tool the request did not declare


def neutral_name(name: str, namespace: str | None) -> str:
    return f"{namespace}__{name}" if namespace else name


def parse_tools(raw: Any) -> tuple[list[ToolSpec], dict[str, ToolRoute], list[dict[str, Any]]]:
    """(neutral tools, each one's route by neutral name, the accepted definitions as sent)."""
    if raw is None:
        return [], {}, []
    specs: list[ToolSpec] = []
    routes: dict[str, ToolRoute] = {}
    accepted: list[dict[str, Any]] = []
    for i, item in enumerate(expect_list(raw, "tools")):
        path = f"tools[{i}]"
        t = expect_dict(item, path)
        if expect_str(t.get("type"), f"{path}.type") == "namespace":
            namespace = expect_str(t.get("name"), f"{path}.name")
            about = opt_str(t.get("description"), f"{path}.description") or ""
            members = expect_list(t.get("tools"), f"{path}.tools")
            found = [
                _tool(m, f"{path}.tools[{j}]", namespace, about) for j, m in enumerate(members)
            ]
            kept = [m for m, f in zip(members, found, strict=True) if f is not None]
            echo = {**t, "tools": kept}  # the Response lists what was served
        else:
            found, echo = [_tool(t, path, None, "")], t
        served = [f for f in found if f is not None]
        for spec, route in served:
            specs.append(spec)
            routes[spec.name] = route
        if served:
            accepted.append(echo)
    return specs, routes, accepted


def _tool(
    raw: Any, path: str, namespace: str | None, about: str
) -> tuple[ToolSpec, ToolRoute] | None:
    t = expect_dict(raw, path)
    kind: ToolKind
    declared = expect_str(t.get("type"), f"{path}.type")
    if declared == "function":
        kind = "function"
        spec = ToolSpec(
            name=expect_str(t.get("name"), f"{path}.name"),
            description=opt_str(t.get("description"), f"{path}.description") or "",
            parameters=opt_dict(t.get("parameters"), f"{path}.parameters") or {},
            strict=opt_bool(t.get("strict"), f"{path}.strict"),
        )
    elif declared == "custom":
        kind = "custom"
        spec = _custom_tool(t, path)
    elif declared == LOCAL_SHELL and namespace is None:
        kind = "local_shell"
        spec = ToolSpec(LOCAL_SHELL, _LOCAL_SHELL_DESCRIPTION, _LOCAL_SHELL_PARAMETERS)
    else:
        return None  # a hosted tool (web_search, file_search, mcp, ...) or an unknown one
    route = ToolRoute(kind, spec.name, namespace)
    if namespace:
        spec.name = neutral_name(spec.name, namespace)
        if about:
            spec.description = f"({namespace}: {about}) {spec.description}".strip()
    return spec, route


def _custom_tool(t: dict[str, Any], path: str) -> ToolSpec:
    description = opt_str(t.get("description"), f"{path}.description") or ""
    fmt = opt_dict(t.get("format"), f"{path}.format") or {}
    syntax = opt_str(fmt.get("syntax"), f"{path}.format.syntax") or "lark"
    definition = opt_str(fmt.get("definition"), f"{path}.format.definition") or ""
    if fmt.get("type") == "grammar":
        description += (
            f"\n\nPut the whole input in `input`; it must match this {syntax} grammar:\n"
            f"{definition}"
        )
    return ToolSpec(
        name=expect_str(t.get("name"), f"{path}.name"),
        description=description.strip(),
        parameters=_CUSTOM_PARAMETERS,
    )


def parse_tool_choice(
    raw: Any, tools: list[ToolSpec]
) -> tuple[str | dict[str, Any] | None, list[ToolSpec]]:
    """(neutral tool_choice, tools left offered): `allowed_tools` narrows the list."""
    if raw is None:
        return None, tools
    if isinstance(raw, str):
        if raw not in _TOOL_CHOICES:
            raise FormatError("must be auto, none, required or a tool", "tool_choice")
        return raw, tools
    choice = expect_dict(raw, "tool_choice")
    kind = expect_str(choice.get("type"), "tool_choice.type")
    if kind in ("function", "custom"):
        name = expect_str(choice.get("name"), "tool_choice.name")
        namespace = opt_str(choice.get("namespace"), "tool_choice.namespace")
        return {"type": "tool", "name": neutral_name(name, namespace)}, tools
    if kind == LOCAL_SHELL:
        return {"type": "tool", "name": LOCAL_SHELL}, tools
    if kind == "allowed_tools":
        mode = choice.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise FormatError("must be auto or required", "tool_choice.mode")
        allowed = expect_list(choice.get("tools"), "tool_choice.tools")
        names = {
            LOCAL_SHELL
            if t.get("type") == LOCAL_SHELL
            else neutral_name(str(t.get("name")), t.get("namespace"))
            for t in (expect_dict(a, "tool_choice.tools[]") for a in allowed)
        }
        return mode, [t for t in tools if t.name in names]
    return None, tools  # a hosted tool, which was dropped: let the model choose


# ---- tool calls in the conversation (input items) -------------------------------


def call_from_item(item: dict[str, Any], path: str) -> ToolCall:
    """A `function_call`, `custom_tool_call` or `local_shell_call` input item as a call."""
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        name = neutral_name(
            expect_str(item.get("name"), f"{path}.name"),
            opt_str(item.get("namespace"), f"{path}.namespace"),
        )
        if kind == "custom_tool_call":
            args: Any = dumps({"input": expect_str(item.get("input"), f"{path}.input")})
        else:
            args = item.get("arguments", "")
            if isinstance(args, dict):  # lenient clients send the object itself
                args = dumps(args)
        return ToolCall(
            id=expect_str(item.get("call_id"), f"{path}.call_id"),
            name=name,
            arguments=expect_str(args, f"{path}.arguments"),
        )
    # local_shell_call: the Responses API names the call by call_id (or, in older
    # clients, by its item id)
    call_id = opt_str(item.get("call_id"), f"{path}.call_id") or item.get("id")
    action = {k: v for k, v in (opt_dict(item.get("action"), f"{path}.action") or {}).items()}
    action.pop("type", None)
    return ToolCall(
        id=expect_str(call_id, f"{path}.call_id"),
        name=LOCAL_SHELL,
        arguments=dumps(action),
    )


# ---- tool calls in a reply (output items) ---------------------------------------


def call_item(call: ToolCall, route: ToolRoute, item_id: str, status: str) -> dict[str, Any]:
    """The output item for a call the model made, in the kind of tool it called."""
    kind = route.kind
    name = route.name or call.name
    if kind == "custom":
        args = arguments_object(call.arguments)
        text = args.get("input")
        item: dict[str, Any] = {
            "type": "custom_tool_call",
            "id": item_id,
            "call_id": call.id,
            "name": name,
            "input": text if isinstance(text, str) else call.arguments,
            "status": status,
        }
    elif kind == LOCAL_SHELL:
        action = {"type": "exec", "command": [], **arguments_object(call.arguments)}
        action.setdefault("timeout_ms", None)
        action.setdefault("working_directory", None)
        action.setdefault("env", {})
        action.setdefault("user", None)
        return {
            "type": "local_shell_call",
            "id": item_id,
            "call_id": call.id,
            "action": action,
            "status": status,
        }
    else:
        item = {
            "type": "function_call",
            "id": item_id,
            "call_id": call.id,
            "name": name,
            "arguments": call.arguments,
            "status": status,
        }
    if route.namespace:
        item["namespace"] = route.namespace
    return item
