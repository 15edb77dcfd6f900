"""The errors a toolkit raises, as one small tree under `StokerError`.

A toolkit failure is never allowed to end a turn: the delegate tool lets these
propagate, and the tool dispatcher turns any exception into an `is_error` result the
model reads. So every message names the toolkit and says what to do next.

    StokerError
    └── IntegrationError          a toolkit could not serve a request
        ├── ToolkitUnavailable    the server could not be reached, or the connection broke
        │   └── IntegrationTimeout    an operation passed its timeout
        ├── UnknownToolkit        no toolkit is registered under that name
        └── ToolCallFailed        the toolkit answered, but the call did not succeed
"""

from __future__ import annotations

from collections.abc import Iterable

from stoker.errors import StokerError


class IntegrationError(StokerError):
    """A toolkit could not serve a request; `toolkit` names it."""

    def __init__(self, message: str, *, toolkit: str) -> None:
        super().__init__(message)
        self.toolkit = toolkit


class ToolkitUnavailable(IntegrationError):
    """The toolkit's server is down, missing, or dropped the connection.

    The toolkit reconnects on its next use, so retrying later is the remedy.
    """

    def __init__(self, toolkit: str, operation: str, reason: str) -> None:
        super().__init__(
            f"toolkit {toolkit!r} is unavailable ({operation}): {reason}. "
            "Try again later or carry on without it; it reconnects on its next use.",
            toolkit=toolkit,
        )
        self.operation = operation
        self.reason = reason


class IntegrationTimeout(ToolkitUnavailable):
    """An operation took longer than the toolkit's timeout and was abandoned."""

    def __init__(self, toolkit: str, operation: str, timeout: float) -> None:
        super().__init__(toolkit, operation, f"no answer within {timeout:g} s")
        self.timeout = timeout


class UnknownToolkit(IntegrationError):
    """A call named a toolkit that is not registered; the message lists those that are."""

    def __init__(self, toolkit: str, known: Iterable[str]) -> None:
        names = ", ".join(repr(n) for n in sorted(known)) or "(none)"
        super().__init__(
            f"no toolkit is named {toolkit!r}; available toolkits: {names}", toolkit=toolkit
        )


class ToolCallFailed(IntegrationError):
    """The toolkit answered, but the call failed: unknown tool, bad arguments, or the
    tool itself reported an error. `detail` is the toolkit's own text."""

    def __init__(self, toolkit: str, tool: str, detail: str) -> None:
        super().__init__(f"toolkit {toolkit!r}, tool {tool!r}: {detail}", toolkit=toolkit)
        self.tool = tool
        self.detail = detail
