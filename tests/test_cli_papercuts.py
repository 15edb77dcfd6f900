"""What the CLI prints, read as a newcomer reads it: counts in the number they take, a
suggested command whole on its own line, the tools a turn ran, and a session's turns
laid out so no label runs on after a multi-line answer."""

from __future__ import annotations

import io
import json
import logging
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from stoker.agent.agent import Agent
from stoker.bench.cache import PhaseFigures, WorkloadFigures
from stoker.bench.compaction import CompactionFigures, Variant, compaction_table
from stoker.bench.fleet import WIRES, ArrivalFigures, FleetFigures, arrivals_table, fleet_table
from stoker.bench.providers import PROVIDER_RUNS, providers_table
from stoker.cache.models import closest_models, known_models, model_info
from stoker.cli import app
from stoker.cli.render import SIMULATOR_NOTE, cost_text, counted, saving_text, simulator_note
from stoker.cli.serve import example_config
from stoker.config import Config
from stoker.errors import ConfigError
from stoker.gateway import GatewayConfig, build_gateway
from stoker.toolsets.workspace import workspace_toolset
from stoker.wire.figures import RATIO_PLACES, USD_PLACES, json_ratio, json_usd
from tests.cli_rig import chat, every_group

runner = CliRunner()


def test_counts_take_the_number_of_their_noun() -> None:
    assert [counted(n, "call") for n in (0, 1, 2)] == ["0 calls", "1 call", "2 calls"]
    assert counted(1, "entry", "entries") == "1 entry"
    assert counted(3, "entry", "entries") == "3 entries"


