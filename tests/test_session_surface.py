"""`Session` is the only thing that changes a session: its public surface is the short
list in its docstring, nothing can be assigned from outside, and no module reaches into
another object's private members (ruff's SLF001 runs in the lint)."""

from __future__ import annotations

import re

import pytest

from stoker.agent.session import Session
from tests.helpers import make_registry, sim_agent


def _documented() -> set[str]:
    """Names from the docstring block: lines of comma-separated `name` or `name(...)`."""
    block = (Session.__doc__ or "").split("Public surface", 1)[1].split(":", 1)[1]
    names = set()
    for line in block.strip().split("\n\n")[0].splitlines():
        for item in re.sub(r"\([^)]*\)", "", line).split(","):
            found = re.match(r"\s*(?:Session\.)?([a-z_]+)", item)
            assert found, f"cannot read {item!r} in the Session docstring"
            names.add(found.group(1))
    return names


def test_the_public_surface_is_the_documented_one_and_short() -> None:
    public = {n for n in dir(Session) if not n.startswith("_")}
    assert public == _documented()
    assert len(public) <= 19  # a turn three ways (stream, send, send_sync) and no more


def test_nothing_can_be_assigned_to_a_session() -> None:
    agent, _ = sim_agent(registry=make_registry())
    session = agent.session()
    assert not hasattr(session, "__dict__")
    for name in {n for n in dir(Session) if not n.startswith("_")}:
        with pytest.raises(AttributeError):
            setattr(session, name, None)
    with pytest.raises(AttributeError):
        session.anything_new = 1  # type: ignore[attr-defined]
