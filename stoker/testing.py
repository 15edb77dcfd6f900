"""Public test helpers: the scripted sim model, a frozen clock, and the cache-break check.

Use them in your own suite the way Stoker uses them in its own: every provider call made
while `observe_records` is active is collected, and `assert_no_undeclared_breaks` fails
on any call whose prefix moved without a declared rebase.
"""

from __future__ import annotations

from collections.abc import Iterable

from stoker.cache.record import observe_records
from stoker.clock import FrozenClock
from stoker.providers.sim.model import Call, RuleModel, ScriptedModel
from stoker.wire.record import CacheRecord

__all__ = [
    "Call",
    "FrozenClock",
    "RuleModel",
    "ScriptedModel",
    "assert_no_undeclared_breaks",
    "observe_records",
]


def assert_no_undeclared_breaks(records: Iterable[CacheRecord]) -> None:
    """Fail, naming each one, if any call's prefix diverged without a declared reason."""
    breaks = [r for r in records if r.explanation.is_break and not r.declared_break]
    if breaks:
        lines = "\n".join(f"  {r.session_id} call {r.seq}: {r.explanation}" for r in breaks)
        raise AssertionError(
            f"{len(breaks)} undeclared cache break(s):\n{lines}\n"
            "Fix the code that moved the prefix, or declare the break with session.rebase(...) "
            "(in a test that does it on purpose: @pytest.mark.breaks_cache(reason=...))."
        )