def test_a_one_call_session_is_reported_in_the_singular(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    ran = runner.invoke(
        app, ["run", "--db", db, "--workdir", str(tmp_path), "--session", "one", "hi"]
    )
    assert ran.exit_code == 0, ran.output
    reported = runner.invoke(app, ["report", "one", "--db", db])
    assert reported.exit_code == 0, reported.output
    assert "· session one · 1 session · 1 call ·" in reported.output
    assert "  main one: 1 call ·" in reported.output
    assert re.search(r"^1 call · hit ratio", reported.output, re.MULTILINE), reported.output
    shown = runner.invoke(app, ["sessions", "show", "one", "--db", db])
    assert "total: 1 turn, " in shown.output
    for wrong in ("1 sessions", "1 calls", "1 turns", "1 requests"):
        assert wrong not in reported.output + shown.output


def test_demo_save_prints_the_report_command_whole_on_its_own_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", "--save", "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    sid = re.search(r"stored as session (\S+); chart it with:\n", result.output)
    assert sid, result.output
    line = f"  stoker report {sid[1]} --html report.html --png report.png\n"
    assert line in result.output  # one line: it copies as one command


def test_run_says_which_tools_the_turn_ran(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("hello world\n")
    args = ["run", "--workdir", str(tmp_path), "--db", str(tmp_path / "s.db")]
    counted_words = runner.invoke(app, [*args, "word count of 'a.md'"])
    assert counted_words.exit_code == 0, counted_words.output
    assert "\ntools: word_count\n" in counted_words.output
    chatted = runner.invoke(app, [*args, "hello"])
    assert "\ntools: none\n" in chatted.output
    stored = runner.invoke(app, [*args, "--session", "kept", "word count of 'a.md'"])
    again = runner.invoke(app, [*args, "--session", "kept", "word count of 'a.md'"])
    assert "\ntools: word_count\n" in stored.output
    assert "\ntools: word_count\n" in again.output  # this turn's tools, not the session's


def test_sessions_show_puts_the_tools_under_a_multi_line_answer(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("a.md", "b.md"):
        (work / name).write_text("x\n")
    db = str(tmp_path / "s.db")
    ran = runner.invoke(
        app, ["run", "--db", db, "--workdir", str(work), "--session", "multi", "list_files"]
    )
    assert ran.exit_code == 0, ran.output
    shown = runner.invoke(app, ["sessions", "show", "multi", "--db", db])
    assert shown.exit_code == 0, shown.output
    lines = [line.rstrip() for line in shown.output.splitlines()]
    start = lines.index("1. list_files")
    assert lines[start + 1 : start + 4] == [
        " → Done. Tool results: a.md",
        "   b.md",  # the answer's second line, under its first
        "   tools: list_files",  # a line of its own, not run on after the answer
    ]
    assert lines[start + 4].startswith("   read ")


def test_an_unknown_model_names_the_listing_and_never_the_package_files(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["run", "--provider", "sim:gpt-99", "--workdir", str(tmp_path), "hi"]
    )
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert "unknown model 'gpt-99'" in said
    assert "(closest: gpt-" in said
    assert "`stoker models` lists them" in said
    assert "prices.toml in the Stoker home prices it" in said
    assert "models.toml" not in said  # nobody should edit the installed package
    assert "Traceback" not in result.output


def test_models_lists_every_model_the_table_knows() -> None:
    listed = runner.invoke(app, ["models", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [r["model"] for r in rows] == known_models()
    sonnet = next(r for r in rows if r["model"] == "claude-sonnet-4-6")
    assert sonnet["min_cacheable"] == model_info("claude-sonnet-4-6").min_cacheable
    table = runner.invoke(app, ["models"], env={"COLUMNS": "120"})
    assert re.search(r"│ claude-sonnet-4-6 +│ anthropic +│ +1,024 │", table.output), table.output


def test_run_and_chat_say_once_that_the_answers_come_from_the_simulator(tmp_path: Path) -> None:
    ran = runner.invoke(app, ["run", "--workdir", str(tmp_path), "hello there"])
    assert ran.exit_code == 0, ran.output
    lines = ran.output.splitlines()
    note = next(i for i, line in enumerate(lines) if line.startswith(SIMULATOR_NOTE))
    assert lines[note + 1 :][:1] == ["Understood: hello there"]  # said before the answer
    chatted = runner.invoke(
        app,
        ["chat", "--db", str(tmp_path / "s.db"), "--workdir", str(tmp_path)],
        input="hello\nagain\n",
    )
    assert chatted.exit_code == 0, chatted.output
    for out in (ran.output, chatted.output):
        said = " ".join(out.split())
        assert said.count(SIMULATOR_NOTE) == 1  # once per command, not once per turn
        assert "(sim:claude-sonnet-4-6): deterministic, no model behind them" in said
        assert "--provider anthropic:claude-sonnet-4-6 with ANTHROPIC_API_KEY set" in said


def test_the_simulator_note_names_the_real_provider_and_only_for_the_simulator() -> None:
    def note(provider: str, model: str = "claude-sonnet-4-6") -> str | None:
        return simulator_note(Config.from_env({}, provider=provider, model=model))

    assert note("sim:") == note("sim:claude-sonnet-4-6") == note("") is not None
    gpt = note("sim:gpt-5.6")
    assert gpt is not None
    assert "(sim:gpt-5.6)" in gpt
    assert "--provider openai:gpt-5.6 with OPENAI_API_KEY set" in gpt
    assert "--provider google:" in (note("sim:", "gemini-2.5-flash") or "")
    for real in (
        "anthropic:claude-sonnet-4-6",
        "openai:gpt-5.6",
        "openai-compatible:http://127.0.0.1:8788/v1#qwen3-8b",
        "bedrock:anthropic.claude-sonnet-4-6",
    ):
        assert note(real) is None, real


def test_every_help_names_the_commands_as_they_are_typed() -> None:
    """A group's summary that lists its commands (`Stored sessions: list, show, ...`)
    lists their real names, and every `stoker ...` a help text quotes is a command."""
    groups = every_group()
    listing = 0
    for path, group in groups.items():
        summary = (group.help or "").split("\n")[0]
        _, colon, tail = summary.rpartition(": ")
        named = [w.strip(" .") for w in tail.split(",")]
        if colon and len(named) > 1 and all(re.fullmatch(r"[a-z-]+", w) for w in named):
            listing += 1
            assert set(named) <= set(group.commands), (path, named, sorted(group.commands))
        for command in (path, *((*path, name) for name in group.commands)):
            shown = runner.invoke(app, [*command, "-h"]).output
            for first, second in re.findall(r"`stoker ([a-z-]+)(?: ([a-z-]+))?", shown):
                assert (first,) in groups or first in groups[()].commands, (command, first)
                if (first,) in groups and second:
                    assert second in groups[(first,)].commands, (command, first, second)
    assert listing >= 1  # the sessions group's list is checked


def test_no_help_points_at_a_file_a_pip_install_does_not_have() -> None:
    """The docs folder is in the checkout, not in the wheel: a help or the example config
    names the docs' pages, never a `docs/...` path."""
    groups = every_group()
    for path, group in groups.items():
        for command in (path, *((*path, name) for name in group.commands)):
            shown = runner.invoke(app, [*command, "-h"]).output
            assert "docs/" not in shown, (command, shown)
    assert "docs/" not in example_config()
    assert "Chat platforms > Telegram" in example_config()


def test_bench_cache_help_says_what_each_workload_runs() -> None:
    shown = runner.invoke(app, ["bench", "cache", "-h"], terminal_width=80).output
    for name, says in (
        ("hard", "24-call tool loop"),
        ("library-defaults", "at its defaults"),
        ("typed", "three different output types"),
        ("extended", "3 parallel sub-agents"),
        ("fleet", "keyed three ways"),
        ("providers", "simulated API"),
    ):
        entry = re.search(rf"^  {name} +(\S.*(?:\n {{10,}}\S.*)*)", shown, re.MULTILINE)
        assert entry, (name, shown)
        assert says in " ".join(entry[1].split()), (name, entry[1])
    assert all(len(line) <= 80 for line in shown.splitlines())  # laid out by hand: it fits


def _rendered(*tables: Any) -> str:
    console = Console(width=80, record=True, file=io.StringIO())
    for table in tables:
        console.print(table)
    return console.export_text()


def test_the_fleet_tables_explain_their_marks_and_keep_names_whole() -> None:
    fleet = [
        FleetFigures(
            wire=wire,
            rate=60,
            mode="per session",
            sessions=200,
            minutes=3.3,
            first_calls_full=0.956,
            cost_ratio=0.14,
            overflows=141,
            keys=200,
        )
        for wire in WIRES
    ]
    arrivals = ArrivalFigures(
        interval_minutes=2.0,
        fleet_aware=True,
        sessions=24,
        first_calls_full=1.0,
        cost_ratio=0.134,
        keep_warm_calls=22,
        keep_warm_units=15191.0,
    )
    shown = _rendered(fleet_table(fleet), arrivals_table([arrivals]))
    assert all(len(line) <= 80 for line in shown.splitlines())
    for wire in WIRES:  # "openai gpt-5.6 (N)" on one line, not folded into three
        assert re.search(rf"│ {re.escape(wire)} +│", shown), (wire, shown)
    said = " ".join(shown.split())
    assert "(N): OpenAI regime N (gpt-5.6 and later)" in said
    assert "(L): OpenAI regime L (before gpt-5.6)" in said
    assert "(prefix): Anthropic takes no key" in said
    assert "keep-warm spend in base-input tokens" in said


def test_the_providers_table_never_cuts_a_provider_name() -> None:
    total = PhaseFigures(
        name="total",
        calls=32,
        keep_warm_calls=1,
        written=123_456,
        ideal=120_000,
        read_share=0.9123,
        cost_ratio=0.1234,
        floor_ratio=0.12,
        keep_warm_units=1234.0,
        rewrite_units=9999.0,
        misses=(),
        undeclared=0,
    )
    rows = [WorkloadFigures(name=name, phases=(), total=total) for name in PROVIDER_RUNS]
    shown = _rendered(providers_table(rows))
    assert all(len(line) <= 80 for line in shown.splitlines())
    for name in PROVIDER_RUNS:  # gemini-implicit, gemini-explicit, openrouter, ...
        assert re.search(rf"│ {name} +│", shown), (name, shown)
    assert "…" not in shown  # a figure that does not fit folds; no digit is dropped


def test_the_compaction_table_names_each_ratios_denominator() -> None:
    def variant(name: str, cost: float, no_cache: float) -> Variant:
        return Variant(
            name=name,
            turns=300,
            compactions=7,
            calls=777,
            cost_usd=cost,
            no_cache_usd=no_cache,
            written=128_678,
            read=10_756_186,
            largest_request=19_412,
        )

    figures = CompactionFigures(
        window=24_000,
        aware=variant("idle-aware", 4.3028, 32.4008),
        fixed=variant("fixed threshold", 4.3512, 33.1694),
    )
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(compaction_table(figures))
    shown = console.export_text()
    header = next(line for line in shown.splitlines() if "policy" in line)
    assert "│ no-cache cost │ cost / no-cache │" in header.replace("┃", "│")
    assert re.search(r"idle-aware .* \$4\.3028 │ +\$32\.4008 │ +0\.133 │", shown), shown
    said = " ".join(shown.split())
    assert "idle-aware cost / fixed-threshold cost: 0.989" in said
    assert 'each row\'s "cost / no-cache" divides by its own no-cache cost' in said


@given(value=st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_json_figures_carry_their_places_and_round_half_a_unit_at_most(value: float) -> None:
    for helper, places in ((json_usd, USD_PLACES), (json_ratio, RATIO_PLACES)):
        text = json.dumps(helper(value))
        exponent = Decimal(text).as_tuple().exponent
        assert isinstance(exponent, int)
        assert exponent >= -places, (value, text)  # never more digits than its places
        assert abs(float(text) - value) <= 0.5 * 10**-places + math.ulp(value), (value, text)
        assert text != "-0.0"
    assert json_usd(None) is None  # unknown stays unknown, never 0


def _figures_in(data: Any, key: str = "") -> list[tuple[str, float]]:
    """Every (key, float) in parsed JSON."""
    if isinstance(data, dict):
        return [f for k, v in data.items() for f in _figures_in(v, k)]
    if isinstance(data, list):
        return [f for v in data for f in _figures_in(v, key)]
    return [(key, data)] if isinstance(data, float) else []


def _exponent(value: float) -> int:
    exponent = Decimal(json.dumps(value)).as_tuple().exponent
    assert isinstance(exponent, int)
    return exponent


def test_json_output_carries_no_float_noise(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    (tmp_path / "a.md").write_text("one two three\n")
    for prompt in ("hi", "word count of 'a.md'", "list_files"):
        ran = runner.invoke(
            app, ["run", "--db", db, "--workdir", str(tmp_path), "--session", "noisy", prompt]
        )
        assert ran.exit_code == 0, ran.output
    money = []
    stored = ["--db", db]
    for command in (
        ["report", "noisy", *stored],
        ["sessions", "show", "noisy", *stored],
        ["models"],
    ):
        out = runner.invoke(app, [*command, "--json"])
        assert out.exit_code == 0, out.output
        for key, value in _figures_in(json.loads(out.output)):
            places = -_exponent(value)
            if key.endswith("usd") or "usd_per" in key:
                money.append(value)
                assert places <= USD_PLACES, (command, key, value)
            elif "ratio" in key:
                assert places <= RATIO_PLACES, (command, key, value)
    assert len(money) > 10
    assert any(-_exponent(v) == USD_PLACES for v in money)  # sums that needed rounding


def test_money_on_screen_and_a_saving_the_cache_has_not_made_yet() -> None:
    assert cost_text(0.0010535999999999998) == "$0.00105"
    assert cost_text(-0.00112) == "-$0.00112"
    assert cost_text(-0.000001) == "$0.00000"  # never "-$0.00000"
    assert cost_text(None) == "n/a"
    assert saving_text(0.0029) == "saved $0.00290"
    assert saving_text(0.0) == "saved $0.00000"
    assert saving_text(-0.00112) == (
        "cache writes cost $0.00112 more than no cache so far (they pay back from the next read)"
    )


def test_chat_usage_never_says_a_negative_saving(tmp_path: Path) -> None:
    first = chat(tmp_path, "hello\n/usage\nhello again\n/usage\n")
    said = " ".join(first.output.split())
    usages = said.split(" · without a cache ")[1:]
    assert len(usages) == 2
    # after the first call the cache has only written (at 1.25x): it cost more, said so
    assert usages[0].split(" ", 1)[1].startswith("· cache writes cost $0.")
    assert "more than no cache so far (they pay back from the next read)" in usages[0]
    assert usages[1].split(" ", 1)[1].startswith("· saved $0.")  # the second call read it
    assert "saved -" not in said
    assert "-$" not in said


@pytest.mark.parametrize(
    ("bare", "first", "also"),
    [
        ("gpt-5", "openai:gpt-5", "sim:gpt-5"),  # known: its own provider, then the sim
        ("gpt-7", "openai:gpt-6", "openai:gpt-7"),  # newer than the table: nearest known
        ("claude-sonet-4-6", "anthropic:claude-sonnet-4-6", "anthropic:claude-sonet-4-6"),
        ("claude-opus-4-6", "anthropic:claude-opus-4-6", "sim:claude-opus-4-6"),
        ("gemini-4-pro", "google:gemini-2.5-pro", "google:gemini-4-pro"),
        ("deepseek-v4", "deepseek:deepseek-chat", "deepseek:deepseek-v4"),
    ],
)
def test_a_bare_model_is_suggested_under_its_own_familys_provider(
    bare: str, first: str, also: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        Agent(bare)
    said = str(refused.value)
    suggested = re.findall(r"'([a-z-]+:[^']+)'", said)
    assert suggested[0] == first, said
    assert also in suggested
    family = first.split(":")[0]
    assert all(s.startswith((f"{family}:", "sim:")) for s in suggested), said
    assert "pass provider=..." in said


def test_an_unknown_models_closest_names_share_its_family_first() -> None:
    assert closest_models("gpt-7")[0].startswith("gpt-")
    assert closest_models("claude-sonet-4-6")[0] == "claude-sonnet-4-6"
    assert all(m.startswith("gemini-") for m in closest_models("gemini-4-pro"))
    assert closest_models("zzzz") == []


def test_run_and_chat_refuse_a_workspace_folder_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "notes"
    db = str(tmp_path / "s.db")
    for command in (["run", "hi"], ["chat"]):
        out = runner.invoke(app, [*command, "--workdir", str(missing), "--db", db], input="hi\n")
        assert out.exit_code == 1, out.output
        said = " ".join(out.output.split())
        assert f"the workspace folder '{missing}' does not exist: create it, or pass" in said
        assert "Traceback" not in out.output
    (tmp_path / "a-file").write_text("x")
    out = runner.invoke(app, ["run", "hi", "--workdir", str(tmp_path / "a-file"), "--db", db])
    assert out.exit_code == 1
    assert "is not a folder" in out.output
    assert not Path(db).exists()  # nothing was started, so no database was made
    listed = runner.invoke(app, ["sessions", "list", "--json", "--db", db])
    assert listed.exit_code == 1, listed.output  # and reading refuses a missing one


def test_a_workspace_that_does_not_exist_yet_is_warned_about_by_the_library_and_gateway(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "notes"
    with caplog.at_level(logging.WARNING, logger="stoker.toolsets.workspace"):
        tools = {t.name: t for t in workspace_toolset(missing, writable=False).tools}
        build_gateway(GatewayConfig(database=str(tmp_path / "g.db"), workspace=missing))
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert all(f"the workspace folder {missing} does not exist" in w for w in warned)
    assert tools["list_files"].fn() == "(the workspace folder notes does not exist)"
    missing.mkdir()  # created later: the same tools serve it from then on
    (missing / "plan.md").write_text("ship\n")
    assert tools["list_files"].fn() == "plan.md"


def test_models_takes_a_pattern_and_a_provider() -> None:
    def listed(*args: str) -> list[str]:
        out = runner.invoke(app, ["models", *args, "--json"])
        assert out.exit_code == 0, out.output
        return [r["model"] for r in json.loads(out.output)]

    assert listed("SONNET-4-6", "--provider", "anthropic") == ["claude-sonnet-4-6"]
    assert listed("gpt-5*") == ["gpt-5", "gpt-5.5", "gpt-5.5-pro", "gpt-5.6"]  # a glob
    assert set(listed("--provider", "google:")) == {  # as a provider spec spells it
        m for m in known_models() if model_info(m).provider == "google"
    }
    assert listed("flash") == [m for m in known_models() if "flash" in m]
    assert listed() == known_models()
    assert listed("zzz") == []
    table = runner.invoke(app, ["models", "opus-4-8"], env={"COLUMNS": "120"})
    assert "claude-opus-4-8" in table.output
    assert "claude-sonnet" not in table.output
    none = runner.invoke(app, ["models", "zzz", "--provider", "openai"])
    assert none.exit_code == 1
    said = " ".join(none.output.split())
    assert "no known model matches 'zzz' and follows openai; `stoker models` lists all" in said
    wrong = runner.invoke(app, ["models", "--provider", "anthropc"])
    assert wrong.exit_code == 2
    said = " ".join(wrong.output.split())
    assert "--provider 'anthropc': the rules are anthropic, openai" in said
