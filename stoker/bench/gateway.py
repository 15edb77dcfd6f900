"""Load on a running gateway: many concurrent sessions, a few messages each, on loopback.

The benchmark is an HTTP client only (it never imports the gateway): point it at a base
URL and a token. Every session sends its messages one after another on its own
keep-alive connection while all sessions run at once; afterwards each session's history
is read back to prove nothing was lost and every session kept its order. The client is
a few lines of HTTP/1.1 over asyncio streams, so the load generator costs far less than
the server it measures (a general-purpose client pool spent more CPU than the gateway).

Latency figures come from the gateway's `Server-Timing` header, per message:
*overhead* is the handler's own work on the event loop, provider calls excluded (`cpu`);
*in gateway* is the handler's wall time minus the provider calls' (`gateway`), which at
this load is mostly waiting behind the other sessions' messages (measured again with one
message at a time after the load, where it is the latency a message really gains).
*End to end* is the client's view, loopback HTTP and queueing included.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from rich.table import Table

from stoker.bench.tables import figures_table

MAX_SESSIONS = 2_000
MAX_MESSAGES = 50
UNLOADED = 100  # messages sent one at a time after the load, for the unloaded figure
_TIMING = re.compile(r"(\w+);dur=([0-9.]+)")


class Connection:
    """One keep-alive HTTP/1.1 connection with JSON bodies (Content-Length only)."""

    def __init__(self, base_url: str, token: str) -> None:
        url = urlsplit(base_url)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.auth = f"Authorization: Bearer {token}\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        data = json.dumps(body).encode() if body is not None else b""
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n{self.auth}{extra}"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        status = int((await self.reader.readline()).split()[1])
        answered: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            answered[name.strip().lower()] = value.strip()
        raw = await self.reader.readexactly(int(answered.get("content-length", "0")))
        return status, answered, json.loads(raw) if raw else None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()

    def drop(self) -> None:
        """Forget a connection that failed (its server died): the next request reconnects."""
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayBenchResult:
    sessions: int
    messages: int  # per session
    sent: int
    failed: int  # non-200 answers
    lost: int  # sent, but missing from the history read back
    out_of_order: int  # sessions whose history is not in the order sent
    seconds: float
    overhead_ms: tuple[float, ...]  # sorted: the gateway's own work per message
    in_gateway_ms: tuple[float, ...]  # sorted: handler wall time minus provider calls
    unloaded_ms: tuple[float, ...]  # sorted: the same, one message at a time
    e2e_ms: tuple[float, ...]  # sorted: the client's view

    @property
    def throughput(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    @staticmethod
    def percentile(values: tuple[float, ...], p: float) -> float:
        return values[min(len(values) - 1, int(len(values) * p))] if values else 0.0


def _text(session: int, message: int) -> str:
    return f"session {session} message {message}"


async def _session(
    conn: Connection, index: int, sid: str, messages: int, samples: dict[str, list[float]]
) -> int:
    failed = 0
    for j in range(messages):
        start = time.perf_counter()
        status, headers, _ = await conn.request(
            "POST", f"/v1/sessions/{sid}/messages", {"text": _text(index, j)}
        )
        samples["e2e"].append((time.perf_counter() - start) * 1000)
        timing = dict(_TIMING.findall(headers.get("server-timing", "")))
        if status != 200 or "cpu" not in timing:
            failed += 1
            continue
        samples["cpu"].append(float(timing["cpu"]))
        samples["gateway"].append(float(timing["gateway"]))
    return failed


async def _check(conn: Connection, index: int, sid: str, messages: int) -> tuple[int, bool]:
    """(messages lost, order kept) for one session, from its stored history."""
    _, _, view = await conn.request("GET", f"/v1/sessions/{sid}")
    sent = [_text(index, j) for j in range(messages)]
    got = [t["user"] for t in view["turns"]]
    in_order = got == sent and all(t["answer"].endswith(t["user"]) for t in view["turns"])
    return len(set(sent) - set(got)), in_order


async def _unloaded(conn: Connection, count: int = UNLOADED) -> list[float]:
    """The time a message spends in the gateway when it is the only one there."""
    _, _, body = await conn.request("POST", "/v1/sessions", {})
    samples: dict[str, list[float]] = {"cpu": [], "gateway": [], "e2e": []}
    for _ in range(count):
        await _session(conn, 0, body["id"], 1, samples)
    return samples["gateway"]


async def run_gateway_bench(
    base_url: str,
    token: str,
    *,
    sessions: int = 200,
    messages: int = 5,
    time_limit: float = 300.0,
) -> GatewayBenchResult:
    """`sessions` sessions at once, `messages` each in order; bounded in count and time."""
    if not 1 <= sessions <= MAX_SESSIONS or not 1 <= messages <= MAX_MESSAGES:
        raise ValueError(f"sessions must be 1-{MAX_SESSIONS} and messages 1-{MAX_MESSAGES}")
    conns = [Connection(base_url, token) for _ in range(sessions)]
    samples: dict[str, list[float]] = {"cpu": [], "gateway": [], "e2e": []}
    try:
        async with asyncio.timeout(time_limit):
            created = await asyncio.gather(*(c.request("POST", "/v1/sessions", {}) for c in conns))
            if any(status != 201 for status, _, _ in created):
                raise RuntimeError(f"creating sessions failed: {created[0]}")
            pairs = list(enumerate(zip(conns, [body["id"] for _, _, body in created], strict=True)))
            start = time.perf_counter()
            failures = await asyncio.gather(
                *(_session(c, i, sid, messages, samples) for i, (c, sid) in pairs)
            )
            seconds = time.perf_counter() - start
            checks = await asyncio.gather(*(_check(c, i, sid, messages) for i, (c, sid) in pairs))
            unloaded = await _unloaded(conns[0])
    finally:
        await asyncio.gather(*(c.close() for c in conns))
    return GatewayBenchResult(
        sessions=sessions,
        messages=messages,
        sent=sessions * messages,
        failed=sum(failures),
        lost=sum(lost for lost, _ in checks),
        out_of_order=sum(1 for _, ok in checks if not ok),
        seconds=seconds,
        overhead_ms=tuple(sorted(samples["cpu"])),
        in_gateway_ms=tuple(sorted(samples["gateway"])),
        unloaded_ms=tuple(sorted(unloaded)),
        e2e_ms=tuple(sorted(samples["e2e"])),
    )


def gateway_table(r: GatewayBenchResult) -> Table:
    table = figures_table(
        f"gateway load: {r.sessions} concurrent sessions x {r.messages} messages "
        "(sim model at 0 ms, loopback)",
        ("figure", "value"),
        labels={"figure"},
    )
    p = r.percentile

    def pair(values: tuple[float, ...], digits: int) -> str:
        return f"{p(values, 0.5):.{digits}f} / {p(values, 0.99):.{digits}f}"

    rows = [
        ("messages sent", f"{r.sent:,}"),
        ("failed / lost / sessions out of order", f"{r.failed} / {r.lost} / {r.out_of_order}"),
        ("throughput (messages/s)", f"{r.throughput:,.0f}"),
        ("gateway overhead p50 / p99 (ms)", pair(r.overhead_ms, 2)),
        ("in gateway, queueing included, p50 / p99 (ms)", pair(r.in_gateway_ms, 1)),
        ("end to end p50 / p99 (ms)", pair(r.e2e_ms, 1)),
        ("in gateway, one message at a time, p50 / p99 (ms)", pair(r.unloaded_ms, 2)),
        ("wall time (s)", f"{r.seconds:.2f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table
