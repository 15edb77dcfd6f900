"""`stoker proxy`: a recording reverse proxy for any framework's provider traffic.

A client changes one base URL and keeps its own key. Every request is streamed to the
upstream provider and every response streamed back as it arrives (`app`); afterwards
the call is recorded with a `CacheRecord` and the explainer's verdict, grouped into
lineages by the hash chain of its messages (`lineage`, `recorder`). With `--optimize`
the proxy also rewrites requests where the model cannot tell (`optimize`) and sends
keep-warm pings where the time policy says they pay (`keepwarm`). `report` turns the
records into the report `stoker report` prints, per tree of lineages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from stoker.proxy.report import LineageFigures, proxy_report

if TYPE_CHECKING:
    from stoker.proxy.app import create_app
    from stoker.proxy.core import ProxyConfig

# The server side needs the `server` extra (starlette, aiohttp); the report does not, so
# `stoker report-proxy` works on a core install and only `stoker proxy` asks for it.
_LAZY = {"ProxyConfig": "stoker.proxy.core", "create_app": "stoker.proxy.app"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stoker.proxy' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["LineageFigures", "ProxyConfig", "create_app", "proxy_report"]
