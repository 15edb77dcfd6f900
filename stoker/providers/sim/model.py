"""Deterministic stand-ins for a model.

`RuleModel` (the default) calls a tool when tools are offered and the newest user text
is about what one does (by the tools' names and descriptions: `tool_match`), fills its
arguments from the user's words or else from the schema (always valid against it), and
answers in text once tool results come back. `ScriptedModel` plays a fixed list of
steps (from Python or a JSON script file) and can assert that all were used. Both see
the request the way a provider does: parsed back from the wire payload.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from stoker.errors import ConfigError
from stoker.providers.sim.schema_valid import satisfies
from stoker.providers.sim.schema_values import UnsatisfiableSchema, value_for
from stoker.providers.sim.tool_match import best_tool, named_tool
from stoker.wire.blocks import Block, TextBlock, ThinkingBlock, ToolUseBlock
from stoker.wire.messages import UserMessage
from stoker.wire.request import Request


class SimModel(Protocol):
    def respond(self, request: Request) -> tuple[Block, ...]: ...


def _last_fingerprints(request: Request) -> tuple[str, ...]:
    """The newest message's block fingerprints (none: a request of only a system prompt)."""
    return request.messages[-1].block_fingerprints if request.messages else ()


def _call_id(request: Request, name: str, index: int) -> str:
    seed = f"{len(request.messages)}|{_last_fingerprints(request)}|{name}|{index}"
    return "toolu_" + hashlib.sha256(seed.encode()).hexdigest()[:20]


def _thinking(request: Request) -> tuple[Block, ...]:
    if request.prefix.params.thinking_budget is None:
        return ()
    seed = "|".join(_last_fingerprints(request))
    signature = hashlib.sha256(seed.encode()).hexdigest()
    return (ThinkingBlock(thinking="Let me work out what is being asked.", signature=signature),)


def tool_call(
    request: Request, name: str, arguments: dict[str, Any], index: int = 0
) -> ToolUseBlock:
    """A tool call as a model would emit it (arguments with the usual ", " / ": " spacing)."""
    return ToolUseBlock(
        id=_call_id(request, name, index), name=name, input_json=json.dumps(arguments)
    )


_WORD = re.compile(r"[A-Za-z0-9_./-]+")
_QUOTED = re.compile(r"[\"'`]([^\"'`]+)[\"'`]")
_NUMBER = re.compile(r"-?\d+")


def _fill(schema: dict[str, Any], text: str, key: str) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "integer" or kind == "number":
        found = _NUMBER.search(text)
        return int(found.group()) if found else 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    quoted = _QUOTED.search(text)
    if quoted:
        return quoted.group(1)
    if key in ("path", "file", "filename", "name"):
        for word in _WORD.findall(text):
            if "." in word.strip("."):
                return word.strip(".")
    return text.strip()[:200]


def arguments_for(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """Arguments for every required property, filled from the user's words."""
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list):
        return {}
    return {
        str(key): _fill(sub if isinstance(sub := props.get(key, {}), dict) else {}, text, key)
        for key in required
    }


def valid_arguments(request: Request, schema: dict[str, Any], text: str) -> dict[str, Any] | None:
    """Arguments valid against `schema`: the user's words where they fit it
    (`arguments_for`), else values generated from it (`schema_values`, the user's words as
    the hint); None when the schema admits no object the generator can find."""
    if not isinstance(schema, dict) or not schema:
        schema = {"type": "object"}
    filled = arguments_for(schema, text)
    if satisfies(filled, schema, formats=True):
        return filled
    seed = "|".join(_last_fingerprints(request))
    try:
        generated = value_for(schema, seed=seed, hint=text)
    except UnsatisfiableSchema:
        return None
    valid = isinstance(generated, dict) and satisfies(generated, schema, formats=True)
    return generated if valid else None


