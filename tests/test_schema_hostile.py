"""JSON schemas that a gateway client, a tool's author or a model controls reach the JSON
Schema validator through the simulator (`satisfies`, `schema_problem`, `value_for`) and
typed output (`OutputSpec`). Whatever they hold, each entry point ends in an answer or in
its documented error: never a fetch, never a crash of the process, never an exception
it does not document.

Any validator Stoker uses must pass these. jsonschema-rs 0.60 did not (issue 38): on the
main thread, checking a value nested 100,000 deep against a recursive schema, or a
schema of 60,000 `$ref`s in a row, overflowed its native stack (a segmentation fault,
where jsonschema raises RecursionError); on a 512 KiB thread, so did a 900-deep answer
and a chain of 3,000 `$ref`s."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.agent.output import Invalid, OutputSpec
from stoker.errors import ConfigError
from stoker.providers.sim.fulfil import schema_problem
from stoker.providers.sim.schema_valid import satisfies
from stoker.providers.sim.schema_values import UnsatisfiableSchema, value_for

ROOT = Path(__file__).resolve().parents[1]
THREAD_STACK = 512 * 1024  # what macOS gives a thread that is not the main one

# --- references are resolved within the schema, never fetched ---


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback server that answers every GET with `{"type": "integer"}`, and the paths
    it was asked for: a validator that fetched a reference would find it there."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def remote_schemas(url: str, integer_file: Path) -> dict[str, Any]:
    """Schemas that admit an integer only if the validator fetches what they refer to."""
    return {
        "absolute URL": {"$ref": f"{url}/integer.json"},
        "URL below a property": {
            "type": "object",
            "properties": {"n": {"$ref": f"{url}/integer.json"}},
        },
        "relative to a remote $id": {"$id": f"{url}/root.json", "$ref": "integer.json"},
        "file": {"$ref": integer_file.as_uri()},
        "remote $schema": {"$schema": f"{url}/meta.json", "$ref": f"{url}/integer.json"},
    }


def test_remote_references_are_never_fetched(
    schema_server: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, asked = schema_server
    integer_file = tmp_path / "integer.json"
    integer_file.write_text('{"type": "integer"}')
    for name, schema in remote_schemas(url, integer_file).items():
        value = {"n": 1} if "property" in name else 1
        assert not satisfies(value, schema), name
        assert not satisfies(value, schema, formats=True), name
        assert schema_problem(schema) is None, name  # a reference is checked when used
        with contextlib.suppress(UnsatisfiableSchema):  # the generator resolves "#..." only
            value_for(schema)
        with pytest.raises(ConfigError, match="fetches none"):
            OutputSpec.from_schema(schema).validate(json.dumps(value))
    assert asked == []


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        ({"$ref": "#/$defs/missing"}, "'#/$defs/missing'"),
        ({"properties": {"a": {"$ref": "#/$defs/x~1y"}}}, "'#/$defs/x~1y'"),
        ({"$dynamicRef": "#nowhere"}, "'#nowhere'"),
        ({"$ref": "other.json#/a"}, "'other.json#/a'"),
    ],
)
def test_an_output_schema_referring_to_what_it_does_not_hold_is_a_config_error(
    schema: dict[str, Any], named: str
) -> None:
    """The schema is at fault, not the answer: no retry could fix it (a 400 at the
    gateway, where a client's schema comes from)."""
    with pytest.raises(ConfigError) as raised:
        OutputSpec.from_schema(schema).validate('{"a": 1}')
    assert str(raised.value) == (
        f"the output schema's reference {named} cannot be resolved: Stoker resolves "
        "references within the schema only and fetches none; put the schema it names "
        "under $defs"
    )


def test_an_output_schema_with_an_unknown_dialect_is_read_as_2020_12() -> None:
    """As the simulator reads it; jsonschema would warn that it will refuse it some day."""
    spec = OutputSpec.from_schema({"$schema": "https://example.com/custom", "type": "integer"})
    assert spec.validate("1") == 1
    assert spec.validate('"x"') == Invalid(field="", reason="'x' is not of type 'integer'")


# --- deep and looping schemas and answers end in an answer ---

DOCUMENTED = {  # what each entry point may give for a schema it cannot use
    "satisfies": {"True", "False"},
    "satisfies with formats": {"True", "False"},
    "schema_problem": {"no problem", "a problem"},
    "value_for": {"a value", "UnsatisfiableSchema"},
    "OutputSpec": {"a value", "Invalid", "ConfigError"},
}


@pytest.mark.slow
def test_deep_and_looping_schemas_never_crash_the_process() -> None:
    """Each case through each entry point, in a child process, on the main thread and on
    a 512 KiB thread: a native stack overflow would kill the child, not this run. A
    case may be beyond what the validator can decide (jsonschema calls `{"$ref": "#"}`
    too deep to check), never beyond an answer."""
    done = subprocess.run(
        [sys.executable, "tests/scripts/schema_hostile_cases.py", str(THREAD_STACK)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    found = json.loads(done.stdout)
    assert found["small thread"] == found["main thread"]
    for case, outcomes in found["main thread"].items():
        for entry, outcome in outcomes.items():
            assert outcome in DOCUMENTED[entry], (case, entry, outcome)
    wrong = found["main thread"]
    for case in ("reference chain", "answer nested 900 deep", "value nested 100k deep"):
        assert wrong[case]["satisfies"] == "False"  # "x" is no integer, however deep
        assert wrong[case]["OutputSpec"] == "Invalid"
    for case in ("schema nested 100k deep", "anyOf nested 100k deep"):
        assert wrong[case]["schema_problem"] == "a problem"
        assert wrong[case]["OutputSpec"] == "ConfigError"


WRAPS = {
    "properties": lambda s: {"type": "object", "properties": {"a": s}},
    "required": lambda s: {"type": "object", "properties": {"a": s}, "required": ["a"]},
    "items": lambda s: {"type": "array", "items": s},
    "prefixItems": lambda s: {"prefixItems": [s]},
    "additionalProperties": lambda s: {"additionalProperties": s},
    "anyOf": lambda s: {"anyOf": [s, {"type": "null"}]},
    "oneOf": lambda s: {"oneOf": [s]},
    "allOf": lambda s: {"allOf": [s]},
    "not": lambda s: {"not": s},
    "if": lambda s: {"if": {"type": "object"}, "then": s},  # not s twice: 2**depth checks
    "$defs": lambda s: {"$defs": {"d": s}, "$ref": "#/$defs/d"},
}
LEAVES = [{}, True, False, {"type": "integer"}, {"$ref": "#"}, {"pattern": "(a+)+$"}]


@st.composite
def nested(draw: st.DrawFn) -> tuple[Any, Any]:
    """A schema of wrappers nested up to 3,000 deep around a leaf, and a value nested
    alike (objects and arrays, up to 3,000 deep)."""
    kinds = draw(st.lists(st.sampled_from(sorted(WRAPS)), min_size=1, max_size=4))
    depth = draw(st.integers(1, 3_000))
    schema: Any = draw(st.sampled_from(LEAVES))
    for level in range(depth):
        schema = WRAPS[kinds[level % len(kinds)]](schema)
    value: Any = draw(st.sampled_from([1, "a", None, []]))
    for level in range(draw(st.integers(0, 3_000))):
        value = {"a": value} if level % 2 else [value]
    return schema, value


def every_entry_point(schema: Any, value: Any) -> None:
    assert isinstance(satisfies(value, schema), bool)
    assert isinstance(satisfies(value, schema, formats=True), bool)
    problem = schema_problem(schema)
    assert problem is None or isinstance(problem, str)
    with contextlib.suppress(UnsatisfiableSchema):
        value_for(schema)
    try:
        spec = OutputSpec.from_schema(schema)
    except ConfigError:
        return
    try:
        text = json.dumps(value)
    except RecursionError:
        text = "[" * 3_000
    with contextlib.suppress(ConfigError):
        spec.validate(text)


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(nested())
def test_generated_nested_schemas_end_in_an_answer(case: tuple[Any, Any]) -> None:
    """On this thread (the main one's 8 MiB stack, as xdist's workers run tests). Not on
    a 512 KiB thread: there jsonschema itself overflows on some of these (2,763 nested
    `prefixItems` in `check_schema`, inside rpds-py), so a small stack is held to the
    fixed cases of the test above."""
    schema, value = case
    started = time.perf_counter()
    every_entry_point(schema, value)
    assert time.perf_counter() - started < 20
