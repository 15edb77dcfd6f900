"""MCP servers as toolkits, through the official `mcp` SDK (stdio and streamable HTTP).

The SDK is an optional dependency (`stoker[mcp]`) and slow to import, so it is
imported when a toolkit first connects, not when this module is.

A toolkit connects lazily, bounds every operation (connecting included) in time,
and after any failure of the connection drops it and reconnects on the next use: a
server that is down, hangs or restarts costs the caller one clear
`ToolkitUnavailable`/`IntegrationTimeout`, never a hung turn.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from stoker.errors import ConfigError
from stoker.integrations._connection import Connection
from stoker.integrations.errors import (
    IntegrationError,
    IntegrationTimeout,
    ToolCallFailed,
    ToolkitUnavailable,
)
from stoker.integrations.toolkit import IntegrationContext, ToolSpec, sorted_specs
from stoker.wire.canonical import canonical_json

if TYPE_CHECKING:
    from mcp import Client

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_PAGES = 100
"""Pages of `tools/list` read at most: a server whose cursor never ends cannot hang a fetch."""

# JSON-RPC codes the SDK uses for a dead connection and its own request timeout
# (mcp_types.CONNECTION_CLOSED, REQUEST_TIMEOUT): the connection is dropped on these.
_CONNECTION_CODES = frozenset({-32000, -32001})


@dataclass(frozen=True, slots=True, kw_only=True)
class McpStdio:
    """Launch `command args...` and speak MCP over its stdin/stdout.

    `env` is added to the SDK's small inherited environment (PATH, HOME, ...), not to
    the whole of ours, so secrets are passed on purpose or not at all.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    cwd: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))