def _match_tool(
    request: Request, text: str, *, named: bool
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The tool the user's words name (`named`), or else are about (`tool_match`), and
    its arguments; None when there is none."""
    specs = [json.loads(raw) for raw in request.prefix.tools]
    best = named_tool(specs, text) if named else best_tool(specs, text, named=False)
    if best is None:
        return None
    spec = specs[best]
    arguments = valid_arguments(request, spec.get("input_schema") or {}, text)
    return None if arguments is None else (spec, arguments)


def _asked_schema(text: str) -> dict[str, Any] | None:
    """The JSON schema the user's words ask the answer to follow, when they hold one
    (the object that comes after the words "JSON schema")."""
    at = text.rfind("JSON schema")
    start = text.find("{", at) if at >= 0 else -1
    if start < 0:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return schema if isinstance(schema, dict) else None


def json_answer(request: Request, text: str) -> TextBlock | None:
    """A JSON answer of the schema `text` asks for (None when it asks for none)."""
    schema = _asked_schema(text)
    if schema is None:
        return None
    seed = "|".join(_last_fingerprints(request))
    try:
        return TextBlock(text=json.dumps(value_for(schema, seed=seed, hint=text)))
    except UnsatisfiableSchema:
        return None


@dataclass(slots=True)
class RuleModel:
    """The default sim model: deterministic, tool-using when the words are about what a
    tool does, never creative. It answers with JSON when the user's words hold a JSON
    schema to follow (values generated from it), as a model follows such an instruction."""

    def respond(self, request: Request) -> tuple[Block, ...]:
        thinking = _thinking(request)
        if not request.messages:  # only a system prompt: nothing was asked yet
            return (*thinking, TextBlock(text="Understood."))
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.tool_results and not last.text:
            summary = "; ".join(r.content[:120] for r in last.tool_results)
            return (*thinking, TextBlock(text=f"Done. Tool results: {summary}"))
        text = last.text if isinstance(last, UserMessage) else ""
        prompt = last.prompt if isinstance(last, UserMessage) else ""
        tools = bool(request.prefix.tools) and request.prefix.params.tool_choice != "none"
        # A tool named outright comes first; an explicit JSON schema to follow comes
        # before a tool the words are merely about ("File a ticket" is no file tool),
        # which only the user's own words decide (`prompt`: not attachments or notes).
        found = _match_tool(request, text, named=True) if tools else None
        structured = json_answer(request, text) if text and found is None else None
        if structured is not None:
            return (*thinking, structured)
        if found is None and tools:
            found = _match_tool(request, prompt, named=False)
        if found is not None:
            spec, args = found
            return (*thinking, tool_call(request, spec["name"], args))
        return (*thinking, TextBlock(text=f"Understood: {text[:200]}" if text else "Understood."))


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One tool call in a script step."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Step = str | Call | Sequence[Call] | Callable[[Request], tuple[Block, ...]]


class ScriptedModel:
    """Plays `steps` in order, one per call: text, a tool call, parallel calls, or a function."""

    def __init__(self, steps: Sequence[Step], *, then: SimModel | None = None) -> None:
        """`then` answers once the steps are used up (default: fail, naming the problem)."""
        self._steps = list(steps)
        self._then = then
        self.calls = 0

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Steps from a JSON list of `{"text": ...}` or
        `{"tool_calls": [{"name": ..., "arguments": {...}}]}` objects."""
        try:
            raw = json.loads(Path(path).read_text())
            steps: list[Step] = []
            for item in raw:
                if "text" in item:
                    steps.append(str(item["text"]))
                else:
                    steps.append(
                        [
                            Call(name=c["name"], arguments=c.get("arguments", {}))
                            for c in item["tool_calls"]
                        ]
                    )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"model script {path} is not a JSON list of {{'text': ...}} or "
                f"{{'tool_calls': [{{'name': ..., 'arguments': {{...}}}}]}} steps: {exc}"
            ) from exc
        return cls(steps)

    def respond(self, request: Request) -> tuple[Block, ...]:
        if self.calls >= len(self._steps) and self._then is not None:
            return self._then.respond(request)
        if self.calls >= len(self._steps):
            raise ConfigError(
                f"the scripted model ran out of steps after {len(self._steps)} calls; "
                "add steps for the extra request"
            )
        step = self._steps[self.calls]
        self.calls += 1
        thinking = _thinking(request)
        if isinstance(step, str):
            return (*thinking, TextBlock(text=step))
        if isinstance(step, Call):
            return (*thinking, tool_call(request, step.name, step.arguments))
        if callable(step):
            return step(request)
        return (
            *thinking,
            *(tool_call(request, c.name, c.arguments, i) for i, c in enumerate(step)),
        )

    @property
    def remaining(self) -> int:
        return len(self._steps) - self.calls

    def assert_complete(self) -> None:
        """Fail when steps were left unused (the run ended earlier than the script expected)."""
        if self.remaining:
            raise AssertionError(f"{self.remaining} scripted step(s) were never requested")
