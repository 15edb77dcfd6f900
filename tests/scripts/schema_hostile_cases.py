"""Run in a child process by `tests/test_schema_hostile.py`: every deep or looping schema
and answer through every entry point that validates JSON, on the main thread and in a
thread with STACK bytes of stack (macOS gives threads 512 KiB). A validator that
overflows its native stack kills this process, and the test sees the signal instead of
its own run dying. Prints one JSON object: thread -> case -> entry point -> what it gave.

On a 512 KiB stack these cases are the bar, not every schema: jsonschema itself
overflows there on some deeper ones (2,763 nested `prefixItems` in `check_schema`).

    python tests/scripts/schema_hostile_cases.py STACK
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

from stoker.agent.output import Invalid, OutputSpec
from stoker.errors import ConfigError
from stoker.providers.sim.fulfil import schema_problem
from stoker.providers.sim.schema_valid import satisfies
from stoker.providers.sim.schema_values import UnsatisfiableSchema, value_for

DEEP = 100_000  # a Python dict this deep: no JSON text parses to one, a caller may pass it
CHAIN = 3_000  # `$ref`s in a row: jsonschema-rs 0.60 overflowed a 512 KiB stack here
ANSWER = 900  # an answer's nesting that `json.loads` still reads at its default limit


def nest(levels: int, wrap: Callable[[Any], Any], inner: Any) -> Any:
    for _ in range(levels):
        inner = wrap(inner)
    return inner


RECURSIVE = {
    "$defs": {
        "n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}
    },
    "$ref": "#/$defs/n",
}
CASES: dict[str, tuple[Any, Any]] = {  # name -> (schema, value)
    "schema nested 100k deep": (
        nest(DEEP, lambda s: {"type": "object", "properties": {"a": s}}, {}),
        {"a": 1},
    ),
    "anyOf nested 100k deep": (nest(DEEP, lambda s: {"anyOf": [s]}, {"type": "null"}), None),
    "self reference": ({"$ref": "#"}, 1),
    "self reference through allOf": ({"allOf": [{"$ref": "#"}]}, 1),
    "dynamic reference to itself": ({"$dynamicAnchor": "n", "$dynamicRef": "#n"}, 1),
    "reference chain": (
        {
            "$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(CHAIN)}
            | {f"d{CHAIN}": {"type": "integer"}},
            "$ref": "#/$defs/d0",
        },
        "x",
    ),
    "answer nested 900 deep": (RECURSIVE, nest(ANSWER, lambda v: [v], "x")),
    "value nested 100k deep": (RECURSIVE, nest(DEEP, lambda v: [v], "x")),
}


def outcome(call: Callable[[], Any]) -> str:
    """What a call gave, in words the test compares; an exception the entry point does
    not document comes back by name, and fails the test."""
    try:
        found = call()
    except (UnsatisfiableSchema, ConfigError) as exc:
        return type(exc).__name__
    except Exception as exc:
        return f"undocumented {type(exc).__name__}"
    return "Invalid" if isinstance(found, Invalid) else str(found)


def answer_text(value: Any) -> str:
    try:
        return json.dumps(value)
    except RecursionError:
        return "[" * DEEP  # no JSON text holds it; the answer is as deep as it can be
    except ValueError:
        return "null"


def run_cases() -> dict[str, dict[str, str]]:
    results: dict[str, dict[str, str]] = {}
    for name, (schema, value) in CASES.items():

        def validated(schema: Any = schema, value: Any = value) -> Any:
            found = OutputSpec.from_schema(schema).validate(answer_text(value))
            return found if isinstance(found, Invalid) else "a value"

        def problem(schema: Any = schema) -> str:
            return "no problem" if schema_problem(schema) is None else "a problem"

        def generated(schema: Any = schema) -> str:
            value_for(schema)
            return "a value"

        results[name] = {
            "satisfies": outcome(lambda s=schema, v=value: satisfies(v, s)),
            "satisfies with formats": outcome(
                lambda s=schema, v=value: satisfies(v, s, formats=True)
            ),
            "schema_problem": outcome(problem),
            "value_for": outcome(generated),
            "OutputSpec": outcome(validated),
        }
    return results


def main() -> None:
    stack = int(sys.argv[1])
    found: dict[str, Any] = {"main thread": run_cases()}
    threading.stack_size(stack)
    thread = threading.Thread(target=lambda: found.update({"small thread": run_cases()}))
    thread.start()
    thread.join()
    print(json.dumps(found))


if __name__ == "__main__":
    main()
