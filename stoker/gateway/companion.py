"""What runs beside the gateway in its process: started with the app, stopped before it.

The gateway knows nothing of what its companions are (the chat platforms' bridges, in
`stoker.platforms`, are the ones Stoker has); whoever composes a process hands them to
`create_app`. The app starts them in order once the gateway is started, serves their
routes (a platform's webhooks), and on shutdown stops them in reverse order, giving
what they are still handling the gateway's grace, before the gateway itself closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute


class Companion(Protocol):
    """Something with a lifetime of the app's own, and HTTP routes the app serves."""

    async def start(self) -> None:
        """Begin (the gateway is started); raising fails the app's startup."""
        ...

    async def stop(self, *, grace: float | None = None) -> None:
        """End: what is still running gets `grace` seconds (None: as long as it takes)."""
        ...

    def routes(self) -> Sequence[BaseRoute]:
        """Routes the app serves for it (may be none); asked once, when the app is made."""
        ...
