"""Where cache breakpoints go, so every request reads what the previous one wrote.

Anthropic (at most 4 markers): one at the end of tools+system, one rolling on the newest
cacheable block, and an intermediate one on the previous rolling write whenever a turn
appended so many positions that the previous write would fall outside the provider's
20-position lookback (runs of tool_use, and of tool_result, count as one position). A
long-lived entry the session holds further back (a sub-agent's 1-hour anchor on the
parent's history, a seal) gets a marker of its own once the others cannot reach it: when
the newer short entries have expired, it is what the next call reads.
OpenAI GPT-5.6+: one explicit breakpoint at the end of the stable developer prefix; the
implicit breakpoint covers the rest. Older OpenAI models take no markers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from stoker.cache.models import ModelInfo
from stoker.cache.time_policy import TimePolicy
from stoker.errors import ConfigError
from stoker.wire.blocks import Block, RedactedThinkingBlock, TextBlock, ThinkingBlock
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.request import Breakpoint, Ttl

BlockRef = tuple[int, int]  # (message index, block index)


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePolicy:
    """How a session uses the cache: where breakpoints go and with which TTL, and how it
    crosses idle gaps (`keep_warm`, see `stoker.cache.time_policy`).

    The defaults write 5-minute entries and let the time policy seal the prefix under a
    1-hour entry only when a gap is coming; `system_ttl="1h"` instead pays 2x up front
    on tools+system in every session.
    """

    system_ttl: Ttl = "5m"
    message_ttl: Ttl = "5m"
    lookback: int = 20
    keep_warm: TimePolicy = field(default_factory=TimePolicy)

    def __post_init__(self) -> None:
        if self.system_ttl == "5m" and self.message_ttl == "1h":
            raise ConfigError(
                "message_ttl='1h' needs system_ttl='1h': providers require longer TTLs "
                "before shorter ones"
            )


def child_policy(policy: CachePolicy) -> CachePolicy:
    """The policy a child (a fork, a review, a sub-agent, a summary) writes with. Children
    end soon and never come back to what they add, so their own tail is written at 5
    minutes; and when the parent pays for 1-hour entries itself (`system_ttl="1h"`), the
    child writes nothing at 1 hour at all: its markers on the parent's 1-hour entries read
    them (a read keeps an entry's own TTL), so they may be 5-minute ones."""
    if policy.system_ttl == "1h":
        return replace(policy, system_ttl="5m", message_ttl="5m")
    return replace(policy, message_ttl="5m")


def anchor_ttl(policy: CachePolicy) -> Ttl:
    """The TTL of the entry a child's first call writes at the end of its parent's
    history (`plan_anthropic`'s `anchor`), for the parent to read. A parent on 5-minute
    entries gets a 1-hour one, so it can still seal its prefix before a gap; a parent on
    1-hour entries holds its own, and the child writes the rest of its history at 5
    minutes (`child_policy`)."""
    return "1h" if policy.system_ttl == "5m" else "5m"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    breakpoints: tuple[Breakpoint, ...]
    rolling: BlockRef | None  # the write this request makes, for the next plan


def _cacheable(block: Block) -> bool:
    if isinstance(block, ThinkingBlock | RedactedThinkingBlock):
        return False  # thinking blocks cannot carry cache_control
    return not (isinstance(block, TextBlock) and not block.text)


def last_cacheable(messages: Sequence[Message]) -> BlockRef | None:
    for m in range(len(messages) - 1, -1, -1):
        content = messages[m].content
        for b in range(len(content) - 1, -1, -1):
            if _cacheable(content[b]):
                return (m, b)
    return None


def positions_between(
    messages: tuple[Message, ...] | list[Message], start: BlockRef, end: BlockRef
) -> int:
    """Lookback positions in (start, end], collapsing tool_use runs and tool_result runs."""
    count = 0
    prev_kind = messages[start[0]].content[start[1]].kind
    m, b = start
    while (m, b) != end:
        b += 1
        if b >= len(messages[m].content):
            m, b = m + 1, 0
            if m >= len(messages):
                break
            if not messages[m].content:
                continue
        kind = messages[m].content[b].kind
        if not (kind == prev_kind and kind in ("tool_use", "tool_result")):
            count += 1
        prev_kind = kind
    return count


def _valid(messages: tuple[Message, ...] | list[Message], ref: BlockRef) -> bool:
    return ref[0] < len(messages) and ref[1] < len(messages[ref[0]].content)


def _turn_start(messages: Sequence[Message], at: int) -> int:
    """The user message (with words, not only tool results) that began the turn of
    message `at`; -1 before the first."""
    return next(
        (i for i in range(at, -1, -1) if isinstance(messages[i], UserMessage) and messages[i].text),
        -1,
    )


def _thinking_cut(messages: Sequence[Message], start: int, end: int) -> BlockRef | None:
    """The last block before the first assistant message with thinking in
    `messages[start + 1 : end]`, or None when none of them has thinking."""
    for i in range(start + 1, end):
        message = messages[i]
        if isinstance(message, AssistantMessage) and any(
            isinstance(b, ThinkingBlock | RedactedThinkingBlock) for b in message.content
        ):
            return last_cacheable(messages[:i])
    return None


def stripped_from(messages: Sequence[Message]) -> BlockRef | None:
    """On a model that strips earlier thinking: when the newest message starts a new user
    turn, the last block before the first assistant message that loses its thinking. The
    prefix the provider sees changes after it, so it is the last entry a request can read.
    """
    if not messages or not isinstance(last := messages[-1], UserMessage) or not last.text:
        return None
    end = len(messages) - 1
    return _thinking_cut(messages, _turn_start(messages, end - 1), end)


def readable_part(messages: Sequence[Message], ref: BlockRef) -> BlockRef:
    """On a model that strips earlier thinking: how much of an entry written at `ref`
    a request on `messages` can still read, when the session wrote it within `ref`'s
    own turn. Once a later user turn has begun, that turn's thinking is gone, so the
    entry matches only up to the last block before the turn's first assistant message
    with thinking; after a model switch back the previous write can lie in any earlier
    turn, not only the last. Not for a 1-hour entry the session holds: a child's anchor
    was written by a request that began a turn of its own (the thinking already dropped,
    as the parent sends it once its turn is over), and a seal goes where thinking is cut
    (`stoker.agent.warmth`)."""
    at = ref[0]
    if not any(isinstance(m, UserMessage) and m.text for m in messages[at + 1 :]):
        return ref  # its turn goes on: nothing was dropped yet
    cut = _thinking_cut(messages, _turn_start(messages, at), at + 1)
    return cut if cut is not None and cut < ref else ref


MAX_MARKERS = 4  # Anthropic's limit per request


def reaches(
    messages: tuple[Message, ...] | list[Message],
    target: BlockRef,
    marks: Sequence[BlockRef],
    lookback: int,
) -> bool:
    """Whether a read from one of `marks` finds an entry at `target`: a mark at or after
    it, fewer than `lookback` positions on (the breakpoint itself is the first)."""
    return any(
        m == target or (m > target and positions_between(messages, target, m) < lookback)
        for m in marks
    )


def plan_anthropic(
    messages: tuple[Message, ...] | list[Message],
    *,
    previous: BlockRef | None,
    policy: CachePolicy = CachePolicy(),
    anchor: BlockRef | None = None,
    strips_thinking: bool = False,
    held: BlockRef | None = None,
    stale: bool = False,
    anchored_ttl: Ttl = "1h",
) -> Plan:
    """Breakpoints for the next Anthropic request, given where the previous one wrote.

    `anchor` is the end of a parent's history on a fork's first call. The fork writes an
    entry there for the parent: its next call reads the shared history instead of writing
    it a second time. The entry is a 1-hour one, so the parent can still seal its prefix
    before a gap (a short entry read again stays short, and a seal needs a position of its
    own). Providers want every 1-hour marker before any 5-minute one, so the markers up to
    the anchor are 1-hour ones too; they cover what is already cached and cost nothing.
    `anchored_ttl="5m"` (a parent that writes 1-hour entries itself, `anchor_ttl`) writes
    the anchor at 5 minutes and leaves the markers before it at the policy's TTLs.

    `strips_thinking`: the model drops earlier thinking blocks once a new user turn comes,
    so a tool loop's entries stop matching; a breakpoint where the loop began keeps the
    longest prefix that still matches within reach of the lookback (and the previous
    write, past it, is left out: it can no longer be read).

    `held`: a long-lived entry the session holds on this history (a sub-agent's anchor,
    a seal). Once no other marker reaches it, a marker of its own does, at the short
    TTL: a live entry there is read (and its own TTL kept), a dead one costs nothing more
    than the write it splits. With more candidates than markers, the fork's anchor goes
    first, then the point the thinking was cut at, the previous write, the held entry;
    `stale` (the entry at the previous write has expired, `CacheState.gone`, so a short
    one at the cut, written no later, has too) puts the held entry before those two.
    """
    rolling = last_cacheable(messages)
    if rolling is None:
        return Plan(breakpoints=(Breakpoint(message=None, ttl=policy.system_ttl),), rolling=None)
    lookback = policy.lookback
    if anchor is None or not _valid(messages, anchor) or not anchor < rolling:
        anchor = None
    stripped = stripped_from(messages) if strips_thinking else None
    if strips_thinking and previous is not None and previous != held and _valid(messages, previous):
        previous = readable_part(messages, previous)  # (a held entry is a child's or a seal)
    cut = stripped
    if cut is not None and positions_between(messages, cut, rolling) < lookback:
        cut = None  # the rolling marker's window reaches it
    if not (
        previous is not None
        and _valid(messages, previous)
        and previous < rolling
        and (stripped is None or previous <= stripped)
        and positions_between(messages, previous, rolling) >= lookback
    ):
        previous = None
    short = [m for m in (cut, previous) if m is not None]  # entries a short TTL may have lost
    wanted: list[BlockRef] = [m for m in (anchor,) if m is not None]
    if not stale:
        wanted += short
    if (
        held is not None
        and _valid(messages, held)
        and held < rolling
        and not reaches(messages, held, [*wanted, *short, rolling], lookback)
    ):
        wanted.append(held)
    if stale:
        wanted += short
    marks = set(list(dict.fromkeys(wanted))[: MAX_MARKERS - 2])

    def ttl(ref: BlockRef | None) -> Ttl:
        if anchor is not None and anchored_ttl == "1h" and (ref is None or ref <= anchor):
            return "1h"
        return policy.system_ttl if ref is None else policy.message_ttl

    bps = [Breakpoint(message=None, ttl=ttl(None))]
    bps += [Breakpoint(message=m, block=b, ttl=ttl((m, b))) for m, b in sorted(marks)]
    bps.append(Breakpoint(message=rolling[0], block=rolling[1], ttl=policy.message_ttl))
    return Plan(breakpoints=tuple(bps), rolling=rolling)


def plan_openai(info: ModelInfo) -> Plan:
    """GPT-5.6+ gets an explicit breakpoint after the developer prefix; older models none."""
    if info.regime == "N":
        return Plan(breakpoints=(Breakpoint(message=None, ttl="5m"),), rolling=None)
    return Plan(breakpoints=(), rolling=None)


def plan(
    info: ModelInfo,
    messages: tuple[Message, ...] | list[Message],
    *,
    previous: BlockRef | None,
    policy: CachePolicy = CachePolicy(),
    anchor: BlockRef | None = None,
    thinking: bool = False,
    held: BlockRef | None = None,
    stale: bool = False,
    anchored_ttl: Ttl = "1h",
) -> Plan:
    """The plan the model's cache rules call for (`ModelInfo.lookback`, `ttls`, `regime`):
    Anthropic-style markers wherever a read looks back from a breakpoint (Claude on the
    Claude API, Bedrock and OpenRouter), OpenAI's otherwise; an implicit cache gets none."""
    if info.lookback:
        lookback = min(policy.lookback, info.lookback)
        if lookback != policy.lookback:
            policy = replace(policy, lookback=lookback)
        found = plan_anthropic(
            messages,
            previous=previous,
            policy=policy,
            anchor=anchor,
            strips_thinking=thinking and info.strips_thinking,
            held=held,
            stale=stale,
            anchored_ttl=anchored_ttl,
        )
        return found if "1h" in info.ttls else _short_only(found)
    if info.warm_by_read:
        return plan_implicit(messages)
    return plan_openai(info)


def plan_implicit(messages: tuple[Message, ...] | list[Message]) -> Plan:
    """An implicit cache a read renews (Gemini): no markers are sent (the dialect renders
    none), but the plan says where the entries this request leaves end, the end of tools
    and system and the newest block, so a keep-warm knows what it keeps."""
    rolling = last_cacheable(messages)
    marks = [Breakpoint(message=None, ttl="5m")]
    if rolling is not None:
        marks.append(Breakpoint(message=rolling[0], block=rolling[1], ttl="5m"))
    return Plan(breakpoints=tuple(marks), rolling=rolling)


def _short_only(found: Plan) -> Plan:
    """`found` with every 1-hour marker made a 5-minute one: the model offers no longer
    TTL (Bedrock refuses one on such a model)."""
    if all(b.ttl == "5m" for b in found.breakpoints):
        return found
    marks = tuple(replace(b, ttl="5m") for b in found.breakpoints)
    return Plan(breakpoints=marks, rolling=found.rolling)
