"""Slack end to end: slack-sdk against a fake Slack on loopback, the gateway's signed
Events API and interactivity routes, the real gateway service and store (both
backends), the simulator as the model."""

from __future__ import annotations

import json

from stoker.platforms.access import Allowlist
from stoker.platforms.slack.adapter import FORMATTING, WORKING
from stoker.store.base import SqlEventStore
from tests import platform_checks as checks
from tests.fake_slack import BOT_ID, BOT_USER
from tests.images import png
from tests.platform_checks import ASKED, LONG, Crash, chat_rig, user_texts
from tests.slack_rig import DM, USER, Api, Slack, api, bridge, slack_to

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
    assert await user_texts(store, "slack", f"C0CHAN01/{thread['thread_ts']}/{USER}") == [
        "plan the week",
        "and friday?",
        "thanks",
    ]
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
    await checks.assert_a_new_session(rig.gateway, f"slack:{USER}", first, second)


async def test_a_restart_mid_turn_loses_nothing_and_a_retry_is_answered_once(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    crash = Crash(rig)
    first = bridge(rig.gateway, api.url)
    async with slack_to(rig.gateway, first, api) as slack:
        assert await _exchange(slack, "one") == ["Understood: one"]
        cut = api.fake.event("stuck two")
        assert await slack.deliver(cut) == 200
        await crash.kill(first)  # the process dies mid-turn (its writes are shielded)
    async with crash.restart(store) as gateway:
        async with slack_to(gateway, bridge(gateway, api.url), api) as slack:
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)  # finished at start
            assert await slack.deliver(cut, retry=1) == 200  # Slack retries it: dropped
            assert await _exchange(slack, "three") == ["Understood: three"]
            assert await slack.deliver(cut, retry=2) == 200
        assert api.fake.texts() == ["Understood: one", "Understood: stuck two", "Understood: three"]
        assert await user_texts(gateway.store, "slack", f"{DM}//{USER}") == [*ASKED[:2], "three"]
        assert await gateway.store.pending_updates("slack") == []
    assert api.fake.reactions == set()  # the cut-off turn's reaction went with its answer


async def test_a_rate_limited_call_waits_and_is_sent_again(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    api.fake.limit_next["chat.postMessage"] = 2  # Slack: slow down (Retry-After: 0)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        attempts = await _exchange(slack, "hello", replies=3)
    assert attempts == ["Understood: hello"] * 3
    assert [m["text"] for m in api.fake.posted] == ["Understood: hello"]  # two refused
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
    await checks.assert_nothing_stored(store, "slack")


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
    await checks.assert_nothing_stored(store, "slack")
