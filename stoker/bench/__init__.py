"""Standard workloads whose figures go into docs/benchmarks.md (no timing asserts in tests)."""
