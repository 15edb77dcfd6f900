"""What every fake chat-platform API keeps: the calls the bot made, to read back and wait
on, and the files users sent, to serve; and how a fake is served on loopback."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse

from stoker.gateway.server import serve_in_thread


class RecordedCalls:
    """A fake's call log (`calls`, guarded by `_lock`: the fake serves in another thread).
    `SEND` is the platform's method for posting a message, `TEXT` its text's parameter."""

    SEND: ClassVar[str]
    TEXT: ClassVar[str] = "text"
    calls: list[tuple[str, dict[str, Any]]]
    _lock: threading.Lock

    def sent(self, method: str | None = None) -> list[dict[str, Any]]:
        """The parameters of each call of `method` (default: posting a message), in order."""
        wanted = method or self.SEND
        with self._lock:
            return [params for name, params in self.calls if name == wanted]

    def texts(self) -> list[str]:
        return [str(p[self.TEXT]) for p in self.sent()]

    async def wait_for(self, check: Callable[[], bool], within: float = 10.0) -> None:
        deadline = time.monotonic() + within
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; the bot called: {self.calls}")
            await asyncio.sleep(0.01)


CHUNK = 65_536


@dataclass
class HeldFiles:
    """The files a fake platform holds and serves as its file server does: streamed in
    chunks without a Content-Length (the reader must count for itself), counting what
    was sent; an `endless` one never ends, zeros following its bytes."""

    data: dict[str, bytes] = field(default_factory=dict)  # id -> its bytes
    endless: set[str] = field(default_factory=set)
    served: dict[str, int] = field(default_factory=dict)  # id -> bytes streamed
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def keep(self, data: bytes, *, endless: bool = False) -> str:
        """Hold `data`; its id."""
        with self._lock:
            file_id = f"file{len(self.data) + 1}"
            self.data[file_id] = data
            if endless:
                self.endless.add(file_id)
        return file_id

    def response(self, file_id: str) -> Response:
        with self._lock:
            data, endless = self.data.get(file_id), file_id in self.endless
        if data is None:
            return Response(status_code=404)

        async def chunks() -> AsyncIterator[bytes]:
            parts = (data[i : i + CHUNK] for i in range(0, len(data), CHUNK))
            for part in itertools.chain(parts, itertools.repeat(bytes(CHUNK)) if endless else ()):
                with self._lock:
                    self.served[file_id] = self.served.get(file_id, 0) + len(part)
                yield part
                await asyncio.sleep(0)

        return StreamingResponse(chunks(), media_type="application/octet-stream")


class _Servable(Protocol):
    url: str

    def app(self) -> Starlette: ...


F = TypeVar("F", bound=_Servable)


@dataclass(frozen=True, slots=True, kw_only=True)
class Api(Generic[F]):
    """A fake platform API served on loopback, and its base URL."""

    fake: F
    url: str


@contextmanager
def serve(fake: F) -> Iterator[Api[F]]:
    """`fake` on a free loopback port (it learns its URL: its links point there)."""
    with serve_in_thread(fake.app()) as url:
        fake.url = url
        yield Api(fake=fake, url=url)
