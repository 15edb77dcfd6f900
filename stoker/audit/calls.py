"""Model calls in a trace: which spans are calls, their usage, and their conversations.

A call is a span the GenAI semantic conventions describe as one (it carries
`gen_ai.usage.input_tokens` and an operation that is not an agent's or a tool's). Its
usage comes from the conventions' attributes, mapped once here, quirks commented:

- `gen_ai.usage.input_tokens` is the whole input, cache reads and writes included;
- `gen_ai.usage.cache_read.input_tokens` the read, `gen_ai.usage.cache_creation.input_tokens`
  the write;
- Stoker's own spans also say how the write splits between TTLs
  (`stoker.usage.written_1h_tokens`); other writes are counted at the short TTL.

Calls are grouped into conversations by `gen_ai.conversation.id`; a Stoker session names
its parent on its turn spans (`stoker.session.parent_id`), so forks, reviews and
sub-agents hang under it as in `stoker report`. A call with no conversation id joins the
other calls of its trace when the trace holds several (an application that wraps a
conversation in one span), else the calls of its service and model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stoker.audit.otlp import Span
from stoker.wire.usage import Usage

_NOT_CALLS = frozenset({"invoke_agent", "create_agent", "execute_tool", "embeddings"})
INPUT = "gen_ai.usage.input_tokens"
OUTPUT = "gen_ai.usage.output_tokens"
READ = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
WRITTEN = (
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedCall:
    """One model call as the trace tells it."""

    conversation: str
    role: str  # the session's role where Stoker said it ("main", "fork", ...), else "main"
    model: str
    provider: str  # gen_ai.provider.name (or the older gen_ai.system), lower case
    started_at: float
    ended_at: float
    usage: Usage
    purpose: str  # "turn", or a keep-warm Stoker sent ("ping", "seal")
    cache_known: bool  # the span carries cache figures (else read and written are unknown)
    ttl_known: bool  # it says which TTL its writes had
    verdict: str | None  # what Stoker itself said of the call, where it did
    explanation: str | None
    order: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    id: str
    parent_id: str | None
    role: str
    calls: tuple[TracedCall, ...]


def is_call(span: Span) -> bool:
    operation = span.text("gen_ai.operation.name")
    return span.number(INPUT) is not None and operation not in _NOT_CALLS


def usage_of(span: Span) -> tuple[Usage, bool, bool]:
    """The span's usage, whether it carried cache figures, and whether it split writes by TTL."""
    total = span.number(INPUT) or 0
    read = span.number(*READ)
    written = span.number(*WRITTEN)
    known = read is not None or written is not None
    read, written = read or 0, written or 0
    long = span.number("stoker.usage.written_1h_tokens")
    # Some instrumentations put Anthropic's own `input_tokens` here, which counts only what
    # follows the last breakpoint: a total smaller than the cache figures is that.
    uncached = total if total < read + written else total - read - written
    written_1h = min(long or 0, written)
    usage = Usage(
        uncached=uncached,
        written_5m=written - written_1h,
        written_1h=written_1h,
        read=read,
        output=span.number(OUTPUT) or 0,
    )
    return usage, known, long is not None


def _fallback_key(span: Span, per_trace: dict[str, int]) -> str:
    if per_trace.get(span.trace_id, 0) > 1:
        return f"trace {span.trace_id}"
    service = span.resource.get("service.name") or "unknown service"
    model = span.text("gen_ai.response.model", "gen_ai.request.model") or "unknown model"
    return f"{service} · {model}"


def conversations(spans: Sequence[Span]) -> tuple[list[Conversation], int]:
    """The trace's conversations (parents before their children, in the order they began)
    and how many calls had no conversation id."""
    calls = [s for s in spans if is_call(s)]
    per_trace: dict[str, int] = {}
    for s in calls:
        per_trace[s.trace_id] = per_trace.get(s.trace_id, 0) + 1
    parents: dict[str, str] = {}
    roles: dict[str, str] = {}
    for s in spans:
        sid = s.text("stoker.session.id", "gen_ai.conversation.id")
        if sid is None:
            continue
        parent = s.text("stoker.session.parent_id")
        if parent:
            parents[sid] = parent
        role = s.text("stoker.session.role")
        if role:
            roles[sid] = role
    grouped: dict[str, list[TracedCall]] = {}
    unnamed = 0
    for s in calls:
        key = s.text("gen_ai.conversation.id", "stoker.session.id")
        if key is None:
            unnamed += 1
            key = _fallback_key(s, per_trace)
        usage, known, ttl = usage_of(s)
        grouped.setdefault(key, []).append(
            TracedCall(
                conversation=key,
                role=roles.get(key, "main"),
                model=s.text("gen_ai.response.model", "gen_ai.request.model") or "unknown",
                provider=(s.text("gen_ai.provider.name", "gen_ai.system") or "").lower(),
                started_at=s.start,
                ended_at=s.end,
                usage=usage,
                purpose=s.text("stoker.call.purpose") or "turn",
                cache_known=known,
                ttl_known=ttl,
                verdict=s.text("stoker.cache.verdict"),
                explanation=s.text("stoker.cache.explanation"),
                order=s.order,
            )
        )
    out = [
        Conversation(
            id=key,
            parent_id=parents.get(key) if parents.get(key) in grouped else None,
            role=roles.get(key, "main"),
            calls=tuple(sorted(found, key=lambda c: (c.started_at, c.ended_at, c.order))),
        )
        for key, found in grouped.items()
    ]
    out.sort(key=lambda c: (c.calls[0].started_at, c.calls[0].order))
    return out, unnamed
