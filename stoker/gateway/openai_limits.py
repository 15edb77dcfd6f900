"""A client's `stop` and token limits, applied to the answer it receives.

The gateway is an agent, not a raw model: one message may take several model calls
(tools, reviews), and those calls are the session's, sent with the session's own
settings so that its cached prefix never changes because one client sent a limit. So
`stop` and `max_tokens` / `max_completion_tokens` (Chat Completions) and
`max_output_tokens` (Responses) act on the answer the client is sent, streamed or not:

- the answer ends before the first stop sequence to appear in it (the first to be
  complete, as a model stops on it; the sequence is not sent): finish reason "stop";
- an answer (so cut) longer than the limit is cut to its first tokens: finish reason
  "length", a Response `incomplete` with `incomplete_details.reason` "max_output_tokens"
  (`max_tokens` and `max_completion_tokens` both sent: the smaller).

A limit is a whole number from 1; `stop` a string or a list of up to four, each of 1 to
1,000 characters. Anything else is a 400 in OpenAI's shape naming the field.

The session keeps the whole answer, and usage reports the tokens the model really
produced (they are billed). The history the client resends next (with the cut answer)
continues the session: what the gateway remembers for it is the answer as sent.

Tokens are counted by the tokenizer of the session's model (`stoker.cache.tokens`: exact
for OpenAI's models, the estimate for Anthropic's). A tokenizer's first tokens can
change as text follows them, so the answer is counted in pieces that cannot: it is cut
where no tokenizer merges across (after a newline before a letter, before a space
between two letters), and the pieces' counts add up to the whole text's. The limit cuts
inside the first piece that takes the count over it, after as many of that piece's
tokens as are left.

A stream sends only text no later text can take back: a tail that may be the start of a
stop sequence waits for what follows it, and with a token limit so does the last piece,
until it is complete (a word, in prose). One `Cutter` serves both forms, so a streamed
answer is, to the character, the answer sent whole. A cut stream still ends when the
turn does: the turn's end is when the session stores the answer, and with it where the
client's history continues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from stoker.cache.models import model_info
from stoker.cache.tokens import ESTIMATE, Tokenizer, tokenizer_for
from stoker.errors import ConfigError
from stoker.gateway.errors import InvalidParam

MAX_STOPS = 4  # OpenAI's limit
MAX_STOP_CHARS = 1000  # keeps a stream's look-back for a stop sequence cheap

Reason = Literal["stop", "length"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cut:
    """The answer as the client receives it; `reason` None when nothing was cut."""

    text: str
    reason: Reason | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What a request asked of its answer: stop sequences, a token limit."""

    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    tokenizer: Tokenizer = ESTIMATE

    def counted_as(self, model: str) -> Limits:
        """These limits, counting tokens as `model`'s provider does (a model Stoker does
        not know: by the estimate)."""
        try:
            return replace(self, tokenizer=tokenizer_for(model_info(model)))
        except ConfigError:
            return self

    def cut(self, text: str) -> Cut:
        """`text` as the client receives it."""
        return Cutter(self).finish(text)

    def cutter(self) -> Cutter:
        return Cutter(self)


NO_LIMITS = Limits()


