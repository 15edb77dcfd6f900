"""The multi-user gateway: an HTTP service with one cached agent per session.

Only the CLI and the chat platforms (`stoker.platforms`, the layer above) import this
package; it imports neither (a test keeps the layers pointing down).

    service.py     Gateway: sessions, turns, the agent cache and its rebuild rules
    cache.py       AgentCache: LRU + idle TTL, never evicting an agent mid-turn
    signature.py   what a cached agent is keyed on (a digest of the whole key, never a prefix)
    agents.py      agents from settings; declared breaks when a rebuild changes the prefix
    toolsets.py    outage or removal: a toolset that is down vs one the configuration dropped
    commands.py    /new /reset /clear /model /reasoning /compress /usage
    app.py         the ASGI routes; sse.py, dashboard.py, openapi.py
    companion.py   what runs beside the app, started and stopped with it (the platforms)
    openai_compat.py, openai_responses.py  OpenAI's Chat Completions and Responses APIs;
                   openai_history.py finds their session, openai_errors.py their errors
    config.py      `stoker serve` configuration (TOML + environment); server.py runs it
    session_settings.py  what one session's agent is made of (defaults + /model, /reasoning)
"""

from stoker.extras import require

require("server", "stoker.gateway")  # one clear error, before the first starlette import

from stoker.gateway.app import create_app
from stoker.gateway.companion import Companion
from stoker.gateway.config import GatewayConfig, load_config
from stoker.gateway.providers import ProviderFactory, ProviderRoute, default_provider_factory
from stoker.gateway.server import build_app, build_gateway, serve, serve_in_thread
from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import SessionSettings
from stoker.gateway.signature import key_digest, signature

__all__ = [
    "Companion",
    "Gateway",
    "GatewayConfig",
    "ProviderFactory",
    "ProviderRoute",
    "SessionSettings",
    "build_app",
    "build_gateway",
    "create_app",
    "default_provider_factory",
    "key_digest",
    "load_config",
    "serve",
    "serve_in_thread",
    "signature",
]
