"""`stoker proxy` records in a process of its own, so recording never delays a request.

A proxy forwards on one event loop, and a tool-using client sends its next call within a
millisecond of the last answer: CPU the proxy spends recording in between is latency
the client sees. Recording (parsing the body, replaying it through the shadow cache,
explaining it, writing the store) costs more than forwarding, so the proxy hands each
finished call to a child Python process (`python -m stoker.proxy.recorder_process`) that
runs the `Recorder` against the store, and keeps on its own loop only what optimize mode
needs before it forwards: the lineages, moved on as each response is read.

The two talk over the child's standard input and output with asyncio's pipes (a write
is buffered by the transport and never blocks the loop). Frames: a big-endian 32-bit
length and a JSON header, then the bodies the header sizes. The first frame names the
database (never in the child's arguments, where a password would show); each call's
frame carries its facts, where the proxy placed it (optimize mode, so both sides agree
on every lineage), the body forwarded and the response. No header of the client's
crosses: its key stays in the proxy. The child answers each call once it is stored.

The child serves the proxy, it never stops it: when it cannot start or dies, the calls
in flight are lost to the record (a warning says so) and the next call starts another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
import sys
from dataclasses import asdict
from typing import Any

from stoker.proxy.lineage import Placement
from stoker.proxy.recorder import Call, Recorder

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("!I")
_FIELDS = (
    "tenant",
    "dialect",
    "path",
    "mode",
    "started_at",
    "duration",
    "status",
    "streamed",
    "purpose",
    "error",
)


def frame(header: dict[str, Any], *bodies: bytes) -> bytes:
    data = json.dumps({**header, "sizes": [len(b) for b in bodies]}).encode()
    return b"".join((_LENGTH.pack(len(data)), data, *bodies))


async def read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, Any], list[bytes]] | None:
    """The next frame, or None at the end of the stream."""
    try:
        (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
        header: dict[str, Any] = json.loads(await reader.readexactly(size))
        bodies = [await reader.readexactly(n) for n in header.pop("sizes")]
    except asyncio.IncompleteReadError:
        return None
    return header, bodies


def call_frame(number: int, call: Call) -> bytes:
    placement = call.admission.placement if call.admission is not None else None
    header = {
        "id": number,
        **{name: getattr(call, name) for name in _FIELDS},
        "rewrites": list(call.rewrites),
        "placement": asdict(placement) if placement is not None else None,
    }
    return frame(header, call.body, call.response)


def call_of(header: dict[str, Any], bodies: list[bytes]) -> tuple[Call, Placement | None]:
    body, response = bodies
    call = Call(**{name: header[name] for name in _FIELDS}, body=body, response=response)
    call.rewrites = tuple(header["rewrites"])
    placement = header["placement"]
    return call, Placement(**placement) if placement is not None else None


class RecorderProcess:
    """The proxy's side: the lineages it keeps (`local`), one child, the calls in flight."""

    def __init__(self, database: str, *, python: str | None = None) -> None:
        self.local = Recorder(None, measure=False)
        self._database = database
        self._python = python or sys.executable
        self._child: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._next = 0
        self._closing = False
        self._starting = asyncio.Lock()
        self.last_stored: tuple[str, int] | None = None  # (lineage, seq) of the latest call

    async def record(self, call: Call) -> None:
        """Move the call's lineage on here, then have the child record it; returns once
        it is stored (or lost with the child)."""
        if call.admission is not None:  # optimize mode placed it: its lineage moves on here
            await self.local.record(call)
        child = await self._running()
        if child is None or child.stdin is None:
            return
        self._next += 1
        number = self._next
        stored = asyncio.get_running_loop().create_future()
        self._waiting[number] = stored
        try:
            try:
                if child.stdin.is_closing():  # it died since `_running` looked
                    raise ConnectionResetError("its input is closed")
                child.stdin.write(call_frame(number, call))
                await child.stdin.drain()
            except (ConnectionError, RuntimeError) as exc:  # uvloop: RuntimeError, closed pipe
                self._lost(f"{type(exc).__name__} writing to it: {exc}")
                return
            await stored
        finally:
            self._waiting.pop(number, None)

    @property
    def pid(self) -> int | None:
        """The recorder process's id, while one was started."""
        return self._child.pid if self._child is not None else None

    @property
    def running(self) -> bool:
        return self._child is not None and self._child.returncode is None

    async def start(self) -> None:
        await self._running()

    async def _running(self) -> asyncio.subprocess.Process | None:
        async with self._starting:  # calls finishing together start one child, not several
            if self._child is not None and self._child.returncode is None:
                return self._child
            return await self._spawn()

    async def _spawn(self) -> asyncio.subprocess.Process | None:
        try:
            child = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "stoker.proxy.recorder_process",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                # Its own session: a Ctrl-C at the terminal stops the proxy, which closes
                # the child's input once the calls in flight are recorded; the child does
                # not die first and leave a "gone" warning on a normal stop.
                start_new_session=True,
            )
        except OSError as exc:
            self._lost(f"it could not start: {exc}")
            return None
        assert child.stdin is not None
        try:
            child.stdin.write(frame({"database": self._database}))
        except (ConnectionError, RuntimeError) as exc:  # uvloop: RuntimeError, closed pipe
            self._lost(f"it exited at once: {exc}")
            child.stdin.close()  # its pipes and process handle close once it has exited
            await child.wait()
            return None
        self._child = child
        self._reader = asyncio.get_running_loop().create_task(self._acks(child))
        return child

    async def _acks(self, child: asyncio.subprocess.Process) -> None:
        assert child.stdout is not None
        try:
            while (got := await read_frame(child.stdout)) is not None:
                header, _ = got
                if "error" in header:
                    log.warning("the proxy's recorder process: %s", header["error"])
                    continue
                if "lineage" in header:  # where the latest call was stored
                    self.last_stored = (header["lineage"], header["seq"])
                stored = self._waiting.get(header["id"])
                if stored is not None and not stored.done():
                    stored.set_result(None)
            if child.stdin is not None:
                child.stdin.close()  # a dead child's pipes close, and its process handle
            status = await child.wait()
            if not self._closing:
                self._lost(f"it exited with status {status}")
        finally:
            for stored in self._waiting.values():
                if not stored.done():
                    stored.set_result(None)

    def _lost(self, why: str) -> None:
        log.warning(
            "the proxy's recorder process is gone (%s): %d call(s) in flight are not "
            "recorded; the next call starts another",
            why,
            len(self._waiting),
        )

    async def aclose(self) -> None:
        """Let the child store what it has, then end it."""
        self._closing = True
        child, self._child = self._child, None
        if child is None:
            return
        if child.stdin is not None:
            child.stdin.close()
        try:
            await asyncio.wait_for(child.wait(), 30.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
        if self._reader is not None:
            await self._reader


async def serve(reader: asyncio.StreamReader, write: Any) -> None:
    """The child: record every call the proxy sends, answer each once it is stored."""
    from stoker.store.open import open_store  # the child alone opens the store

    opening = await read_frame(reader)
    if opening is None:
        return
    async with open_store(opening[0]["database"]) as store:
        recorder = Recorder(store)
        while (got := await read_frame(reader)) is not None:
            header, bodies = got
            call, placement = call_of(header, bodies)
            ack: dict[str, Any] = {"id": header["id"]}
            try:
                exchange = await recorder.record(call, placement)
                ack.update(lineage=exchange.lineage_id, seq=exchange.seq)
            except Exception as exc:  # one bad call must not end the recording of the rest
                write(frame({"error": f"could not record a call: {exc!r}"}))
            write(frame(ack))


async def _main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**31 - 1)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    await serve(reader, write)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        asyncio.run(_main())
