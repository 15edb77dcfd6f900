"""Integrations: toolkits from MCP servers and Python plugins, a shared TTL cache of
their tool lists, and the registry sessions take their toolkit views from.

Imports only `stoker.errors`, `stoker.clock`, `stoker.wire` and `stoker.tools`; the
`mcp` SDK is imported when an MCP toolkit first connects. Toolkit tools never enter
`tools[]`: they are listed sorted with canonical schemas, reached through a fixed tool,
and announced by notes at turn boundaries, so connecting a server never moves the
prefix (docs/cache-breakers.md: "Tool order", "JSON key order and whitespace",
"Per-turn tool lists").
"""

from __future__ import annotations

from stoker.integrations.cache import Snapshot, ToolkitCache
from stoker.integrations.errors import (
    IntegrationError,
    IntegrationTimeout,
    ToolCallFailed,
    ToolkitUnavailable,
    UnknownToolkit,
)
from stoker.integrations.mcp import McpHttp, McpStdio, McpToolkit
from stoker.integrations.plugin import PluginToolkit
from stoker.integrations.registry import ToolkitRegistry
from stoker.integrations.toolkit import (
    IntegrationContext,
    Toolkit,
    ToolSpec,
    sorted_specs,
    specs_bytes,
)
from stoker.integrations.view import ToolkitView, catalogue, describe_change

__all__ = [
    "IntegrationContext",
    "IntegrationError",
    "IntegrationTimeout",
    "McpHttp",
    "McpStdio",
    "McpToolkit",
    "PluginToolkit",
    "Snapshot",
    "ToolCallFailed",
    "ToolSpec",
    "Toolkit",
    "ToolkitCache",
    "ToolkitRegistry",
    "ToolkitUnavailable",
    "ToolkitView",
    "UnknownToolkit",
    "catalogue",
    "describe_change",
    "sorted_specs",
    "specs_bytes",
]
