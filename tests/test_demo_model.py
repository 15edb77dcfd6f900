"""The simulator's demo model uses the tools it has when the prompt is about what they do
(by the tools' names and descriptions, deterministically), and its arguments are always
valid against the tool's schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stoker.providers.sim.model import RuleModel
from stoker.providers.sim.tool_match import best_tool, stems
from stoker.store.sqlite import SQLiteStore
from stoker.toolsets.workspace import workspace_toolset
from stoker.wire.blocks import TextBlock, ToolUseBlock
from stoker.wire.canonical import canonical_json
from stoker.wire.messages import user_text
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from tests.helpers import sim_agent


def _specs(root: Path) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in workspace_toolset(root).tools
    ]


def _request(specs: list[dict[str, Any]], text: str) -> Request:
    tools = tuple(canonical_json(s) for s in specs)
    prefix = Prefix(params=CacheParams(model="claude-sonnet-4-6"), tools=tools)
    return Request(prefix=prefix, messages=(user_text(text),))


async def test_what_files_are_in_this_folder_lists_them(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("ship on friday\n")
    (tmp_path / "plan.txt").write_text("one\n")
    agent, _ = sim_agent(tools=[workspace_toolset(tmp_path)], keep_warm=False)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "files")
        result = await session.send("What files are in this folder?")
    calls = [b for m in session.history for b in m.content if isinstance(b, ToolUseBlock)]
    assert [(c.name, json.loads(c.input_json)) for c in calls] == [("list_files", {})]
    assert "notes.md" in result.text
    assert "plan.txt" in result.text


def test_the_prompt_decides_the_tool_by_what_each_one_does(tmp_path: Path) -> None:
    specs = _specs(tmp_path)
    chosen = {
        text: None if (i := best_tool(specs, text)) is None else specs[i]["name"]
        for text in (
            "What files are in this folder?",
            "Show me what's in the directory",
            "Read README.md",
            "How many words are in notes.md?",
            "Find TODO in the files",
            "Please remember to buy milk",
            "Tell me a joke about penguins",
            "hello there",
            "Write the summary now, without calling tools: file names and results.",
        )
    }
    assert chosen == {
        "What files are in this folder?": "list_files",
        "Show me what's in the directory": "list_files",
        "Read README.md": "read_file",
        "How many words are in notes.md?": "word_count",
        "Find TODO in the files": "search_files",
        "Please remember to buy milk": "add_note",
        "Tell me a joke about penguins": None,
        "hello there": None,
        "Write the summary now, without calling tools: file names and results.": None,
    }
    # the arguments come from the user's words where they fit
    (call,) = RuleModel().respond(_request(specs, "How many words are in notes.md?"))
    assert isinstance(call, ToolUseBlock)
    assert (call.name, json.loads(call.input_json)) == ("word_count", {"path": "notes.md"})


def test_an_unrelated_prompt_calls_no_tool(tmp_path: Path) -> None:
    reply = RuleModel().respond(_request(_specs(tmp_path), "Tell me a joke about penguins"))
    assert reply == (TextBlock(text="Understood: Tell me a joke about penguins"),)


def test_the_same_request_gets_the_same_reply(tmp_path: Path) -> None:
    request = _request(_specs(tmp_path), "Find 'cache' in the files")
    first, second = RuleModel().respond(request), RuleModel().respond(request)
    assert first == second
    (call,) = first
    assert isinstance(call, ToolUseBlock)
    assert json.loads(call.input_json) == {"pattern": "cache"}


def test_stems_fold_plurals_verb_forms_and_a_few_synonyms() -> None:
    assert stems("files file") == stems("file") == stems("folder")
    assert stems("listing listed lists") == stems("list")
    assert stems("searches find") == stems("search")
    assert stems("the a of what is") == frozenset()


# --- arguments always validate -------------------------------------------------------

_NAMES = st.sampled_from(["path", "query", "count", "limit", "tags", "mode", "when", "opts"])
_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    text = st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "minLength": st.integers(0, 5),
            "maxLength": st.integers(5, 30),
            "description": _TEXT,
        },
    )
    shaped = st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("string"), "pattern": st.sampled_from(["^[a-z]+$", "\\.md$"])}
        ),
        st.fixed_dictionaries(
            {"type": st.just("string"), "format": st.sampled_from(["date-time", "uuid", "email"])}
        ),
    )
    string = st.one_of(text, shaped)
    integer = st.fixed_dictionaries(
        {"type": st.just("integer")},
        optional={"minimum": st.integers(-5, 5), "maximum": st.integers(6, 50)},
    )
    number = st.fixed_dictionaries(
        {"type": st.just("number")},
        optional={"exclusiveMinimum": st.just(0), "multipleOf": st.sampled_from([0.5, 3])},
    )
    enum = st.fixed_dictionaries(
        {"enum": st.lists(st.sampled_from(["a", "b", 1, None, True]), min_size=1, unique=True)}
    )
    boolean = st.just({"type": "boolean"})
    return st.one_of(string, integer, number, enum, boolean)


def _admits_a_value(array: dict[str, Any]) -> bool:
    """Distinct items beyond one need items of an unbounded kind: three distinct booleans
    (or objects of booleans) do not exist, and no model can make them."""
    wanted, items = array.get("minItems", 0), array["items"]
    if not array.get("uniqueItems") or wanted <= 1:
        return True
    if items.get("type") == "integer":
        return items.get("maximum", 1e9) - items.get("minimum", -1e9) + 1 >= wanted
    return items.get("type") in ("string", "number")


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    def objects(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        array = st.fixed_dictionaries(
            {"type": st.just("array"), "items": inner},
            optional={"minItems": st.integers(0, 3), "uniqueItems": st.booleans()},
        ).filter(_admits_a_value)
        return st.dictionaries(_NAMES, st.one_of(inner, array), max_size=4).flatmap(
            lambda props: st.fixed_dictionaries(
                {
                    "type": st.just("object"),
                    "properties": st.just(props),
                    "required": st.lists(st.sampled_from(sorted(props)), unique=True)
                    if props
                    else st.just([]),
                },
                optional={"additionalProperties": st.just(False)},
            )
        )

    return st.recursive(_leaf(), objects, max_leaves=6).filter(lambda s: s.get("type") == "object")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(schema=_schemas(), words=_TEXT, mention=st.booleans())
@example(  # distinct items that a pattern is searched in, not anchored to
    schema={
        "type": "object",
        "properties": {
            "path": {
                "type": "array",
                "items": {"type": "string", "pattern": r"\.md$"},
                "minItems": 2,
                "uniqueItems": True,
            }
        },
        "required": ["path"],
    },
    words="",
    mention=False,
)
def test_arguments_always_validate_against_the_tools_schema(
    schema: dict[str, Any], words: str, mention: bool
) -> None:
    spec = {"name": "fetch_record", "description": "Fetch a record.", "input_schema": schema}
    text = f"fetch the record {words}" if mention else f"{words} fetch_record"
    reply = RuleModel().respond(_request([spec], text))
    calls = [b for b in reply if isinstance(b, ToolUseBlock)]
    assert calls, reply  # every schema here admits a value, and the prompt is about the tool
    arguments = json.loads(calls[0].input_json)
    jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(arguments)


def test_a_schema_no_value_satisfies_gets_a_text_answer_not_a_bad_call() -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z][0-9]{2}$", "minLength": 4}},
        "required": ["code"],
    }
    spec = {"name": "fetch_record", "description": "Fetch a record.", "input_schema": schema}
    reply = RuleModel().respond(_request([spec], "fetch the record"))
    assert reply == (TextBlock(text="Understood: fetch the record"),)
