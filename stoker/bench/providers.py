"""`stoker bench cache --workload providers`: the hard workload on every provider.

The same session (`stoker.bench.cache.hard`: 8 tools, a 24-call tool loop, a 6-minute
gap, a fork, a resume in a new process) runs on each provider's simulated API, in its own
wire, by its own cache rules, and is held to that provider's ideal: every distinct prefix
token written once, counted in the provider's own units (Anthropic's blocks; OpenAI's,
DeepSeek's and a local server's tokens). One row per provider: the input cost against
sending the same tokens with no cache and against the floor (the ideal's cost), and what
was written against the ideal (where writes are implicit and free, what was prefilled).
Costs are in base-input tokens of the provider's prices; a local server's price is time,
so its cost is the share of input it had to prefill.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.table import Table

from stoker.bench.cache import Units, WorkloadFigures, anthropic_units, hard
from stoker.bench.gemini import gemini_explicit, gemini_implicit
from stoker.bench.tables import rows_table
from stoker.cache.accounting._openai_render import render
from stoker.cache.accounting.anthropic import prefix_blocks
from stoker.cache.accounting.implicit import token_stream
from stoker.cache.models import model_info
from stoker.cache.tokens import tokenizer_for
from stoker.config import DEFAULT_MODEL
from stoker.wire.dialects import bedrock, openrouter
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.figures import json_ratio

Run = Callable[[Path], Awaitable[WorkloadFigures]]


def _token_units(api: str, *, keep_warm: Callable[[dict[str, Any]], bool]) -> Units:
    """Segments of an OpenAI-style body as (key, tokens): OpenAI's own accounting render
    ("chat" or "responses"), or the implicit caches' token stream ("implicit")."""
    memo = ChainMemo()

    def units(payload: dict[str, Any]) -> list[tuple[str, int]] | None:
        if keep_warm(payload):
            return None
        info = model_info(str(payload["model"])) if api != "implicit" else None
        if api == "implicit":
            info = (
                model_info("local")
                if payload["model"] == "local"
                else model_info(str(payload["model"]))
            )
            r = token_stream(payload, info, org="bench", memo=memo, trusted=False)
        else:
            assert info is not None
            r = render(
                payload,
                api,  # type: ignore[arg-type]
                model=info.name,
                org="bench",
                hidden=0,
                ttls=("30m", "12h"),
                memo=memo,
                tokenizer=tokenizer_for(info),
            )
        return [(s.key, s.end - s.start) for s in r.segments]

    return units


def _claude_units(equivalent: Callable[[dict[str, Any]], dict[str, Any]], warm: str) -> Units:
    """Blocks of the Messages body a Claude upstream receives for another wire's body."""
    memo = ChainMemo()

    def units(payload: dict[str, Any]) -> list[tuple[str, int]] | None:
        if _limit(payload, warm) == 1:  # a keep-warm asks for the smallest output
            return None
        return prefix_blocks(equivalent(payload), memo=memo)

    return units


def _limit(payload: dict[str, Any], where: str) -> Any:
    if where == "inferenceConfig":
        return (payload.get("inferenceConfig") or {}).get("maxTokens")
    return payload.get(where)


def _never(payload: dict[str, Any]) -> bool:
    return False


async def _run(name: str, home: Path, **how: Any) -> WorkloadFigures:
    return replace(await hard(home, **how), name=name)


async def anthropic(home: Path) -> WorkloadFigures:
    return await _run("anthropic", home, model=DEFAULT_MODEL, units=anthropic_units)


async def openai(home: Path) -> WorkloadFigures:
    units = _token_units("responses", keep_warm=_never)
    return await _run("openai", home, model="gpt-5.6", dialect="openai_responses", units=units)


async def bedrock_converse(home: Path) -> WorkloadFigures:
    units = _claude_units(bedrock.anthropic_equivalent, "inferenceConfig")
    model = "anthropic.claude-sonnet-4-5-20250929-v1:0"
    return await _run("bedrock", home, model=model, units=units)


async def openrouter_chat(home: Path) -> WorkloadFigures:
    units = _claude_units(openrouter.anthropic_equivalent, "max_tokens")
    return await _run("openrouter", home, model="anthropic/claude-sonnet-4.6", units=units)


