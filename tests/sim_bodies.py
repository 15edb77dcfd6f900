"""Hostile bodies for the simulator's provider APIs, drawn by hypothesis (no tests here):
a rich, valid request broken the ways a client breaks it."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.hostile_http import (
    deep_values,
    encode,
    escaped_surrogates,
    huge_numbers,
    json_values,
    paths,
    removed,
    replaced,
)

# What a field of a provider API's body may be replaced by: the simulator must answer each
# with a 2xx or a 4xx in the API's own error shape.
sim_odd_values = json_values | huge_numbers | deep_values | escaped_surrogates


@st.composite
def broken(
    draw: st.DrawFn,
    good: dict[str, Any],
    actions: tuple[str, ...] = ("replace", "remove", "stream"),
) -> bytes:
    """`good` broken in one to three places, or not JSON at all: a step replaces a field,
    removes it or (where `actions` has "stream") asks for the answer streamed."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=100))
    body: Any = good
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(list(paths(body))))
        action = draw(st.sampled_from(actions))
        if action == "remove" and where:
            body = removed(body, where)
        elif action == "stream" and isinstance(body, dict):
            body = {**body, "stream": True}
        else:
            body = replaced(body, where, draw(sim_odd_values))
    return encode(body)
