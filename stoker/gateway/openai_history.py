"""Which session an OpenAI client's request continues, found from the history it resends.

OpenAI clients keep the conversation themselves and resend all of it on every call;
most frameworks know nothing of a session header. The gateway holds the conversation
already (the prefix is frozen server-side, the history is the session's), so it only
needs to know *which* session a resent history is, and what in it is new.

That is a hash chain over the messages as the client holds them: who said what, each
message's text (a string and a list of text parts with the same text are one message;
ids, names and non-text parts are left out, since clients rewrite them freely). System
and developer messages are left out too: the prefix is the server's, and a client whose
system prompt carries the time would otherwise start a new session on every call.
After each answer the store keeps, per session, the hash of the history the client now
holds (its messages plus the answer) and the session's message count. A request whose
history up to its last assistant message has that hash continues that session, and
its messages after that point are the new message. The answer in that hash is the one
the client was sent, cut by its `stop` or token limit if it sent one (`openai_limits`),
while the session keeps the whole answer. A history that was edited, or a
session that got a message some other way since, matches nothing and starts a new
session: continuing would show the model a conversation the client does not have.
A message that fails (the provider is down) leaves the client's history where it was,
so that point is stored again with the session's new count: the client's retry, the
same history and message, continues the session (which finishes the cut-off turn).

In order, a request continues: the session its `X-Stoker-Session` header names; the
session whose answer its `previous_response_id` names (Responses API); the session its
history matches; else a new session.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from starlette.requests import Request

from stoker.agent.output import OutputSpec
from stoker.agent.seams import Callbacks
from stoker.gateway.errors import InvalidParam
from stoker.gateway.http import app_state, idempotency_key, user_of
from stoker.gateway.images import WITHOUT_TEXT, data_url, image_blocks
from stoker.gateway.openai_limits import NO_LIMITS, Limits
from stoker.gateway.service import Gateway
from stoker.gateway.sse import Event, turn_events
from stoker.gateway.timing import timed
from stoker.gateway.views import Reply
from stoker.store._sql import Op
from stoker.store.gateway_log import client_history_op
from stoker.wire.blocks import ImageBlock

SESSION_HEADER = "X-Stoker-Session"
START = "stoker-openai-history-v1"
_PLACEHOLDERS = frozenset({"", "stoker", "default"})  # model names that choose nothing


@dataclass(frozen=True, slots=True, kw_only=True)
class Said:
    """One message of a client's conversation, as far as continuity goes."""

    role: Literal["user", "assistant"]
    text: str
    # The image parts' URLs, as sent: only a new message's are read (`new_images`); the
    # chain hash, which finds the session, is of the text alone.
    images: tuple[object, ...] = ()


def step(previous: str, said: Said) -> str:
    """The chain's hash after `said`."""
    return _step(previous, said.role, said.text)


