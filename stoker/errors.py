"""Every error Stoker raises on purpose, as one small tree.

Errors are part of the API: each carries structured fields and a message that says
what went wrong and what to do about it.

    StokerError
    ├── ConfigError              bad settings or arguments
    │   ├── UnknownPrice         no price for a model: says which file to add it to
    │   ├── MissingExtra         an optional part is not installed: says which extra brings it
    │   └── PortInUse            a server's port is taken (by another Stoker server, often)
    ├── WireError                a payload or stored value that does not parse
    ├── ProviderError            a provider call failed
    │   ├── InvalidRequest       the provider (or the sim) rejected the request (HTTP 400)
    │   │   └── UnsatisfiableSchema  (stoker.providers.sim) no JSON value satisfies a schema
    │   ├── AuthenticationError  the key was rejected (HTTP 401/403); never shows the key
    │   └── ProviderTimeout      the call ran past a timeout (connect, first byte, total)
    ├── PrefixError              an operation would change a frozen prefix without a declared rebase
    │   ├── ResumeMismatch       the runtime agent differs from the stored session (every field)
    │   └── MissingTools         tools used in the stored history have no implementation now
    ├── ToolError                a tool is missing or badly defined (not for a model's bad call)
    │   ├── ToolUnavailable      the session advertises a tool this runtime cannot run now
    │   └── SpawnDepthExceeded   a sub-agent would nest deeper than the configured limit
    ├── CompactionError          a history could not be compacted (or not enough to fit)
    ├── OutputError              an answer did not validate as the output type asked for
    ├── StoreError               the session database cannot be used as it is
    │   ├── DatabaseNotFound     a SQLite file to read from does not exist (and is not created)
    │   ├── SessionNotFound      no session with that id in the store
    │   ├── AmbiguousSessionId   a shortened id that starts more than one session's id
    │   ├── StoreUnavailable     the database cannot be reached now; retry later
    │   └── ConcurrentWrite      two processes wrote one session at once; nothing stored
    ├── MemoryStoreError         (stoker.memory) a refused memory or skill write, for the model
    ├── AttachmentRefused        (stoker.platforms) a chat platform will not give a file
    └── IntegrationError         (stoker.integrations) a toolkit failed, timed out or is unknown

A turn that uses up its iteration budget is not an error: it ends with
`TurnResult.exit == "budget_exhausted"`.
"""

from __future__ import annotations


class StokerError(Exception):
    """Root of every error Stoker raises on purpose."""


class ConfigError(StokerError):
    """Settings or arguments that cannot be used as given."""


class UnknownPrice(ConfigError):
    """Neither the price catalogue nor the user's overrides price this model."""

    def __init__(self, model: str, path: object = None) -> None:
        where = (
            str(path)
            if path is not None
            else "prices.toml in the Stoker home ($STOKER_HOME, else the user data dir)"
        )
        super().__init__(
            f"no price for model {model!r}: the installed genai-prices catalogue does not "
            f"list it (a newer genai-prices may). Add its prices (USD per million tokens) "
            f'to {where}:\n\n[models."{model}"]\ninput = 1.0\noutput = 5.0\n'
            "cache_read = 0.1\ncache_write = 1.25\ncache_write_1h = 2.0\n"
        )
        self.model = model
        self.path = path


class MissingExtra(ConfigError, ImportError):
    """An optional part of Stoker is used but its extra is not installed. Also an
    `ImportError`, so code that treats a missing optional module as absent still does."""

    def __init__(self, extra: str, what: str, missing: str) -> None:
        super().__init__(
            f"{what} needs the {extra!r} extra ({missing} is not installed): "
            f"pip install 'stoker[{extra}]'"
        )
        self.extra = extra
        self.what = what
        self.missing = missing
        self.name = missing


class PortInUse(ConfigError):
    """Another process listens on the port a server was to take. `owner` is what may hold
    it ("stoker serve"), `flag` the option that picks another ("--port")."""

    def __init__(self, host: str, port: int, *, owner: str, flag: str) -> None:
        super().__init__(
            f"port {port} on {host} is in use (another {owner}?): pick another with {flag}"
        )
        self.host = host
        self.port = port


class WireError(StokerError):
    """A payload or stored value that does not have the shape we expect."""


class ProviderError(StokerError):
    """A provider call failed; `provider` names which one, `status` the HTTP status if any,
    `attempts` how many tries the retry loop made before it gave up (None: not retried)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        attempts: int | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.attempts = attempts


class InvalidRequest(ProviderError):
    """The provider rejected the request as malformed (HTTP 400). `param` names the field
    at fault and `code` the provider's error code, where the provider says them."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status)
        self.param = param
        self.code = code


class AuthenticationError(ProviderError):
    """The provider rejected the credentials. The message never contains the key."""


class ProviderTimeout(ProviderError):
    """A provider call ran past one of its timeouts (`stoker.providers.retry.Timeouts`).

    `phase` names which: "connect" (no connection), "first_byte" (a streamed answer did
    not start), "total" (the call, retries included, took too long). A timed-out call
    stores no answer, so the session can be sent to again at once.
    """

    def __init__(self, message: str, *, provider: str = "", phase: str) -> None:
        super().__init__(message, provider=provider)
        self.phase = phase


