"""The tool value and the `@tool` decorator.

A `Tool` is what the model sees (name, description, input schema) plus how to run it.
What the model sees is computed once, as canonical JSON bytes (`spec_bytes`), because
it is part of the request prefix: the same tool must be the same bytes in every
process, every turn and every fork. A tool has one name, the wire name, used in
schemas, history, policies and resume checks.

Schemas derived from functions carry no `title` keys: pydantic derives them from the
Python names, they repeat what the property names already say, cost prompt tokens, and
their spelling has changed across pydantic releases.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from stoker.errors import ToolError
from stoker.tools._schema import (
    ToolDocWarning,
    Validator,
    context_parameter,
    doc_problems,
    minimal_validator,
    parse_docstring,
    schema_from_function,
)
from stoker.tools.context import ToolContext
from stoker.wire.canonical import canonical_json

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What both Anthropic and OpenAI accept as a tool name."""
NAME_RULE = (
    "use 1 to 64 characters among letters, digits, '_' and '-' (it is the name the model "
    "sees and calls)"
)


def matching(
    name: object, pattern: re.Pattern[str], *, what: str, rule: str, error: type[Exception]
) -> str:
    """`name` if it is a string `pattern` matches whole, else `error` saying the `rule`:
    the one check behind tool and skill names, which differ only in their rules."""
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise error(f"invalid {what} {name!r}: {rule}")
    return name


def check_name(name: object) -> str:
    """Return `name` if providers accept it as a tool name, else raise ToolError."""
    return matching(name, NAME_PATTERN, what="tool name", rule=NAME_RULE, error=ToolError)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool as the model sees it, plus the callable that runs it.

    `concurrent` says the tool may run alongside other calls of the same response;
    `risky` says it needs approval, so runs that deny risky calls (background review)
    refuse it. `asks` makes some calls need approval, as `risky` makes all of them: a
    call whose validated arguments it holds true is asked about, or refused where risky
    calls are (a toolkit action gated behind approval, reached through `use_toolkit`).
    Equality ignores the callables: two tools are the same definition when they send
    the same bytes and have the same flags.

    `input_schema` is stored as its own canonical copy; treat it as read-only, since
    `spec_bytes` was computed from it once.
    """

    name: str
    description: str
    input_schema: dict[str, Any] = field(hash=False)
    fn: Callable[..., Any] = field(compare=False, repr=False)
    concurrent: bool = True
    risky: bool = False
    context_param: str | None = field(default=None, compare=False, repr=False)
    validator: Validator | None = field(default=None, compare=False, repr=False)
    asks: Callable[[Mapping[str, Any]], bool] | None = field(
        default=None, compare=False, repr=False
    )
    spec_bytes: bytes = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_name(self.name)
        if not isinstance(self.description, str):
            raise ToolError(f"tool {self.name}: description must be a str")
        if not isinstance(self.input_schema, dict) or self.input_schema.get("type") != "object":
            raise ToolError(
                f"tool {self.name}: input_schema must be a JSON schema object with "
                '"type": "object" (providers reject anything else)'
            )
        if not callable(self.fn):
            raise ToolError(f"tool {self.name}: fn must be callable, got {self.fn!r}")
        spec = {"name": self.name, "description": self.description}
        try:
            spec_bytes = canonical_json({**spec, "input_schema": self.input_schema})
        except (TypeError, ValueError) as exc:
            raise ToolError(f"tool {self.name}: input_schema is not plain JSON: {exc}") from exc
        schema = json.loads(spec_bytes)["input_schema"]
        if self.context_param is not None and self.context_param in schema.get("properties", {}):
            raise ToolError(
                f"tool {self.name}: {self.context_param!r} is both the context parameter "
                "and an argument in the schema; rename one"
            )
        object.__setattr__(self, "input_schema", schema)
        object.__setattr__(self, "spec_bytes", spec_bytes)
        if self.validator is None:
            object.__setattr__(self, "validator", minimal_validator(schema))

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        concurrent: bool = True,
        risky: bool = False,
    ) -> Tool:
        """A tool defined by a raw JSON schema (an MCP tool, a hand-written spec).

        `fn` is called with the model's arguments as keyword arguments (use
        `**arguments` for names that are not Python identifiers), plus the context if
        one parameter is annotated `ToolContext`. Arguments get a minimal check only:
        an object, required keys, closed objects, top-level property types.
        """
        return cls(
            name=name,
            description=description,
            input_schema=dict(input_schema),
            fn=fn,
            concurrent=concurrent,
            risky=risky,
            context_param=context_parameter(fn),
        )

    def needs_approval(self, arguments: Mapping[str, Any]) -> bool:
        """Whether this call (its validated arguments) needs someone's approval to run."""
        return self.risky or (self.asks is not None and self.asks(arguments))

    def validate_arguments(self, arguments: Any) -> dict[str, Any]:
        """Keyword arguments for `fn` from the model's parsed arguments.

        Raises ValueError (a subclass) with a one-line message meant for the model.
        """
        assert self.validator is not None  # set in __post_init__
        return self.validator(arguments)

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """Run the tool on validated arguments; sync functions run in a worker thread
        so a slow tool never blocks the event loop (and its concurrent siblings)."""
        kwargs = dict(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = context
        if inspect.iscoroutinefunction(self.fn):
            result = await self.fn(**kwargs)
        else:
            result = await asyncio.to_thread(self.fn, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    concurrent: bool = True,
    risky: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    concurrent: bool = True,
    risky: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a `Tool` from a typed function, sync or async; usable bare or with options.

    The schema comes from the type hints (through pydantic); the description from the
    docstring's first paragraph; each parameter's description from its entry in the
    docstring, in Google (`Args:`), Sphinx (`:param x:`), NumPy (`Parameters`) or Epydoc
    (`@param x:`) style. A docstring that describes some parameters but not all, names
    one the function does not have, or has a parameter section that cannot be read gives
    a `ToolDocWarning` naming the tool and the parameter. A parameter annotated
    `ToolContext` is injected at call time and left out of the schema. The function name
    is the wire name unless `name` is given.
    """

    def build(f: Callable[..., Any]) -> Tool:
        wire_name = check_name(name if name is not None else getattr(f, "__name__", ""))
        docs = parse_docstring(inspect.getdoc(f))
        schema, validator, context = schema_from_function(f, wire_name, docs.params)
        made = Tool(
            name=wire_name,
            description=docs.summary if description is None else description,
            input_schema=schema,
            fn=f,
            concurrent=concurrent,
            risky=risky,
            context_param=context,
            validator=validator,
        )
        for problem in doc_problems(wire_name, docs, list(schema["properties"]), context):
            _warn_at(f, problem)
        return made

    return build if fn is None else build(fn)


def _warn_at(fn: Callable[..., Any], message: str) -> None:
    """A ToolDocWarning pointing at the function's definition, wherever `@tool` ran."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        warnings.warn(message, ToolDocWarning, stacklevel=3)
        return
    warnings.warn_explicit(
        message,
        ToolDocWarning,
        code.co_filename,
        code.co_firstlineno,
        module=getattr(fn, "__module__", None),
    )
