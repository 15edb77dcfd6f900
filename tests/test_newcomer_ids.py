"""Short ids once sessions have children (forks, reviews, compactions, sub-agents, each
`<parent id>.<role>-<hex>`): the start of a main session's id that `sessions list` prints
keeps naming it, and a child's short id is its parent's short id and the start of its own
part (`68a132a6.review-1a2b`), never its 48-character id nor a start cut at its `.`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.cli import app
from stoker.errors import AmbiguousSessionId
from stoker.session_ids import MIN_LENGTH, PART_DIGITS, name_in, pick, short_ids
from stoker.store.sqlite import SQLiteStore
from tests.helpers import sim_agent

runner = CliRunner()
MAIN = "68a132a6f00d4e5c9b1a2b3c4d5e6f70"
OTHER = "68a132a7000000000000000000000000"


def _family(db: Path) -> dict[str, str]:
    """A main session with a fork, a review and the review's own fork, and another main
    session whose id shares the first seven characters."""

    async def make() -> dict[str, str]:
        async with SQLiteStore(db) as store:
            agent, _ = sim_agent()
            main = await agent.open(store, MAIN)
            await main.send("hello there")
            fork = main.fork()
            await fork.send("a fork")
            review = main.fork(role="review")
            await review.send("a review")
            nested = review.fork()
            await nested.send("deeper")
            other = await agent.open(store, OTHER)
            await other.send("another one")
            return {"fork": fork.id, "review": review.id, "nested": nested.id}

    return asyncio.run(make())


def test_a_short_id_names_the_main_session_once_it_has_children(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    children = _family(db)
    for command in (["report"], ["sessions", "show"], ["sessions", "export"]):
        out = runner.invoke(app, [*command, MAIN[:8], "--db", str(db)])
        assert out.exit_code == 0, (command, out.output)
        assert "starts more than one" not in out.output
    shown = runner.invoke(app, ["sessions", "show", MAIN[:8], "--json", "--db", str(db)])
    assert json.loads(shown.output)["id"] == MAIN
    # a start of a review names the review (its own child counts for nothing)
    review = children["review"]
    shown = runner.invoke(
        app, ["sessions", "show", review[: len(MAIN) + 4], "--json", "--db", str(db)]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["id"] == review
    # a start two main sessions share is still ambiguous
    both = runner.invoke(app, ["sessions", "show", MAIN[:7], "--db", str(db)])
    assert both.exit_code == 1
    assert "starts more than one session id" in both.output


def test_the_list_shows_children_short_and_every_short_id_names_its_session(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    children = _family(db)
    listed = runner.invoke(app, ["sessions", "list", "--json", "--db", str(db)])
    assert listed.exit_code == 0, listed.output
    short = {row["id"]: row["short_id"] for row in json.loads(listed.output)}
    assert short[MAIN] == MAIN[:8]
    assert short[OTHER] == OTHER[:8]
    fork, review, nested = (children[k] for k in ("fork", "review", "nested"))
    assert short[fork] == f"{MAIN[:8]}.{fork.rsplit('.', 1)[1][: len('fork-') + PART_DIGITS]}"
    assert short[review] == f"{MAIN[:8]}.{review.rsplit('.', 1)[1][: len('review-') + 4]}"
    assert short[nested] == f"{short[review]}.{nested.rsplit('.', 1)[1][: len('fork-') + 4]}"
    assert max(len(s) for s in short.values()) <= 30  # was 57: the nested fork's whole id
    for sid, start in short.items():
        assert not start.endswith(".")
        for command in (["sessions", "show"], ["report"]):
            shown = runner.invoke(app, [*command, start, "--json", "--db", str(db)])
            assert shown.exit_code == 0, (start, shown.output)
        shown = runner.invoke(app, ["sessions", "show", start, "--json", "--db", str(db)])
        assert json.loads(shown.output)["id"] == sid
    table = runner.invoke(app, ["sessions", "list", "--db", str(db)], env={"COLUMNS": "160"})
    assert f" {MAIN[:8]} " in table.output
    assert f" {short[nested]} " in table.output
    assert fork not in table.output  # no 48-character id
    assert ". " not in table.output.replace("…", "")  # no id cut at its separator
    removed = runner.invoke(app, ["sessions", "rm", short[nested], "--db", str(db)])
    assert removed.exit_code == 0, removed.output
    assert f"removed {nested}" in removed.output


def test_a_short_id_that_names_no_child_or_several_says_so(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _family(db)
    missing = runner.invoke(app, ["sessions", "show", f"{MAIN[:8]}.fork-zzzz", "--db", str(db)])
    assert missing.exit_code == 1
    assert f"no session '{MAIN[:8]}.fork-zzzz'" in " ".join(missing.output.split())
    ids = [MAIN, f"{MAIN}.fork-1a2b0000", f"{MAIN}.fork-1a2c0000"]
    with pytest.raises(AmbiguousSessionId) as both:
        name_in(f"{MAIN[:8]}.fork-1a", sorted(ids))
    assert both.value.prefix == f"{MAIN[:8]}.fork-1a"
    assert both.value.candidates == ids[1:]


def test_pick_takes_the_session_whose_children_are_the_other_matches() -> None:
    assert pick("68a1", [MAIN, f"{MAIN}.review-1a2b3c4d", f"{MAIN}.fork-99aa00bb"]) == MAIN
    review = f"{MAIN}.review-1a2b3c4d"
    assert pick(f"{MAIN}.r", [review, f"{review}.fork-0000aaaa"]) == review
    with pytest.raises(AmbiguousSessionId):
        pick("68a132a", [MAIN, OTHER, f"{MAIN}.review-1a2b3c4d"])
    with pytest.raises(AmbiguousSessionId):  # siblings: neither is the other's parent
        pick(f"{MAIN}.", [review, f"{MAIN}.fork-99aa00bb"])


_HEX = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)
_PART = st.builds(
    lambda role, tail: f"{role}-{tail}",
    st.sampled_from(["fork", "review", "compaction", "subagent"]),
    st.text(alphabet="0123456789abcdef", min_size=8, max_size=8),
)


@st.composite
def _lineages(draw: st.DrawFn) -> list[str]:
    """Main ids sharing starts, with children and grandchildren."""
    stem = draw(st.text(alphabet="0a", min_size=0, max_size=10))
    roots = [stem + r[len(stem) :] for r in draw(st.lists(_HEX, min_size=1, max_size=4))]
    ids = set(roots)
    for _ in range(draw(st.integers(0, 6))):
        parent = draw(st.sampled_from(sorted(ids)))
        ids.add(f"{parent}.{draw(_PART)}")
    return sorted(ids)


@settings(max_examples=150, deadline=None)
@given(ids=_lineages())
def test_every_short_id_of_a_lineage_names_its_session(ids: list[str]) -> None:
    short = short_ids(ids, ids)
    for sid, start in short.items():
        assert name_in(start, ids) == sid
        assert not start.endswith(".")
        parent, _, part = sid.rpartition(".")
        if parent:  # its parent's short id, then its own part's role and 4+ digits
            own = start.removeprefix(short[parent] + ".")
            assert own != start
            assert part.startswith(own)
            assert len(own) >= part.index("-") + 1 + PART_DIGITS
        else:
            assert sid.startswith(start)
            assert len(start) >= MIN_LENGTH