class PrefixError(StokerError):
    """Something tried to send a prefix other than the session's frozen one."""


class ResumeMismatch(PrefixError):
    """The runtime agent would send another prefix than the stored session's."""

    def __init__(self, session_id: str, diffs: list[tuple[str, object, object]]) -> None:
        lines = "\n".join(f"  {name}: stored {old!r}, runtime {new!r}" for name, old, new in diffs)
        super().__init__(
            f"session {session_id!r} cannot resume:\n{lines}\n"
            f"Resume with an agent configured as stored, or call session.rebase(reason=...) "
            "to accept the change as a declared cache break."
        )
        self.session_id = session_id
        self.diffs = diffs


class MissingTools(PrefixError):
    """Tools the stored history used are not implemented by the runtime agent."""

    def __init__(self, session_id: str, names: list[str]) -> None:
        super().__init__(
            f"session {session_id!r} cannot resume: its history calls tools the runtime agent "
            f"does not implement: {', '.join(names)}. Add them to the agent (their results are "
            "in the history and the model may call them again)."
        )
        self.session_id = session_id
        self.names = names


class ToolError(StokerError):
    """A tool definition or lookup problem on the program's side."""


class ToolUnavailable(ToolError):
    """A call to a tool the session's prefix advertises but this runtime cannot run now
    (its toolset is not registered: the server is down, or this replica started without
    it). Raised inside the call, so the model reads it as the tool's error result."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"`{name}` is unavailable right now: its toolset is not connected to this "
            "runtime (a server may be down, or it was turned off). It may come back later; "
            "carry on without it, or try it again in a later turn."
        )
        self.name = name


class SpawnDepthExceeded(ToolError):
    """Delegation would go deeper than allowed; raised before any provider call."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(
            f"cannot start a sub-agent at depth {depth}: the limit is {limit}. "
            "Do this part of the task yourself instead of delegating it."
        )
        self.depth = depth
        self.limit = limit


class OutputError(StokerError):
    """The model's answer did not validate as the requested output type, after it was
    told what was wrong and asked again (`retries` times). `field` names the first field
    at fault ("" for the whole value), `reason` says why, `text` is the last answer."""

    def __init__(self, output: str, *, field: str, reason: str, text: str, retries: int) -> None:
        where = f"field {field!r}" if field else "the answer"
        super().__init__(
            f"the answer is not a valid {output}: {where}: {reason} (after {retries} "
            f"{'retry' if retries == 1 else 'retries'}). Its text starts {text[:120]!r}; "
            "the conversation holds every attempt"
        )
        self.output = output
        self.field = field
        self.reason = reason
        self.text = text
        self.retries = retries


class CompactionError(StokerError):
    """A history could not be compacted: nothing could be cut, or the summary failed (the
    session is left as it was). Raised by a turn only when its request would not fit."""


class StoreError(StokerError):
    """The database cannot be used as it is (newer schema, unreachable server, ...)."""


class DatabaseNotFound(StoreError):
    """A command that only reads sessions was given a SQLite file that does not exist.
    Reading never creates a database (a mistyped path would otherwise become an empty
    one); the commands that store sessions do. `named_by` is where the path came from."""

    def __init__(self, path: str, *, named_by: str = "--db") -> None:
        super().__init__(
            f"no session database at {path} (from {named_by}), and reading creates none: "
            "check the path; a command that stores sessions creates it "
            f"(`stoker chat --db {path}`, `stoker run --db {path} --session NAME ...`)"
        )
        self.path = path
        self.named_by = named_by


class SessionNotFound(StoreError):
    """No session with this id in the store."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no session {session_id!r} in this store; `stoker sessions list` shows the ones "
            "there are (check STOKER_DB / STOKER_DATABASE_URL if you expected another store)"
        )
        self.session_id = session_id


class AmbiguousSessionId(StoreError):
    """A shortened session id (as `stoker sessions list` prints them) that more than one
    session's id starts with; `candidates` are some of them."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        super().__init__(
            f"{prefix!r} starts more than one session id: {', '.join(candidates)}. "
            "Give more of the id (`stoker sessions list` shows enough of each to tell apart)."
        )
        self.prefix = prefix
        self.candidates = candidates


class StoreUnavailable(StoreError):
    """The database did not answer in time (down, restarting, unreachable). The call may
    be retried once it is back; a write cut off mid-commit may or may not be stored, which
    is what idempotency keys settle. `where` is the location without its password."""

    retry_after = 2  # seconds a client is told to wait before retrying

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(
            f"the session database at {where} is unreachable right now ({reason}); "
            f"retry in a few seconds"
        )
        self.where = where


class ConcurrentWrite(StoreError):
    """Another process wrote to this session in the same instant, which its lock should
    have prevented (the lock's connection broke mid-turn). This write was not stored."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} was written by another process at the same moment "
            "(its lock was lost with a broken database connection); this write was not "
            "stored. Send the message again (with its Idempotency-Key) to continue."
        )
        self.session_id = session_id
