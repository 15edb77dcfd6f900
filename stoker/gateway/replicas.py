"""Several `stoker serve` processes on one database, for the replica tests and benchmark.

Each replica is a real child process with its own config file, port and log, as a
deployment runs them behind a load balancer: they share nothing but the database and the
provider. A replica can be killed (SIGKILL, as a crashed host), stopped (SIGTERM, as an
orchestrator does) and started again on the same port. The environment is the caller's
to give; every STOKER_* variable is dropped so the config file written here decides.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from stoker.gateway.auth import token_digest
from stoker.gateway.local import free_port, wait_ready

# Long enough to pass every model's minimum cacheable prefix, so a replica switch shows
# whether the next turn read the cache or wrote it again.
STANDING_ORDERS = " ".join(
    f"Rule {i}: answer the user plainly, keep every promise made in earlier turns, and "
    "say so when a question cannot be answered from what the conversation holds."
    for i in range(1, 81)
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSettings:
    """What every replica of a test or benchmark deployment is configured with."""

    database: str  # a postgresql:// URL
    upstream: str  # an Anthropic-shaped provider's base URL (`stoker sim serve`)
    users: Mapping[str, str]  # user -> bearer token
    grace_seconds: float = 5.0
    wait_seconds: float = 2.0  # how long a request waits for the database before a 503
    pool_size: int = 4
    keep_warm: bool = False
    system: str = ""  # the agent's system prompt; "": `STANDING_ORDERS`
    env: Mapping[str, str] = field(default_factory=dict)


class Replica:
    """One gateway process; `start` again after `kill` or `stop` reuses its port."""

    def __init__(self, name: str, folder: Path, settings: ReplicaSettings) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"{name}.log"
        self.config = folder / f"{name}.toml"
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[str] | None = None
        users = "".join(
            f'[[users]]\nid = "{user}"\ntoken_sha256 = "{token_digest(token)}"\n'
            for user, token in settings.users.items()
        )
        self.config.write_text(
            f'host = "127.0.0.1"\nport = {self.port}\ndatabase = "{settings.database}"\n'
            f'[agent]\nprovider = "anthropic"\nbase_url = "{settings.upstream}"\n'
            f'system = """{settings.system or STANDING_ORDERS}"""\n'
            f"[keep_warm]\nenabled = {str(settings.keep_warm).lower()}\n"
            f"[store]\npool_size = {settings.pool_size}\n"
            f"wait_seconds = {settings.wait_seconds}\n"
            f"[lifecycle]\ngrace_seconds = {settings.grace_seconds}\n{users}",
            encoding="utf-8",
        )

    def start(self, *, timeout: float = 30.0) -> None:
        """Start the process and wait until it is ready (its store answers)."""
        self.launch()
        self.ready(timeout)

    def launch(self) -> None:
        env = {k: v for k, v in self.settings.env.items() if not k.startswith("STOKER_")}
        env.setdefault("ANTHROPIC_API_KEY", "sk-replica-test")
        self._log = self.log.open("a")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stoker",
                "serve",
                "-c",
                str(self.config),
                "--log-level",
                "error",
            ],
            stdout=self._log,
            stderr=self._log,
            env=env,
        )

    def ready(self, timeout: float = 30.0) -> None:
        """Wait until `/readyz` answers 200: the store answers and its schema is current."""
        assert self.process is not None
        wait_ready(self.url, self.process, self.log, timeout, probe="/readyz")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown at all, as when its host dies."""
        self._signal(signal.SIGKILL)
        self.wait(10)

    def stop(self) -> None:
        """SIGTERM: the orchestrator's stop; returns at once (see `wait`)."""
        self._signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        """The exit code. After SIGTERM a clean shutdown ends as uvicorn ends it: by
        re-raising the signal once the app has shut down (-15), or 0."""
        assert self.process is not None
        code = self.process.wait(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def _signal(self, signum: int) -> None:
        if self.running:
            assert self.process is not None
            os.kill(self.process.pid, signum)

    def close(self) -> None:
        if self.running:
            self.stop()
            try:
                self.wait(self.settings.grace_seconds * 2 + 10)
            except subprocess.TimeoutExpired:
                self.kill()
        elif self._log is not None:
            self._log.close()
            self._log = None


@contextmanager
def replicas(count: int, folder: Path, settings: ReplicaSettings) -> Iterator[list[Replica]]:
    """`count` started replicas (started together, as a deployment rolls out), stopped
    when the block ends."""
    with ExitStack() as stack:
        started = [Replica(f"replica{i}", folder, settings) for i in range(count)]
        for r in started:
            stack.callback(r.close)
        for r in started:
            r.launch()  # all at once: their first starts race for the migration
        for r in started:
            r.ready(60)
        yield started


def launcher(
    env: Mapping[str, str], **settings: Any
) -> Callable[[int, Path, str, str, Mapping[str, str]], AbstractContextManager[list[Replica]]]:
    """`replicas` as the replica benchmark calls it: (count, folder, database, upstream,
    users), every replica with `env` and the other `settings` (`ReplicaSettings` fields)."""

    def launch(
        count: int, folder: Path, database: str, upstream: str, users: Mapping[str, str]
    ) -> AbstractContextManager[list[Replica]]:
        chosen = ReplicaSettings(
            database=database, upstream=upstream, users=users, env=env, **settings
        )
        return replicas(count, folder, chosen)

    return launch
