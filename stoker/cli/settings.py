"""The CLI's one read of the environment: each command resolves its settings here, once,
with its flags on top, and passes the frozen `Config` down (library code reads none)."""

from __future__ import annotations

import os

from stoker.config import Config


def settings(
    *,
    db: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    cache: str | None = None,
) -> Config:
    """This command's settings: the process environment, then its flags (None: not given;
    `cache` is `--cache vllm|llamacpp`, the server an openai-compatible: provider runs on)."""
    return Config.from_env(
        os.environ, database=db, provider=provider, model=model, local_cache=cache
    )
