"""Standard workloads whose figures go into the README (no timing asserts in tests)."""
