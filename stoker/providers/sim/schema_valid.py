"""Whether a value is valid against a JSON schema, by `jsonschema` (what a client's own
validation uses): the last word on any value the simulator answers with, generated or
filled from the user's words.

References resolve within the schema (and to the JSON Schema meta-schemas) only: the
validators get a `referencing.Registry` that retrieves nothing, so a `$ref` to a URL or a
file is never fetched (jsonschema's default still fetches one, a deprecated behaviour),
and a value checked against it is not valid.

jsonschema-rs (one wheel where jsonschema brings five distributions) was weighed and not
taken (issue 38): on deep or long-referencing input it overflows its native stack and
kills the process where jsonschema raises RecursionError. `tests/test_schema_hostile.py`
holds the cases any replacement must pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jsonschema
import referencing
from referencing.exceptions import Unresolvable


@lru_cache(maxsize=256)
def _validator(schema_json: str, formats: bool) -> jsonschema.protocols.Validator | None:
    """A validator for a schema; None when the schema itself is not one a validator takes
    (the answer is then generated, which never needs it)."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    checker = cls.FORMAT_CHECKER if formats else None
    return cls(schema, format_checker=checker, registry=referencing.Registry())


def satisfies(value: Any, schema: Mapping[str, Any], *, formats: bool = False) -> bool:
    """Whether `value` is valid against `schema`; with `formats`, its `format`s are
    checked too (as pydantic and a careful tool runner check an email or a UUID)."""
    try:
        validator = _validator(json.dumps(schema, sort_keys=True), formats)
    except (TypeError, ValueError, RecursionError):
        return False
    if validator is None:
        return False
    try:
        return bool(validator.is_valid(value))
    except (Unresolvable, RecursionError, ValueError):
        return False
