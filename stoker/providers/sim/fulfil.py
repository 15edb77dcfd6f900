"""The contracts a real API keeps whatever its model says: a forced tool choice is always
answered with a tool call, a structured output is always JSON of the requested schema.

A real model uses judgement to fill them; the simulator does not pretend to. It keeps its
model's answer when that already keeps the contract (a scripted test decides the values),
and otherwise answers with values generated deterministically from the JSON schema
(`schema_values`), so the official SDKs' parse helpers and tool runners work against it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jsonschema

from stoker.errors import InvalidRequest
from stoker.providers.sim.asks import Ask, OutputFormat
from stoker.providers.sim.model import tool_call
from stoker.providers.sim.schema_valid import satisfies
from stoker.providers.sim.schema_values import UnsatisfiableSchema, value_for
from stoker.providers.sim.tool_match import best_tool
from stoker.wire.blocks import Block, TextBlock, ThinkingBlock, ToolUseBlock
from stoker.wire.messages import UserMessage
from stoker.wire.request import Request


def _seed(request: Request) -> str:
    last = request.messages[-1].block_fingerprints if request.messages else ()
    return hashlib.sha256(f"{len(request.messages)}|{last}".encode()).hexdigest()[:16]


def _hint(request: Request) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage) and message.text:
            return message.text
    return ""


def _thinking(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
    return tuple(b for b in blocks if isinstance(b, ThinkingBlock))


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a JSON Schema (the APIs refuse such a schema), or None."""
    try:
        return _schema_problem(json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError, RecursionError) as exc:
        return f"it cannot be read as JSON ({exc})"


@lru_cache(maxsize=256)
def _schema_problem(schema_json: str) -> str | None:
    schema = json.loads(schema_json)
    if not isinstance(schema, dict | bool):
        return "a schema is an object"
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"{exc.message} (at {where})"
    except RecursionError:
        return "it is nested too deeply"
    return None


def _generated(schema: Mapping[str, Any], request: Request, param: str) -> Any:
    """A value of `schema`; a 400 naming `param` when it is no JSON Schema or no value
    satisfies it (the API refuses such a schema before its model runs)."""
    problem = schema_problem(schema)
    if problem is not None:
        raise InvalidRequest(f"Invalid schema for {param}: {problem}", param=param)
    try:
        return value_for(schema, seed=_seed(request), hint=_hint(request))
    except UnsatisfiableSchema as exc:
        raise InvalidRequest(f"Invalid schema for {param}: {exc}", param=param) from exc


def _forced_call(blocks: tuple[Block, ...], ask: Ask, request: Request) -> tuple[Block, ...]:
    wanted = ask.forced_tool
    calls = tuple(
        b for b in blocks if isinstance(b, ToolUseBlock) and (not wanted or b.name == wanted)
    )
    if calls:
        return (*_thinking(blocks), *calls)
    specs = [json.loads(raw) for raw in request.prefix.tools]
    spec = next((s for s in specs if s.get("name") == wanted), specs[0]) if wanted else None
    if spec is None:
        spec = _matching(specs, _hint(request)) or specs[0]
    schema = spec.get("input_schema") or {"type": "object"}
    arguments = _generated(schema, request, f"tool {spec.get('name')!r}")
    return (*_thinking(blocks), tool_call(request, str(spec["name"]), arguments))


def _matching(specs: list[dict[str, Any]], hint: str) -> dict[str, Any] | None:
    """The first tool whose name the user's words mention, else the one they are about,
    as the rule model picks one (`tool_match`)."""
    words = hint.lower()
    named = next((s for s in specs if str(s.get("name", "")).lower() in words), None)
    if named is not None:
        return named
    best = best_tool(specs, hint)
    return None if best is None else specs[best]


def _structured(
    blocks: tuple[Block, ...], output: OutputFormat, request: Request
) -> tuple[Block, ...]:
    if any(isinstance(b, ToolUseBlock) for b in blocks):
        return blocks  # the model called a tool first; the format applies to its answer
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    try:
        given = json.loads(text)
    except (ValueError, RecursionError):
        given = _NOTHING
    if output.kind == "json_object":
        value = given if isinstance(given, dict) else {"answer": text}
    elif given is not _NOTHING and satisfies(given, output.schema or {}):
        return (*_thinking(blocks), TextBlock(text=text))
    else:
        value = _generated(output.schema or {}, request, "the output format")
    return (*_thinking(blocks), TextBlock(text=json.dumps(value, ensure_ascii=False)))


_NOTHING = object()


def fulfil(blocks: tuple[Block, ...], ask: Ask, request: Request) -> tuple[Block, ...]:
    """`blocks`, or in their place an answer that keeps the request's contract."""
    if ask.forced_tool is not None and request.prefix.tools:
        return _forced_call(blocks, ask, request)
    if ask.output is not None:
        return _structured(blocks, ask.output, request)
    return blocks
