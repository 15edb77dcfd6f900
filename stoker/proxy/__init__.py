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

from stoker.proxy.app import ProxyConfig, create_app
from stoker.proxy.report import LineageFigures, proxy_report

__all__ = ["LineageFigures", "ProxyConfig", "create_app", "proxy_report"]
