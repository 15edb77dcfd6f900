"""Where Stoker keeps its files: `$STOKER_HOME` when set, else the user's data directory.

Resolved when something is opened, never at import; nothing is created until a write.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs


def stoker_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    home = env.get("STOKER_HOME")
    return Path(home).expanduser() if home else Path(platformdirs.user_data_dir("stoker"))
