"""Typed results: a turn's answer as a validated value of the type the caller asked for.

The cache decides the mechanism (docs/provider-caching.md, "Structured output and the
cache"). Every provider keys its cache on a native output format: OpenAI among the
hidden settings ahead of the tools, Anthropic in the system prompt it adds for the
format. So a session's own output type (`Agent(output=Invoice)`) is native and frozen in
its prefix like its tools; a turn that asks for another type (`send(..., output=Other)`)
gets the schema as an instruction in its new user message, where volatile content goes,
and the answer is validated here. Either way a reply that does not validate goes back to
the model with what was wrong, up to `retries` times, then `OutputError`.

Types are anything pydantic's `TypeAdapter` takes: a Pydantic model, a dataclass, a
TypedDict, a list of them... `str` means plain text (no output type). A bare JSON schema
(`OutputSpec.from_schema`, a client's at the gateway) is checked by `jsonschema`, its
`$ref`s resolved within the schema only: one to a URL or a file is never fetched (a
client's schema must not make the server request an address), and checking an answer
that needs it is a `ConfigError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import jsonschema
import pydantic_core
import referencing
from pydantic import TypeAdapter, ValidationError
from referencing.exceptions import Unresolvable

from stoker.agent.loop import TurnResult
from stoker.errors import ConfigError, OutputError
from stoker.wire.output import NativeOutput

T = TypeVar("T")
_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class Invalid:
    """Why an answer did not validate: the first field at fault ("" for the whole value)."""

    field: str
    reason: str


@dataclass(frozen=True, slots=True)
class OutputSpec(Generic[T]):
    """An output type with its JSON schema and name, built once per type; or a bare JSON
    schema (a client's, at the gateway), whose answers are the JSON values it admits."""

    type_: Any
    adapter: TypeAdapter[T] | None = field(repr=False, compare=False)
    name: str
    schema: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_schema(cls, schema: dict[str, Any], name: str = "output") -> OutputSpec[Any]:
        """Answers valid against `schema` (checked to be a JSON Schema), as parsed JSON."""
        try:
            _validator_class(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"the output schema is not a JSON Schema: {exc.message}") from exc
        except RecursionError as exc:
            raise ConfigError("the output schema is nested too deeply to be checked") from exc
        clean = _NAME.sub("_", name)[:64] or "output"
        return cls(type_=dict, adapter=None, name=clean, schema=schema)

    @classmethod
    def of(cls, output: Any) -> OutputSpec[Any] | None:
        """The spec of `output` (a type, or a spec already); None for `str` (plain text)."""
        if isinstance(output, OutputSpec):
            return output
        if output is None or output is str:
            return None
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output)
            schema = adapter.json_schema()
        except Exception as exc:  # pydantic raises several kinds for a type it cannot take
            raise ConfigError(
                f"output={output!r} is no type Stoker can validate answers against (a "
                f"Pydantic model, a dataclass, a TypedDict, ...): {exc}"
            ) from exc
        name = _NAME.sub("_", getattr(output, "__name__", None) or "output")[:64] or "output"
        return cls(type_=output, adapter=adapter, name=name, schema=schema)

    def native(self, provider: str) -> NativeOutput:
        """The format this type is asked for natively on `provider`'s API. Anthropic takes
        a subset of JSON Schema: its SDK's `transform_schema` moves what it does not take
        into descriptions (the answer is still validated against the full type here)."""
        schema = self.schema
        if provider == "anthropic":
            import anthropic

            schema = dict(anthropic.transform_schema(schema))
        return NativeOutput(name=self.name, schema=schema)

    def instruction(self) -> str:
        """What a turn that asks for this type in its message says (prompt mode)."""
        schema = json.dumps(self.schema, ensure_ascii=False, separators=(",", ":"))
        return (
            f"Answer with only a JSON value of this JSON schema ({self.name}), with no other "
            f"text and no code fence: {schema}"
        )

    def validate(self, text: str) -> T | Invalid:
        """The answer as a value of the type, or why it is not one. `ConfigError` when a
        bare schema refers to what it does not hold (no answer could be checked)."""
        fenced = _FENCE.match(text)
        raw = fenced.group(1) if fenced else text.strip()
        if self.adapter is None:
            found: T | Invalid = self._validate_schema(raw)
            return found
        try:
            return self.adapter.validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            return Invalid(field=where, reason=str(first.get("msg", "invalid")))

    def _validate_schema(self, raw: str) -> Any:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return Invalid(field="", reason=f"not JSON: {exc}")
        cls = _validator_class(self.schema)
        validator = cls(self.schema, registry=referencing.Registry())  # retrieves nothing
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except Unresolvable as exc:
            raise ConfigError(
                f"the output schema's reference {_reference(exc)!r} cannot be resolved: "
                "Stoker resolves references within the schema only and fetches none; put "
                "the schema it names under $defs"
            ) from exc
        except RecursionError:  # an answer nested past Python's limit, or a $ref loop
            return Invalid(field="", reason="it is nested too deeply to be checked")
        if error is None:
            return value
        return Invalid(field=".".join(str(p) for p in error.absolute_path), reason=error.message)

    def correction(self, invalid: Invalid) -> str:
        """What the model is told when its answer did not validate."""
        where = f"field {invalid.field!r}" if invalid.field else "the answer"
        return (
            f"Your answer is not a valid {self.name}: {where}: {invalid.reason}. Answer "
            "again with only the corrected JSON value."
        )

    def failed(self, invalid: Invalid, text: str, retries: int) -> OutputError:
        return OutputError(
            self.name, field=invalid.field, reason=invalid.reason, text=text, retries=retries
        )


def _validator_class(schema: Any) -> type[jsonschema.protocols.Validator]:
    """The draft `$schema` names; 2020-12 for none or one jsonschema does not know (as
    the simulator reads it, `stoker.providers.sim.schema_valid`)."""
    found: type[jsonschema.protocols.Validator] = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    return found


def _reference(exc: Unresolvable) -> str:
    """The reference as written: a URL, `#/pointer` or `#anchor` (jsonschema wraps the
    error; its attributes are the wrapped one's)."""
    anchor = getattr(exc, "anchor", None)
    ref = f"{exc.ref}#{anchor}" if isinstance(anchor, str) else str(exc.ref)
    return (f"#{ref}" if ref.startswith("/") else ref)[:200]


def partial(text: str) -> Any:
    """The JSON in `text` as far as it has arrived (None while nothing parses)."""
    fenced = text.lstrip()
    if fenced.startswith("```"):
        fenced = fenced.split("\n", 1)[1] if "\n" in fenced else ""
    try:
        return pydantic_core.from_json(fenced, allow_partial=True)
    except ValueError:
        return None


async def validated(
    result: TurnResult[Any],
    spec: OutputSpec[Any],
    again: Callable[[str], Awaitable[TurnResult[Any]]],
    *,
    retries: int,
) -> TurnResult[Any]:
    """`result` with its answer as a value of `spec`. An answer that does not validate goes
    back to the model (`again`, a turn with the correction as its message) with what was
    wrong, up to `retries` times; then `OutputError`."""
    for attempt in range(retries + 1):
        found = spec.validate(result.text)
        if not isinstance(found, Invalid):
            return replace(result, output=found)
        if attempt == retries or result.exit != "answered":
            raise spec.failed(found, result.text, retries)
        more = await again(spec.correction(found))
        result = replace(
            more,
            iterations=result.iterations + more.iterations,
            records=(*result.records, *more.records),
        )
    raise AssertionError("unreachable")  # pragma: no cover