@functools.lru_cache(maxsize=4096)
def _step(previous: str, role: str, text: str) -> str:
    # Remembered: a client resends its whole conversation with every message, so each
    # request would hash every earlier message again.
    data = json.dumps([previous, role, text], ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


def chain(messages: Iterable[Said], start: str = START) -> str:
    h = start
    for said in messages:
        h = step(h, said)
    return h


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """A request's messages (user and assistant only), split where the gateway answered last."""

    messages: tuple[Said, ...]
    start: str = START  # the hash of what came before `messages` (a previous response's)

    @property
    def _answered(self) -> int:
        """How many messages come before the trailing user messages."""
        n = len(self.messages)
        while n and self.messages[n - 1].role == "user":
            n -= 1
        return n

    @property
    def known(self) -> str | None:
        """The hash of the history up to its last assistant message (None without one)."""
        n = self._answered
        return chain(self.messages[:n], self.start) if n else None

    def new_text(self, param: str) -> str:
        """The trailing user messages, joined: what this request adds."""
        new = [s.text for s in self.messages[self._answered :]]
        if not new:
            raise InvalidParam(
                f"the last message of {param} must be a user message: it is what the "
                "gateway answers",
                param=param,
            )
        return "\n\n".join(new)

    def new_images(self, param: str) -> tuple[tuple[str, str], ...]:
        """The trailing user messages' images, (media_type, base64) each: data URLs only
        (the gateway fetches no URL on a client's behalf)."""
        out = []
        for said in self.messages[self._answered :]:
            for url in said.images:
                image = data_url(url)
                if image is None:
                    raise InvalidParam(
                        "an image part must carry its image as a data: URL "
                        "(data:image/png;base64,...); the gateway does not fetch URLs",
                        param=param,
                    )
                out.append(image)
        return tuple(out)

    def after(self, answer: str) -> str:
        """The hash of the history the client holds once it has `answer`."""
        return step(chain(self.messages, self.start), Said(role="assistant", text=answer))


async def find_session(
    request: Request,
    gateway: Gateway,
    user: str,
    conversation: Conversation,
    *,
    model: str | None,
    previous_response_id: str | None = None,
) -> tuple[str, Conversation]:
    """The session this request continues, or a new one (see the module docstring), and
    the conversation as the client now holds it (after a previous response's history)."""
    sid = request.headers.get(SESSION_HEADER)
    if sid:
        await gateway.authorize(user, sid)
        return sid, conversation
    store = gateway.store
    if previous_response_id is not None:
        found = await store.session_by_client_history(user, response_id=previous_response_id)
        if found is None:
            raise InvalidParam(
                f"no response {previous_response_id[:64]!r} ends a conversation of yours: "
                "it is unknown, or the conversation went on after it; resend the history "
                "instead",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return found[0], replace(conversation, start=found[1])
    known = conversation.known
    if known is not None:
        found = await store.session_by_client_history(user, history=known)
        if found is not None:
            return found[0], conversation
    wanted = (model or "").strip()
    overrides = {"model": wanted} if wanted not in _PLACEHOLDERS else {}
    return await gateway.create_session(user, overrides), conversation


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One request of an OpenAI client, resolved: whose, which session, what is new."""

    gateway: Gateway
    user: str
    session_id: str
    text: str
    blocks: tuple[ImageBlock, ...] = ()  # the new message's images, after its text
    conversation: Conversation
    model: str
    idempotency_key: str | None

    response_id: str | None = None  # a Responses API answer's id, to continue from
    limits: Limits = NO_LIMITS  # what the client is sent of the answer
    output: OutputSpec[Any] | None = None  # the JSON the client asked the answer to be

    async def answer(self) -> tuple[Reply, dict[str, str]]:
        """The turn's reply, with its Server-Timing header."""
        return await timed(self._run(None))

    async def events(self) -> AsyncIterator[Event]:
        """The turn's events (a bad message raises here, as a 4xx, not in a stream)."""
        return await turn_events(self.gateway, self._run)

    async def _run(self, callbacks: Callbacks | None) -> Reply:
        """The turn, and where the client's conversation stands after it, stored in the
        answer's transaction: a client that hangs up mid-stream still finds its session
        next time."""
        store = self.gateway.store
        try:
            return await self.gateway.send(
                self.user,
                self.session_id,
                self.text,
                blocks=self.blocks,
                idempotency_key=self.idempotency_key,
                callbacks=callbacks,
                output=self.output,
                after=self._history_after,
            )
        except Exception:
            # The client holds what it held before, and will resend it with its message
            # again: that retry must find this session (where the unanswered message now
            # is, and is finished as a cut-off turn), not start a new one without the
            # conversation. A first message has no history to find it by.
            if self.conversation.known is not None:
                await store.remember_client_history(self.session_id, self.conversation.known)
            raise

    def _history_after(self, reply: Reply) -> list[Op]:
        """Where the client's conversation stands once it has `reply` (cut as it is sent)."""
        history = self.conversation.after(self.limits.cut(reply.text).text)
        return [client_history_op(continued_in(reply), history, response_id=self.response_id)]


def continued_in(reply: Reply) -> str:
    """The session the conversation goes on in: another one after /new, /reset, /clear."""
    return reply.new_session_id or reply.session_id


async def exchange(
    request: Request,
    conversation: Conversation,
    *,
    param: str,
    model: str | None,
    previous_response_id: str | None = None,
    response_id: str | None = None,
    limits: Limits = NO_LIMITS,
    output: OutputSpec[Any] | None = None,
) -> Exchange:
    """The request `request`, whose messages (in field `param`) are `conversation`;
    `response_id` names its answer (Responses API); `limits` cut what the client gets
    (counted with the tokenizer of the session's model)."""
    user = user_of(request)
    blocks = image_blocks(conversation.new_images(param))
    text = conversation.new_text(param)
    if not text.strip() and blocks:
        text = WITHOUT_TEXT
    key = idempotency_key(request)
    gateway = app_state(request).gateway
    sid, conversation = await find_session(
        request,
        gateway,
        user,
        conversation,
        model=model,
        previous_response_id=previous_response_id,
    )
    model = gateway.pool.model_of(sid) or model or gateway.defaults.model
    return Exchange(
        gateway=gateway,
        user=user,
        session_id=sid,
        text=text,
        blocks=blocks,
        conversation=conversation,
        model=model,
        idempotency_key=key,
        response_id=response_id,
        limits=limits.counted_as(model),
        output=output,
    )