class Cutter:
    """One answer, cut as it streams: `feed` each delta and send what it returns, then
    `finish` with the whole answer for the rest and the reason."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.text = ""  # everything fed so far
        self.sent = 0  # how much of `text` has been returned
        self.reason: Reason | None = None  # set once the cut is final
        self._scanned = 0  # where the next search for a stop sequence may start
        self._piece_at = 0  # where the piece being counted starts
        self._tokens = 0  # the tokens of the pieces before it

    @property
    def sent_text(self) -> str:
        """The answer as sent so far."""
        return self.text[: self.sent]

    def feed(self, delta: str) -> str:
        """What of the answer may be sent now that `delta` followed it."""
        if self.reason is not None:
            return ""
        self.text += delta
        return self._send(self._settled(final=False))

    def finish(self, answer: str) -> Cut:
        """The rest to send once the answer is `answer`, and why it was cut. When the
        fed deltas are not the start of `answer` (a turn whose reply is not the text it
        streamed), the stream ends with what was fed."""
        rest = ""
        if self.reason is None:
            if answer.startswith(self.text):
                self.text = answer
            rest = self._send(self._settled(final=True))
        return Cut(text=rest, reason=self.reason)

    def _send(self, end: int) -> str:
        out = self.text[self.sent : end]
        self.sent = max(self.sent, end)
        return out

    def _settled(self, *, final: bool) -> int:
        """How much of `text` belongs to the answer whatever follows; sets `reason`
        when the cut is known."""
        end = self._stop_at()
        if end is not None:
            self.reason = "stop"
            final = True
        else:
            end = len(self.text) if final else self._held_from()
        if self.limits.max_tokens is None:
            return end
        return self._counted(end, final=final)

    def _counted(self, end: int, *, final: bool) -> int:
        """How much of `text[:end]` is within the token limit and settled; the last piece
        is settled only when `end` is the answer's end (`final`)."""
        limit, tokenizer = self.limits.max_tokens or 0, self.limits.tokenizer
        found = _PIECE_BOUNDARY.finditer(self.text, self._piece_at + 1, end)  # nothing past end
        for bound in [m.start() for m in found] + ([end] if final else []):
            piece = self.text[self._piece_at : bound]
            count = tokenizer.count(piece)
            if self._tokens + count > limit:
                self.reason = "length"
                return self._piece_at + _first_tokens(tokenizer, piece, limit - self._tokens)
            self._tokens += count
            self._piece_at = bound
        return end if final else self._piece_at

    def _stop_at(self) -> int | None:
        """Where the first stop sequence to be complete starts (the longest one, of
        several complete at once), if one is."""
        best: tuple[int, int] | None = None  # (end, -length)
        for stop in self.limits.stop:
            at = self.text.find(stop, max(0, self._scanned - len(stop) + 1))
            if at >= 0 and (best is None or (at + len(stop), -len(stop)) < best):
                best = (at + len(stop), -len(stop))
        self._scanned = len(self.text)
        return None if best is None else best[0] + best[1]

    def _held_from(self) -> int:
        """Where the tail that may begin a stop sequence starts (the end: none)."""
        text, longest = self.text, max(map(len, self.limits.stop), default=0)
        for at in range(max(self.sent, len(text) - longest + 1), len(text)):
            if any(stop.startswith(text[at:]) for stop in self.limits.stop):
                return at
        return len(text)


# Where the text is cut into pieces: after a newline before a letter, before a space
# between two letters. Neither OpenAI's encodings (`stoker.cache.tokens._cut`) nor the
# estimate have a token across either. (`[^\W\d_]` is a letter; a space needs the letter
# after it, which a stream has only once it arrives.)
_PIECE_BOUNDARY = re.compile(r"(?<=\n)(?=[^\W\d_])|(?<=[^\W\d_])(?= [^\W\d_])")


def _first_tokens(tokenizer: Tokenizer, text: str, n: int) -> int:
    """How many characters of `text` its first `n` tokens hold (a character split between
    tokens is left out)."""
    size = sum(map(len, tokenizer.pieces(text)[:n]))
    for chars, char in enumerate(text):
        size -= len(char.encode("utf-8", "surrogatepass"))
        if size < 0:
            return chars
    return len(text)


# -- the request's values -----------------------------------------------------------------------


def token_limit(value: object, param: str) -> int | None:
    """A token limit as sent: absent (None), or a whole number from 1."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidParam(
            f"Invalid {param!r}: expected an integer, got {type(value).__name__}",
            param=param,
            code="invalid_type",
        )
    if value < 1:
        raise InvalidParam(
            f"Invalid {param!r}: integer below minimum value. Expected a value >= 1, "
            f"but got {value} instead.",
            param=param,
            code="integer_below_min_value",
        )
    return value


def stop_sequences(value: object, param: str = "stop") -> tuple[str, ...]:
    """Stop sequences as sent: absent, a string, or a list of up to four strings."""
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise InvalidParam(
            f"Invalid {param!r}: expected a string or a list of up to {MAX_STOPS} strings",
            param=param,
            code="invalid_type",
        )
    if len(stops) > MAX_STOPS:
        raise InvalidParam(
            f"Invalid {param!r}: at most {MAX_STOPS} stop sequences, got {len(stops)}",
            param=param,
            code="array_above_max_length",
        )
    for s in stops:
        if not 1 <= len(s) <= MAX_STOP_CHARS:
            raise InvalidParam(
                f"Invalid {param!r}: a stop sequence has 1 to {MAX_STOP_CHARS} characters",
                param=param,
            )
    return tuple(stops)


def smallest(*limits: int | None) -> int | None:
    """The tightest of several limits (None: no limit)."""
    given = [n for n in limits if n is not None]
    return min(given) if given else None
