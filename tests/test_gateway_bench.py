"""`stoker bench gateway`, small: it runs on loopback and reports nothing lost."""

from __future__ import annotations

from rich.console import Console

from stoker.bench.gateway import gateway_table, run_gateway_bench
from stoker.gateway.local import local_gateway


async def test_the_gateway_bench_runs_and_loses_nothing() -> None:
    with local_gateway() as (url, token):
        result = await run_gateway_bench(url, token, sessions=8, messages=3, time_limit=60)
    assert (result.sent, result.failed, result.lost, result.out_of_order) == (24, 0, 0, 0)
    assert len(result.overhead_ms) == 24
    assert len(result.unloaded_ms) > 0
    assert result.throughput > 0
    console = Console(width=120, record=True)
    console.print(gateway_table(result))
    assert "failed / lost / sessions out of order" in console.export_text()
