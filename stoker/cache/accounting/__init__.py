"""The providers' exact prompt-cache accounting: a wire payload in, reads and writes out.

Pure and without I/O, so the in-process simulator, the HTTP simulator and the recording
proxy all bill the same way. Each accountant keeps the cache entries it wrote between
calls; every rule the providers' docs leave open is a field of its settings.
"""

from __future__ import annotations

from stoker.cache.accounting._state import CacheEntry, EntryStore
from stoker.cache.accounting.anthropic import (
    AnthropicAccountant,
    AnthropicSettings,
)
from stoker.cache.accounting.openai import (
    OpenAIAccountant,
    OpenAISettings,
)
from stoker.cache.accounting.outcome import CacheBreakpoint, CacheOutcome, MissCause, MissFact

__all__ = [
    "AnthropicAccountant",
    "AnthropicSettings",
    "CacheBreakpoint",
    "CacheEntry",
    "CacheOutcome",
    "EntryStore",
    "MissCause",
    "MissFact",
    "OpenAIAccountant",
    "OpenAISettings",
]
