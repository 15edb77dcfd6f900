"""Servers a benchmark times from outside: child processes on free loopback ports.

A server in the benchmark's own process shares its interpreter lock with the client
that times it, so what it measures is the two together; a child process is measured
as it is deployed.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def child_server(command: list[str], probe: str, *, timeout: float = 30.0) -> Iterator[None]:
    """`command` running until the block ends; the block starts once `probe` answers 200."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while not _answers(probe):
            if child.poll() is not None or time.monotonic() > deadline:
                error = child.stderr.read().decode() if child.stderr and child.poll() else ""
                raise RuntimeError(f"{' '.join(command[2:5])} did not start: {error[-2000:]}")
            time.sleep(0.05)
        yield
    finally:
        child.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(10)
        child.kill()  # nothing happens when it has already exited
        child.wait()
        if child.stderr is not None:
            child.stderr.close()


def _answers(url: str) -> bool:
    try:
        return httpx2.get(url, timeout=1.0).status_code == 200
    except httpx2.TransportError:
        return False
