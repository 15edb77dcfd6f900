"""A client's `stop` and token limits cut the answer it receives (`openai_limits`): through
the official `openai` SDK, plain and streamed, with the finish reasons OpenAI gives; as
400s naming the field when invalid; never in the session, whose next request is the one
it would have been; and, by generation, a streamed answer cut exactly as a whole one."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.cache.tokens import count_tokens, tokenizer_named
from stoker.gateway.app import create_app
from stoker.gateway.errors import InvalidParam
from stoker.gateway.openai_limits import Cut, Limits, stop_sequences, token_limit
from stoker.gateway.server import serve_in_thread
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from stoker.wire.request import Request
from tests.test_gateway_support import TOKENS, Rig, auth, client, make_rig, tokens

KEY = TOKENS["alice"]
# The simulator answers "Understood: " and the message. By the estimate (the tokenizer of
# the simulator's Claude model) "Understood" is "Unde" "rsto" "od".
ANSWER = "Understood: first"


class _Trickle(ProviderWrapper):
    """The simulator, its answer streamed three characters at a time (it sends one delta)."""

    async def complete(self, request: Request, context: CallContext) -> Completion:
        completion = await self.inner.complete(request, replace(context, on_text=None))
        text = completion.message.text
        for at in range(0, len(text), 3):
            if context.on_text is not None:
                context.on_text(text[at : at + 3])
        return completion


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    rig = make_rig(SQLiteStore(tmp_path / "sessions.db"))
    rig.provider = _Trickle(rig.sim)
    with serve_in_thread(create_app(rig.gateway, tokens=tokens())) as base:
        yield base


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=url + "/v1", api_key=KEY, max_retries=0, _strict_response_validation=True
    )


def _sessions(url: str) -> list[str]:
    r = httpx.get(url + "/v1/sessions", headers={"Authorization": f"Bearer {KEY}"})
    return [s["id"] for s in r.json()["sessions"]]


FIRST: Any = [{"role": "user", "content": "first"}]
CUTS: list[tuple[dict[str, Any], str, str]] = [
    ({}, ANSWER, "stop"),
    ({"stop": ":"}, "Understood", "stop"),
    ({"stop": ["zz", "ood: first", "d:"]}, "Understoo", "stop"),  # the first to be complete
    ({"max_tokens": 2}, "Understo", "length"),
    ({"max_completion_tokens": 3, "max_tokens": 50}, "Understood", "length"),  # the smaller
    ({"max_tokens": 3, "stop": "o"}, "Underst", "stop"),  # the stop comes first
    ({"max_tokens": 1, "stop": "o"}, "Unde", "length"),
    ({"max_tokens": 100, "stop": "nothing"}, ANSWER, "stop"),
]


@pytest.mark.parametrize(("limits", "text", "reason"), CUTS)
def test_stop_and_max_tokens_cut_the_chat_answer_plain_and_streamed(
    url: str, limits: dict[str, Any], text: str, reason: str
) -> None:
    with _client(url) as client:
        completion = client.chat.completions.create(
            model="stoker", messages=FIRST, extra_body=limits
        )
        chunks = list(
            client.chat.completions.create(
                model="stoker", messages=FIRST, stream=True, extra_body=limits
            )
        )
    [choice] = completion.choices
    assert (choice.message.content, choice.finish_reason) == (text, reason)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert (streamed, chunks[-1].choices[0].finish_reason) == (text, reason)
    assert completion.usage is not None
    assert completion.usage.completion_tokens == count_tokens(ANSWER)  # what the model made


def test_max_output_tokens_makes_an_incomplete_response_plain_and_streamed(url: str) -> None:
    with _client(url) as client:
        response = client.responses.create(model="stoker", input="first", max_output_tokens=2)
        with client.responses.stream(model="stoker", input="first", max_output_tokens=2) as stream:
            events = list(stream)  # (the SDK's final response is only a completed one)
        assert events[-1].type == "response.incomplete"
        streamed = events[-1].response
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        whole = client.responses.create(model="stoker", input="first", max_output_tokens=6)
    for cut in (response, streamed):
        assert cut.status == "incomplete"
        assert cut.incomplete_details is not None
        assert cut.incomplete_details.reason == "max_output_tokens"
        assert cut.max_output_tokens == 2
        assert cut.output_text == "Understo"
        assert [item.status for item in cut.output] == ["incomplete"]
    assert "".join(deltas) == "Understo"
    assert (whole.status, whole.output_text, whole.incomplete_details) == (
        "completed",
        ANSWER,
        None,
    )


INVALID: list[tuple[str, dict[str, Any], str, str]] = [
    ("/chat/completions", {"max_tokens": -1}, "max_tokens", "integer_below_min_value"),
    ("/chat/completions", {"max_tokens": 0}, "max_tokens", "integer_below_min_value"),
    ("/chat/completions", {"max_tokens": 1.5}, "max_tokens", "invalid_type"),
    ("/chat/completions", {"max_tokens": "5"}, "max_tokens", "invalid_type"),
    ("/chat/completions", {"max_tokens": True}, "max_tokens", "invalid_type"),
    (
        "/chat/completions",
        {"max_completion_tokens": -5},
        "max_completion_tokens",
        "integer_below_min_value",
    ),
    ("/chat/completions", {"stop": ["a", "b", "c", "d", "e"]}, "stop", "array_above_max_length"),
    ("/chat/completions", {"stop": [1]}, "stop", "invalid_type"),
    ("/chat/completions", {"stop": {"a": "b"}}, "stop", "invalid_type"),
    ("/chat/completions", {"stop": ""}, "stop", "invalid_value"),
    ("/chat/completions", {"stop": "x" * 1001}, "stop", "invalid_value"),
    ("/responses", {"max_output_tokens": -3}, "max_output_tokens", "integer_below_min_value"),
    ("/responses", {"max_output_tokens": [5]}, "max_output_tokens", "invalid_type"),
]


_BODIES: dict[str, Any] = {
    "/chat/completions": {"model": "stoker", "messages": FIRST, "stream": True},
    "/responses": {"model": "stoker", "input": "first"},
}


def test_invalid_limits_are_400s_naming_the_field_and_store_nothing(url: str) -> None:
    with _client(url) as client:
        for path, limits, param, code in INVALID:
            with pytest.raises(openai.BadRequestError) as refused:
                client.post(path, body={**_BODIES[path], **limits}, cast_to=object)
            assert (refused.value.param, refused.value.code) == (param, code), limits
            assert refused.value.type == "invalid_request_error"
            assert param in refused.value.message
    assert _sessions(url) == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=10,
)


def _parsed(parse: Callable[[], object]) -> object:
    """What `parse` returns, or the 400 it raises."""
    try:
        return parse()
    except InvalidParam as exc:
        return exc


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_any_json_value_is_a_limit_or_a_400_naming_its_field(value: object) -> None:
    for param in ("max_tokens", "max_output_tokens"):
        limit = _parsed(lambda: token_limit(value, param))  # noqa: B023 (called at once)
        if isinstance(limit, InvalidParam):
            assert limit.param == param
        else:
            assert limit is None or (type(limit) is int and limit >= 1)
    stops = _parsed(lambda: stop_sequences(value))
    if isinstance(stops, InvalidParam):
        assert stops.param == "stop"
    else:
        assert isinstance(stops, tuple)
        assert len(stops) <= 4
        assert all(isinstance(s, str) and s for s in stops)


# -- the session never sees them ---------------------------------------------------------------


async def _conversation(c: httpx.AsyncClient, user: str, limits: dict[str, Any]) -> str:
    """Two messages, the first with `limits` (and streamed), the second resending the
    history as the client holds it; the session they went to."""
    first = {"messages": FIRST, "stream": True, **limits}
    r = await c.post("/v1/chat/completions", json=first, headers=auth(user))
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    answer = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    history = [*FIRST, {"role": "assistant", "content": answer}, {"role": "user", "content": "2"}]
    r = await c.post("/v1/chat/completions", json={"messages": history}, headers=auth(user))
    assert r.status_code == 200, r.text
    return r.headers["x-stoker-session"]


async def test_limits_leave_the_session_and_its_next_request_as_they_were(
    store: SqlEventStore,
) -> None:
    rig: Rig = make_rig(store)
    async with client(rig) as c:
        limited = await _conversation(c, "alice", {"stop": ":", "max_tokens": 1})
        plain = await _conversation(c, "bob", {})
        turns = {
            sid: (await c.get(f"/v1/sessions/{sid}", headers=auth(user))).json()["turns"]
            for sid, user in ((limited, "alice"), (plain, "bob"))
        }
    # The cut answer's history found its session; the session holds the whole answer.
    assert [(t["user"], t["answer"]) for t in turns[limited]] == [
        ("first", ANSWER),
        ("2", "Understood: 2"),
    ]
    alice_first, bob_first, alice_next, bob_next = (
        json.dumps(rig.sim.requests[i], sort_keys=True).encode() for i in (0, 2, 1, 3)
    )
    assert alice_first == bob_first  # the agent's calls keep their own max_tokens, no stop
    assert alice_next == bob_next  # byte for byte: the prefix is the one it would have been
    assert rig.sim.outcomes[1].usage.read > 0  # and the limited session's cache is read


# -- streamed as whole, by generation ----------------------------------------------------------

_pieces = st.sampled_from(["a", "b", " ", ".", "\n", "中", "é", "hello", " world", "  ", "\nX"])
_texts = st.lists(_pieces, max_size=30).map("".join)
_stops = st.lists(st.text(alphabet="ab .\n", min_size=1, max_size=4), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    text=_texts,
    stops=_stops,
    limit=st.none() | st.integers(1, 12),
    splits=st.lists(st.integers(0, 90)),
    tokenizer=st.sampled_from(["estimate", "o200k_base"]),
)
def test_a_streamed_answer_is_cut_exactly_as_the_whole_answer(
    text: str, stops: list[str], limit: int | None, splits: list[int], tokenizer: str
) -> None:
    limits = Limits(stop=tuple(stops), max_tokens=limit, tokenizer=tokenizer_named(tokenizer))
    whole = limits.cut(text)
    cutter = limits.cutter()
    streamed, at = "", 0
    for end in [*sorted(min(s, len(text)) for s in splits), len(text)]:
        streamed += cutter.feed(text[at:end])
        at = end
    rest = cutter.finish(text)
    assert Cut(text=streamed + rest.text, reason=rest.reason) == whole
    # The whole answer: up to the first stop sequence to be complete, then the limit.
    complete = [(text.find(s) + len(s), -len(s)) for s in stops if s in text]
    stopped = text[: sum(min(complete))] if complete else text
    assert stopped.startswith(whole.text)
    counted = tokenizer_named(tokenizer).count
    if limit is not None and counted(stopped) > limit:
        assert whole.reason == "length"
        assert counted(whole.text) <= limit
    else:
        assert (whole.text, whole.reason) == (stopped, "stop" if complete else None)
