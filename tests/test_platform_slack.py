"""Slack end to end: slack-sdk against a fake Slack on loopback, the gateway's signed
Events API and interactivity routes, the real gateway service and store (both
backends), the simulator as the model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from stoker.agent.review import ReviewConfig
from stoker.gateway.platforms.access import Allowlist
from stoker.gateway.platforms.base import ChatKey
from stoker.gateway.platforms.slack import FORMATTING, WORKING
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.tools import ToolRegistry, Toolset
from stoker.toolsets.workspace import workspace_toolset
from stoker.wire.messages import UserMessage
from stoker.wire.record import CacheRecord
from tests.fake_slack import BOT_ID, BOT_USER
from tests.helpers import make_registry
from tests.images import png
from tests.platform_checks import (
    assert_review_reads_the_turn,
    assert_tenth_reads_the_ninth,
    chat_rig,
)
from tests.slack_rig import DM, USER, Api, Slack, api, bridge, slack_to
from tests.store_fixtures import reopen
from tests.telegram_rig import LONG
from tests.test_gateway_support import make_rig
from tests.test_platform_telegram import _Stuck
from tests.test_review import ReviewingModel, memory

__all__ = ["api"]


async def _exchange(slack: Slack, text: str, *, replies: int = 1, **kwargs: str) -> list[str]:
    """Send `text` as the user (a direct message unless told); what the bot posted."""
    before = len(slack.fake.sent())
    assert await slack.deliver(slack.fake.event(text, **kwargs)) == 200
    await slack.fake.wait_for(lambda: len(slack.fake.sent()) >= before + replies)
    return slack.fake.texts()[before:]


async def test_a_message_runs_a_turn_and_the_reply_arrives(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        event = api.fake.event("hello bot & <friends>")
        assert await slack.deliver(event) == 200
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert api.fake.sent() == [
        {
            "channel": DM,
            "text": "Understood: hello bot &amp; &lt;friends&gt;",
            "mrkdwn": True,
            "unfurl_links": False,
        }
    ]
    # "typing": a reaction on the user's message while the turn ran, gone with the answer
    working = {"channel": DM, "timestamp": event["event"]["ts"], "name": WORKING}
    assert api.fake.sent("reactions.add") == [working]
    assert api.fake.sent("reactions.remove") == [working]
    assert api.fake.reactions == set()
    sid = await store.chat_session("slack", f"{DM}//{USER}")
    assert sid is not None
    view = await rig.gateway.view(f"slack:{USER}", sid)
    assert [(t.user, t.answer) for t in view.turns] == [
        ("hello bot & <friends>", "Understood: hello bot & <friends>")
    ]
    stored = await store.load(sid)
    assert FORMATTING in stored.prefix.system
    assert await store.pending_updates("slack") == []


async def test_in_a_channel_only_a_mention_is_answered_in_its_thread(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    channel = {"channel": "C0CHAN01", "channel_type": "channel"}
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        for ignored in (
            api.fake.event("just chatting", **channel),  # not to the app
            api.fake.event(f"<@{BOT_USER}> the same, as app_mention", **channel),
            api.fake.event(f"<@{BOT_USER}> mine", bot_id=BOT_ID, user=BOT_USER, **channel),
            api.fake.event("edited", subtype="message_changed"),
        ):
            if ignored["event"]["text"].endswith("app_mention"):
                ignored["event"]["type"] = "app_mention"
            assert await slack.deliver(ignored) == 200
        replies = await _exchange(
            slack, f"<@{BOT_USER}> what is up?", thread_ts="1700000000.000100", **channel
        )
    assert replies == ["Understood: what is up?"]
    (sent,) = api.fake.sent()
    assert (sent["channel"], sent["thread_ts"]) == ("C0CHAN01", "1700000000.000100")
    assert await store.chat_session("slack", f"C0CHAN01/1700000000.000100/{USER}") is not None
    assert len(await store.list_sessions()) == 1


async def test_in_a_thread_the_user_talks_with_the_app_follow_ups_need_no_mention(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    thread = {"channel": "C0CHAN01", "channel_type": "channel", "thread_ts": "1700000000.000200"}
    other = {**thread, "thread_ts": "1700000000.000300"}
    everyone = Allowlist(chats=frozenset({"C0CHAN01"}))  # the colleague may talk to it too
    async with slack_to(
        rig.gateway, bridge(rig.gateway, api.url, allowlist=everyone), api
    ) as slack:
        for ignored in (  # the app was not asked there (yet): nothing is answered
            api.fake.event("before anyone asked it", **thread),
            api.fake.event("a thread it was never in", **other),
        ):
            assert await slack.deliver(ignored) == 200
        assert await _exchange(slack, f"<@{BOT_USER}> plan the week", **thread) == [
            "Understood: plan the week"
        ]
        assert await _exchange(slack, "and friday?", **thread) == ["Understood: and friday?"]
        colleague = api.fake.event("agreed", user="U0COLLEAGUE", **thread)  # not theirs
        assert await slack.deliver(colleague) == 200
        assert await _exchange(slack, "thanks", **thread) == ["Understood: thanks"]
    assert [m["thread_ts"] for m in api.fake.sent()] == [thread["thread_ts"]] * 3
    sid = await store.chat_session("slack", f"C0CHAN01/{thread['thread_ts']}/{USER}")
    assert sid is not None
    asked = [m.text for m in (await store.load(sid)).messages if isinstance(m, UserMessage)]
    assert asked == ["plan the week", "and friday?", "thanks"]
    assert len(await store.list_sessions()) == 1


async def test_a_long_reply_is_split_within_the_limit(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        await _exchange(slack, "long answer please", replies=2)
    texts = api.fake.texts()
    assert len(texts) == 8  # 22k characters, 27k once escaped, 4,000 a message
    # five paragraphs of about 675 escaped characters each: a sixth would not fit
    assert all(3300 < len(t) <= 4000 for t in texts)
    assert all(t.startswith("Paragraph ") for t in texts)  # cut between paragraphs
    joined = "\n\n".join(t.strip("\n") for t in texts)
    assert joined == LONG.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def test_commands_work_typed_and_as_slash_commands(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        assert await _exchange(slack, "hello") == ["Understood: hello"]
        first = await store.chat_session("slack", f"{DM}//{USER}")
        (help_text,) = await _exchange(slack, " /help")  # a leading space: Slack sends it
        assert help_text.splitlines()[0] == "/new: start a new session with the default settings"
        assert await slack.command("/stoker", "usage") == 200
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 3)
        assert api.fake.texts()[-1].startswith("1 requests, $")
        assert await slack.command("/new") == 200
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 4)
        second = await store.chat_session("slack", f"{DM}//{USER}")
        assert api.fake.texts()[-1] == f"started session {second}"
        assert await _exchange(slack, "after new") == ["Understood: after new"]
    assert first is not None
    assert second is not None
    assert second != first
    user = f"slack:{USER}"
    assert [t.user for t in (await rig.gateway.view(user, first)).turns] == ["hello"]
    assert [t.user for t in (await rig.gateway.view(user, second)).turns] == ["after new"]


async def test_a_button_question_approves_and_another_denies(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    other = "U0OTHER1"
    b = bridge(rig.gateway, api.url, allowlist=Allowlist(users=frozenset({USER, other})))
    key = ChatKey(platform="slack", chat=DM, user=USER)
    async with slack_to(rig.gateway, b, api) as slack:
        answers = []
        for button in (0, 1):
            ask = asyncio.create_task(b.ask(key, "Run shell 'ls'?", ["Allow", "Deny"]))
            await api.fake.wait_for(lambda n=button: len(api.fake.posted) == n + 1)
            question = api.fake.posted[-1]
            assert await slack.press(question, button, user=other) == 200  # not theirs
            await api.fake.wait_for(
                lambda n=button: len(api.fake.sent("chat.postEphemeral")) == 2 * n + 1
            )
            assert await slack.press(question, button) == 200
            answers.append(await ask)
        assert await slack.press(question, 0) == 200  # a question already answered
        await api.fake.wait_for(lambda: len(api.fake.sent("chat.postEphemeral")) == 5)
    assert answers == ["Allow", "Deny"]
    buttons = api.fake.sent()[0]["blocks"][-1]["elements"]
    assert [(e["text"]["text"], e["value"].endswith(f":{i}")) for i, e in enumerate(buttons)] == [
        ("Allow", True),
        ("Deny", True),
    ]
    assert [(e["user"], e["text"]) for e in api.fake.sent("chat.postEphemeral")] == [
        (other, "This question is not yours to answer."),
        (USER, "Allow"),
        (other, "This question is not yours to answer."),
        (USER, "Deny"),
        (USER, "This question is no longer open."),
    ]
    # the question is edited to its answer, its buttons gone
    assert [(e["text"], e["blocks"]) for e in api.fake.sent("chat.update")] == [
        ("Run shell 'ls'?\n→ Allow", []),
        ("Run shell 'ls'?\n→ Deny", []),
    ]
    assert [m["blocks"] for m in api.fake.posted] == [[], []]
    assert await store.list_sessions() == []  # a question is not a turn


async def test_a_restart_mid_turn_loses_nothing_and_a_retry_is_answered_once(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    sim = rig.provider
    assert isinstance(sim, SimProvider)
    stuck = _Stuck(sim)
    rig.provider = stuck  # type: ignore[assignment]
    first = bridge(rig.gateway, api.url)
    async with slack_to(rig.gateway, first, api) as slack:
        assert await _exchange(slack, "one") == ["Understood: one"]
        cut = api.fake.event("stuck two")
        assert await slack.deliver(cut) == 200
        await stuck.entered.wait()
        await first.stop(grace=0)  # the process dies mid-turn (its writes are shielded)
    rig.provider = sim
    reopened = reopen(store)
    try:
        gateway = rig.another_process(reopened)
        async with slack_to(gateway, bridge(gateway, api.url), api) as slack:
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)  # finished at start
            assert await slack.deliver(cut, retry=1) == 200  # Slack retries it: dropped
            assert await _exchange(slack, "three") == ["Understood: three"]
            assert await slack.deliver(cut, retry=2) == 200
        assert api.fake.texts() == ["Understood: one", "Understood: stuck two", "Understood: three"]
        sid = await reopened.chat_session("slack", f"{DM}//{USER}")
        assert sid is not None
        stored = await reopened.load(sid)
        asked = [m.text for m in stored.messages if isinstance(m, UserMessage) and m.text]
        assert asked == ["one", "stuck two", "three"]
        assert await reopened.pending_updates("slack") == []
        assert api.fake.reactions == set()  # the cut-off turn's reaction went with its answer
    finally:
        await reopened.close()


async def test_a_rate_limited_call_waits_and_is_sent_again(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    api.fake.limit_next["chat.postMessage"] = 2  # Slack: slow down (Retry-After: 0)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        attempts = await _exchange(slack, "hello", replies=3)
    assert attempts == ["Understood: hello"] * 3
    assert [m["text"] for m in api.fake.posted] == ["Understood: hello"]  # two refused
    assert await store.pending_updates("slack") == []


async def test_an_answer_not_delivered_is_delivered_after_a_restart_without_a_new_turn(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    first = bridge(rig.gateway, api.url)
    api.fake.fail_next["chat.postMessage"] = 1  # Slack is down when the answer goes out
    async with slack_to(rig.gateway, first, api) as slack:
        event = api.fake.event("hello")
        assert await slack.deliver(event) == 200
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    (pending,) = await store.pending_updates("slack")
    assert pending.key == event["event_id"]
    assert "legacy-verification-token" not in pending.body  # Slack's token is not stored
    sim = rig.provider
    assert isinstance(sim, SimProvider)
    calls = len(sim.requests)
    gateway = rig.another_process(store)
    async with slack_to(gateway, bridge(gateway, api.url), api):
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
    assert api.fake.texts() == ["Understood: hello", "Understood: hello"]  # failed, then sent
    assert len(sim.requests) == calls  # replayed from the idempotency store, not run again
    assert await store.pending_updates("slack") == []


async def test_nobody_outside_the_allowlist_gets_anything(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    b = bridge(rig.gateway, api.url, allowlist=Allowlist())  # the default: nobody
    async with slack_to(rig.gateway, b, api) as slack:
        stranger = "U0STRANGE"
        assert await slack.deliver(api.fake.event("hello?", user=stranger)) == 200
        mention = api.fake.event(
            f"<@{BOT_USER}> hi", user=stranger, channel="C0CHAN01", channel_type="channel"
        )
        assert await slack.deliver(mention) == 200
        shared = [api.fake.file("look.png", "image/png", png(8, 8))]
        assert await slack.deliver(api.fake.event("look", user=stranger, files=shared)) == 200
        assert await slack.command("/stoker", "usage", user=stranger) == 200
    assert [name for name, _ in api.fake.calls] == ["auth.test"]
    assert await store.list_sessions() == []
    assert await store.pending_updates("slack") == []


async def test_an_unsigned_or_stale_request_is_refused_and_nothing_is_stored(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        body = json.dumps(api.fake.event("hello")).encode()
        cases = {
            "unsigned": {},
            "wrong secret": api.fake.headers(body, secret="not-the-signing-secret"),
            "stale": api.fake.headers(body, age=6 * 60),  # Slack's window is 5 minutes
            "another body": api.fake.headers(body + b" "),
        }
        statuses = {}
        for name, headers in cases.items():
            for path in ("/platforms/slack/events", "/platforms/slack/actions"):
                r = await slack.client.post(path, content=body, headers=headers)
                statuses[(name, path.rsplit("/", 1)[1])] = r.status_code
        assert set(statuses.values()) == {401}
        challenge = b'{"type": "url_verification", "challenge": "3eZbrw1aBm2r"}'
        r = await slack.post("/platforms/slack/events", challenge)
        assert (r.status_code, r.json()) == (200, {"challenge": "3eZbrw1aBm2r"})
        assert (await slack.post("/platforms/slack/events", b"{nope")).status_code == 400
    assert [name for name, _ in api.fake.calls] == ["auth.test"]
    assert await store.list_sessions() == []
    assert await store.pending_updates("slack") == []


async def test_a_chats_tenth_message_reads_the_whole_prefix_of_its_ninth(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        for i in range(1, 11):
            assert await _exchange(slack, f"message {i}") == [f"Understood: message {i}"]
    await assert_tenth_reads_the_ninth(rig.gateway, "slack", f"{DM}//{USER}", str(USER))


async def test_tool_progress_edits_one_status_message_and_a_review_follows(
    store: SqlEventStore, api: Api, recorded_calls: list[CacheRecord]
) -> None:
    registry = make_registry()
    registry.register(Toolset(name="memory_tools", tools=[memory]))
    rig = make_rig(store, registry=registry, review=ReviewConfig(memory_every=1))
    rig.provider = SimProvider(engine=SimEngine(model=ReviewingModel()), clock=rig.clock)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        await _exchange(slack, "read_file 'a.md'", replies=3)
    status, answer, review = api.fake.sent()
    assert status == {"channel": DM, "text": "⚙ read_file", "mrkdwn": False, "unfurl_links": False}
    assert [e["text"] for e in api.fake.sent("chat.update")] == ["✓ read_file"]
    assert answer["text"] == "Done. Tool results: read_file ok: a.md"
    assert review["text"] == "Memory updated"
    # the review is a fork of the platform turn: it reads everything the turn cached
    assert_review_reads_the_turn(recorded_calls)


def _questions(api: Api) -> list[dict[str, Any]]:
    return [m for m in api.fake.posted if str(m.get("text", "")).startswith("Allow ")]


async def test_a_risky_call_asks_with_buttons_and_runs_only_when_allowed(
    store: SqlEventStore, api: Api, tmp_path: Path
) -> None:
    """The workspace's `add_note` is risky: each call posts Allow / Deny in the chat, and
    the turn goes on with what the chat's user pressed, stored with who decided."""
    rig = make_rig(store, registry=ToolRegistry([workspace_toolset(tmp_path)]), keep_warm=False)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        for n, (text, button) in enumerate(
            [("add_note 'ship on friday'", 0), ("add_note 'and on monday'", 1)]
        ):
            assert await slack.deliver(api.fake.event(text)) == 200
            await api.fake.wait_for(lambda n=n: len(_questions(api)) == n + 1)
            assert await slack.press(_questions(api)[-1], button) == 200
            await api.fake.wait_for(
                lambda n=n: sum(t.startswith("Done.") for t in api.fake.texts()) == n + 1
            )
    assert [q["text"] for q in api.fake.sent() if q.get("blocks")] == [
        'Allow add_note(text="ship on friday")?',
        'Allow add_note(text="and on monday")?',
    ]
    assert (tmp_path / "NOTES.md").read_text() == "- ship on friday\n"  # denied: never ran
    sid = await store.chat_session("slack", f"{DM}//{USER}")
    assert sid is not None
    events = await store.events(sid)
    decided = [json.loads(body) for _, kind, _, body in events if kind == "approval_decided"]
    assert [(d["approved"], d["by"]) for d in decided] == [
        (True, f"user:slack:{USER}"),
        (False, f"user:slack:{USER}"),
    ]
    answers = [t for t in api.fake.texts() if t.startswith("Done.")]
    assert "the user denied add_note" in answers[-1]
