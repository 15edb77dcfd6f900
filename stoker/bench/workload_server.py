"""`python -m stoker.bench.workload_server PORT`: the simulator serving the benchmarks'
workload model over HTTP, as a process of its own (`stoker bench proxy` measures a
proxy process in front of it)."""

from __future__ import annotations

import sys

from stoker.bench.cache import WorkloadModel
from stoker.http_server import run
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.server import create_app


def main(port: int) -> None:
    app = create_app(SimEngine(model=WorkloadModel()))
    run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


if __name__ == "__main__":
    main(int(sys.argv[1]))
