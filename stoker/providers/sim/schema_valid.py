"""Whether a value is valid against a JSON schema, by `jsonschema` (what a client's own
validation uses): the last word on any value the simulator answers with, generated or
filled from the user's words."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jsonschema


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
    return cls(schema, format_checker=cls.FORMAT_CHECKER if formats else None)


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
    except (jsonschema.exceptions.RefResolutionError, RecursionError, ValueError):
        return False
