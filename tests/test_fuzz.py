"""The cache-invariant fuzzer, bounded: random sessions where every call must read the best
it could, no miss is an undeclared break, and every record's verdict agrees with a second
accountant that sees only the requests and the reported usage (see `stoker.bench.fuzz`)."""

from __future__ import annotations

from stoker.bench.fuzz import CacheMachine, fuzz_settings

TestCacheInvariants = CacheMachine.TestCase
TestCacheInvariants.settings = fuzz_settings(examples=20, derandomize=True)
