"""DispatchPolicy: narrowing never widens; the context variable is scoped."""

from __future__ import annotations

import pytest

from stoker.errors import ToolError
from stoker.tools import ALLOW_ALL, DispatchPolicy, Tool, current_policy, use_policy


def test_narrow_never_widens() -> None:
    base = DispatchPolicy(allowed=frozenset({"read", "search"}), reason="review")
    assert base.narrow(["read", "write"]) == DispatchPolicy(
        allowed=frozenset({"read"}), reason="review"
    )
    assert base.narrow(["write"]).allowed == frozenset()
    assert ALLOW_ALL.narrow(["read"]).allowed == frozenset({"read"})
    assert base.narrow(["read"], reason="fork").reason == "fork"


def test_narrow_to_intersects_two_policies() -> None:
    parent = DispatchPolicy(allowed=frozenset({"a", "b"}), deny_risky=True, reason="parent")
    assert parent.narrow_to(DispatchPolicy(allowed=frozenset({"b", "c"}))) == DispatchPolicy(
        allowed=frozenset({"b"}), deny_risky=True, reason="parent"
    )
    assert ALLOW_ALL.narrow_to(parent) == parent
    assert parent.narrow_to(ALLOW_ALL) == parent


def test_denial_messages() -> None:
    risky = Tool.from_schema("add_note", "d", {"type": "object"}, lambda: "", risky=True)
    policy = DispatchPolicy(allowed=frozenset({"read"}), reason="background review")
    assert policy.denial(risky) == ("tool add_note is not allowed in this run: background review")
    assert DispatchPolicy(deny_risky=True).denial(risky) == (
        "tool add_note needs approval and this run denies risky tools"
    )
    assert ALLOW_ALL.denial(risky) is None


def test_allowed_accepts_any_collection_but_not_a_string() -> None:
    assert DispatchPolicy(allowed={"a"}).allowed == frozenset({"a"})  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="not the string"):
        DispatchPolicy(allowed="read")  # type: ignore[arg-type]


def _fail_inside(policy: DispatchPolicy) -> None:
    with use_policy(policy):
        raise RuntimeError(current_policy().reason)


def test_use_policy_restores_the_previous_policy() -> None:
    outer = DispatchPolicy(allowed=frozenset({"a"}))
    inner = DispatchPolicy(allowed=frozenset(), reason="inner")
    assert current_policy() is ALLOW_ALL
    with use_policy(outer):
        assert current_policy() is outer
        with pytest.raises(RuntimeError, match="inner"):
            _fail_inside(inner)
        assert current_policy() is outer
    assert current_policy() is ALLOW_ALL
