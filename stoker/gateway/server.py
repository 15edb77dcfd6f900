"""Running the gateway: from a `GatewayConfig` to an app, and the app on uvicorn.

`serve` blocks (the `stoker serve` command); `serve_in_thread` runs the app on a free
loopback port in a background thread and yields its base URL, for the benchmark and the
browser test. Both start uvicorn through `stoker.http_server`, as every Stoker server does.
What else runs in the process (the chat platforms) comes as companions from whoever
composes it (`stoker serve`): the gateway does not know them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette

from stoker.agent.telemetry_setup import telemetry_from
from stoker.errors import ConfigError
from stoker.gateway.app import create_app
from stoker.gateway.companion import Companion
from stoker.gateway.config import GatewayConfig
from stoker.gateway.providers import ProviderFactory, factory_for
from stoker.gateway.service import Gateway
from stoker.http_server import base_url, listen, server_config
from stoker.http_server import serve as http_serve
from stoker.providers.retry import RetryPolicy
from stoker.store import open_store
from stoker.store.base import SqlEventStore
from stoker.tools import ToolRegistry
from stoker.toolsets.workspace import workspace_toolset


def build_gateway(
    config: GatewayConfig,
    *,
    store: SqlEventStore | None = None,
    provider_factory: ProviderFactory | None = None,
) -> Gateway:
    """A gateway as `config` describes it (the store from `config.database` unless given;
    providers from `select_provider` with the config's timeouts unless a factory is given)."""
    if store is None:
        if config.database is None:
            raise ConfigError(
                "the gateway needs a database: set GatewayConfig.database or pass a store"
            )
        store = open_store(config.database, pool=config.pool)
    registry = None
    if config.workspace is not None:
        registry = ToolRegistry([workspace_toolset(config.workspace, writable=False)])
    return Gateway(
        store=store,
        defaults=config.defaults,
        api_key=config.api_key,
        provider_factory=provider_factory
        or factory_for(RetryPolicy(timeouts=config.timeouts), sim_cache=config.sim_cache),
        registry=registry,
        cache_size=config.limits.cache_size,
        idle_ttl=config.limits.idle_ttl,
        max_message_chars=config.limits.max_message_chars,
        keep_warm=config.keep_warm,
        keep_warm_limits=config.keep_warm_limits,
        cache_key_scope=config.cache_key_scope,
        telemetry=telemetry_from(config.telemetry),
        approval_timeout=config.approval_timeout,
        memory_dir=config.memory_dir,
        review=config.review,
    )


# What runs beside a gateway, made for it once it is built (`stoker serve`: the bridges).
Companions = Callable[[Gateway], Sequence[Companion]]


def build_app(
    config: GatewayConfig,
    gateway: Gateway,
    *,
    close_store: bool = True,
    companions: Sequence[Companion] = (),
) -> Starlette:
    return create_app(
        gateway,
        tokens=config.tokens,
        max_body_bytes=config.limits.max_body_bytes,
        close_store=close_store,
        grace=config.grace,
        companions=companions,
    )


def serve(
    config: GatewayConfig,
    *,
    log_level: str = "info",
    companions: Companions | None = None,
    started: Callable[[str], None] | None = None,
) -> None:
    """Run the gateway until SIGTERM or SIGINT: it stops accepting connections, gives the
    requests running then `config.grace` seconds, cancels what is left (writes are
    shielded, session locks released), then gives back its leases and exits.
    `companions` makes what runs beside it (started and stopped with the app).

    Nothing is bound, and nothing said, until the settings are known to work: the
    default agent is built first (an unknown model, a provider without its key and an
    unknown toolset are `ConfigError`s here, with no network call), then the port is
    taken (`PortInUse` when another process has it), and `started` is called with the
    base URL only once the app has started and answers."""
    gateway = build_gateway(config)
    gateway.check()
    app = build_app(config, gateway, companions=companions(gateway) if companions else ())
    sockets = listen(
        config.host, config.port, owner="stoker serve", port_flag="--port", host_flag="--host"
    )
    url = base_url(config.host, sockets[0].getsockname()[1])
    http_serve(
        app,
        sockets,
        started=(lambda: started(url)) if started is not None else None,
        log_level=log_level,
        timeout_graceful_shutdown=math.ceil(config.grace),  # uvicorn takes whole seconds
    )


@contextmanager
def serve_in_thread(
    app: Starlette, *, host: str = "127.0.0.1", timeout: float = 10.0
) -> Iterator[str]:
    """Serve `app` on a free port of `host` in a daemon thread; yields its base URL."""
    server = uvicorn.Server(
        server_config(app, host=host, port=0, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, name="stoker-gateway", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the gateway did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
