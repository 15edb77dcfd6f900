"""A stdio "MCP server" that reads every request and never answers, like a server
stuck at start-up. It exits when its stdin closes, so tests do not wait for a kill."""

from __future__ import annotations

import sys

for _line in sys.stdin:
    pass