async def deepseek(home: Path) -> WorkloadFigures:
    units = _token_units("implicit", keep_warm=_never)
    return await _run("deepseek", home, model="deepseek-chat", units=units)


async def vllm(home: Path) -> WorkloadFigures:
    units = _token_units("implicit", keep_warm=_never)
    return await _run("vllm", home, model="local", dialect="vllm_chat", units=units)


async def llamacpp(home: Path) -> WorkloadFigures:
    units = _token_units("implicit", keep_warm=_never)
    return await _run("llamacpp", home, model="local", dialect="llamacpp_chat", units=units)


PROVIDER_RUNS: dict[str, Run] = {
    "anthropic": anthropic,
    "openai": openai,
    "bedrock": bedrock_converse,
    "openrouter": openrouter_chat,
    "deepseek": deepseek,
    "vllm": vllm,
    "llamacpp": llamacpp,
    "gemini-implicit": gemini_implicit,
    "gemini-explicit": gemini_explicit,
}
"""Provider name -> the hard workload on that provider's simulated API."""


async def run_providers_bench(names: tuple[str, ...] | None = None) -> list[WorkloadFigures]:
    """The hard workload on each named provider (all of them by default), in order."""
    results = []
    for name in names or tuple(PROVIDER_RUNS):
        with tempfile.TemporaryDirectory(prefix=f"stoker-bench-{name}-") as tmp:
            results.append(await PROVIDER_RUNS[name](Path(tmp)))
    return results


def written(figures: WorkloadFigures) -> int:
    """Tokens the cache stored: those written, or, where writes are implicit and free
    (DeepSeek, a local server), every token it had to prefill."""
    total = figures.total
    return total.written or total.uncached


def writes_vs_ideal(figures: WorkloadFigures) -> float:
    ideal = figures.total.ideal
    return written(figures) / ideal if ideal else 0.0


def over_floor(figures: WorkloadFigures) -> float:
    """How far the cost is above the floor (0.03: 3% more than the ideal's cost)."""
    total = figures.total
    return total.cost_ratio / total.floor_ratio - 1 if total.floor_ratio else 0.0


def to_dict(figures: WorkloadFigures) -> dict[str, Any]:
    """One provider's row, as `--json` prints it."""
    total = figures.total
    return {
        "provider": figures.name,
        "calls": total.calls,
        "keep_warm_calls": total.keep_warm_calls,
        "cost_vs_no_cache": json_ratio(total.cost_ratio),
        "floor_vs_no_cache": json_ratio(total.floor_ratio),
        "over_floor": json_ratio(over_floor(figures)),
        "written": written(figures),
        "ideal": total.ideal,
        "writes_vs_ideal": json_ratio(writes_vs_ideal(figures)),
        "read_share": json_ratio(total.read_share),
        "undeclared_misses": total.undeclared,
        "misses": list(total.misses),
        **({"notes": list(figures.notes)} if figures.notes else {}),
    }


def providers_table(results: list[WorkloadFigures]) -> Table:
    cells: dict[str, Callable[[WorkloadFigures], str]] = {
        "provider": lambda f: f.name,
        "calls": lambda f: str(f.total.calls),
        "keep-warm": lambda f: str(f.total.keep_warm_calls),
        "cost vs no cache": lambda f: f"{f.total.cost_ratio:.3f}",
        "floor": lambda f: f"{f.total.floor_ratio:.3f}",
        "over floor": lambda f: f"{over_floor(f):+.1%}",
        "written": lambda f: f"{written(f):,}",
        "ideal": lambda f: f"{f.total.ideal:,}",
        "writes/ideal": lambda f: f"{writes_vs_ideal(f):.2f}x" if f.total.ideal else "-",
        "read share": lambda f: f"{f.total.read_share:.1%}",
    }
    title = "bench cache: the hard workload on every provider"
    table = rows_table(title, results, cells, labels={"provider"})
    notes = [f"{f.name}: {note}" for f in results for note in f.notes]  # e.g. Gemini's storage
    if notes:
        table.caption, table.caption_justify = "\n".join(notes), "left"
    return table