@dataclass(frozen=True, slots=True, kw_only=True)
class McpHttp:
    """Speak MCP over streamable HTTP to `url`, sending `headers` (e.g. authorization)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))


class McpToolkit:
    """A toolkit whose tools live on an MCP server.

    One connection is shared by all callers and opened on first use; concurrent first
    callers wait for the same connection. `timeout` bounds each request;
    `connect_timeout` (default: `timeout`) bounds connecting, which for a server
    started through a package runner can take longer than any call.
    """

    __slots__ = ("_connection", "_retiring", "connect_timeout", "name", "server", "timeout")

    def __init__(
        self,
        name: str,
        server: McpStdio | McpHttp,
        *,
        timeout: float = 10.0,
        connect_timeout: float | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a toolkit needs a non-empty name, got {name!r}")
        if not isinstance(server, McpStdio | McpHttp):
            raise ConfigError(f"toolkit {name!r}: server must be McpStdio or McpHttp")
        connect_timeout = timeout if connect_timeout is None else connect_timeout
        if timeout <= 0 or connect_timeout <= 0:
            raise ConfigError(
                f"toolkit {name!r}: timeouts must be > 0 seconds, got {timeout=} {connect_timeout=}"
            )
        self.name = name
        self.server = server
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._connection: Connection[Client] | None = None
        self._retiring: set[asyncio.Task[None]] = set()

    async def list_tools(self, context: IntegrationContext) -> tuple[ToolSpec, ...]:
        """Every page of the server's tools, sorted by name, schemas canonical."""

        async def fetch(client: Client) -> tuple[ToolSpec, ...]:
            specs: list[ToolSpec] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                specs.extend(
                    ToolSpec(
                        name=t.name,
                        description=t.description or "",
                        input_schema=dict(t.input_schema),
                        gate="approval" if _destructive(t.annotations) else None,
                    )
                    for t in page.tools
                )
                cursor = page.next_cursor
                if cursor is None:
                    break
            return sorted_specs(self.name, specs)

        return await self._request("list tools", fetch)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: IntegrationContext
    ) -> str:
        """The tool's content as text; a result the server flags as an error raises
        `ToolCallFailed` carrying that text."""

        async def call(client: Client) -> str:
            result = await client.call_tool(name, arguments)
            text = _result_text(result)
            if result.is_error:
                raise ToolCallFailed(self.name, name, text or "the tool reported an error")
            return text

        return await self._request(f"call {name!r}", call, tool=name)

    async def close(self) -> None:
        """Disconnect and wait for every connection's teardown (bounded by the SDK)."""
        if self._connection is not None:
            self._retire(self._connection, ToolkitUnavailable(self.name, "use", "closed"))
        while self._retiring:
            tasks = tuple(self._retiring)
            await asyncio.gather(*tasks, return_exceptions=True)
            self._retiring.difference_update(tasks)

    async def _request(
        self, operation: str, run: Callable[[Client], Awaitable[T]], *, tool: str | None = None
    ) -> T:
        connection, client = await self._client()
        try:
            async with asyncio.timeout(self.timeout):
                return await run(client)
        except TimeoutError:
            error: IntegrationError = IntegrationTimeout(self.name, operation, self.timeout)
            self._retire(connection, error)
            raise error from None
        except IntegrationError:
            raise
        except Exception as exc:
            code = _rpc_code(exc)
            if code is not None and code not in _CONNECTION_CODES:
                # The server is alive and refused this request (unknown tool, bad params).
                if tool is not None:
                    raise ToolCallFailed(self.name, tool, str(exc)) from exc
                raise ToolkitUnavailable(self.name, operation, str(exc)) from exc
            error = ToolkitUnavailable(self.name, operation, _reason(exc))
            self._retire(connection, error)
            raise error from exc

    async def _client(self) -> tuple[Connection[Client], Client]:
        """The connected client, connecting first if needed (concurrent callers share
        the attempt; the first to time out gives it up for all)."""
        connection = self._connection
        if connection is None or not connection.usable:
            connection = self._connection = Connection(self.name, self._open)
        try:
            async with asyncio.timeout(self.connect_timeout):
                return connection, await connection.client()
        except TimeoutError:
            error: IntegrationError = IntegrationTimeout(self.name, "connect", self.connect_timeout)
            self._retire(connection, error)
            raise error from None
        except IntegrationError:
            raise
        except Exception as exc:
            hint = (
                "check the command, and run it by hand to see its errors"
                if isinstance(self.server, McpStdio)
                else "check the URL, the headers, and that the server is up"
            )
            error = ToolkitUnavailable(self.name, "connect", f"{_reason(exc)}; {hint}")
            self._retire(connection, error)
            raise error from exc

    def _retire(self, connection: Connection[Client], error: BaseException) -> None:
        connection.abort(error)
        if self._connection is connection:
            self._connection = None
        if not connection.task.done():
            self._retiring.add(connection.task)
            connection.task.add_done_callback(self._retiring.discard)

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Client]:
        try:
            # Half a second of imports, off the event loop the other sessions share.
            await asyncio.to_thread(importlib.import_module, "mcp.client.streamable_http")
            from mcp import Client, StdioServerParameters
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                f"toolkit {self.name!r} needs the MCP SDK: pip install 'stoker[mcp]'"
            ) from exc
        server = self.server
        if isinstance(server, McpStdio):
            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) or None,
                cwd=server.cwd,
            )
            async with Client(params, cache=None) as client:
                yield client
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        # No read timeout: the event stream may idle for long; requests are bounded above.
        timeouts = httpx2.Timeout(self.connect_timeout, read=None)
        async with (
            httpx2.AsyncClient(headers=dict(server.headers), timeout=timeouts) as http,
            Client(streamable_http_client(server.url, http_client=http), cache=None) as client,
        ):
            yield client


def _rpc_code(exc: BaseException) -> int | None:
    """The JSON-RPC error code if `exc` is the SDK's `MCPError`, else None.

    Looked up in `sys.modules`: if the SDK was never imported, `exc` cannot be its.
    """
    module = sys.modules.get("mcp.shared.exceptions")
    error_type = getattr(module, "MCPError", None)
    if error_type is not None and isinstance(exc, error_type):
        return int(exc.code)
    return None


def _reason(exc: BaseException) -> str:
    """One line on why a connection failed, with the hint a person needs."""
    if isinstance(exc, FileNotFoundError):
        return f"the server command was not found ({exc.filename or exc})"
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _reason(exc.exceptions[0])
    text = str(exc) or "the connection closed"
    return f"{type(exc).__name__}: {text}"


def _result_text(result: Any) -> str:
    """A `CallToolResult` as text: text blocks as they are, other blocks described in
    one line each, and structured content as canonical JSON when there is no text."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[resource: {inner.uri}]")
        else:
            parts.append(f"[{kind or type(block).__name__}]")
    if not parts and result.structured_content is not None:
        parts.append(canonical_json(result.structured_content).decode("utf-8"))
    return "\n".join(parts)


def _destructive(annotations: Any) -> bool:
    """Whether the server says the tool may destroy something: only an explicit
    `destructiveHint: true` on a tool not marked read-only counts. The protocol's default
    for an unannotated tool is "may be destructive", but a gate on every tool of every
    server that never annotates would bury the ones that say so."""
    if annotations is None:
        return False
    return annotations.destructive_hint is True and annotations.read_only_hint is not True
