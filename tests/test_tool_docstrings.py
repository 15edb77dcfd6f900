"""`@tool` reads Google, Sphinx, NumPy and Epydoc docstrings alike, and warns when a
parameter goes without a description the model can read.

The exact Google behaviour sessions depend on is pinned by `test_tool_docstrings_google.py`
and `test_tool_docstrings_google_edges.py`.
"""

from __future__ import annotations

import inspect
import json
import keyword
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker import ToolDocWarning as ExportedToolDocWarning
from stoker.tools import Tool, ToolContext, ToolDocWarning, tool
from stoker.tools._schema import parse_docstring

GOOGLE = """Search the notes
for a phrase.

Args:
    query: The phrase to look for,
        matched without regard to case.
    limit (int): Most notes to return.

Returns:
    One note per line.
"""

SPHINX = """Search the notes
for a phrase.

:param query: The phrase to look for,
    matched without regard to case.
:type query: str
:param int limit: Most notes to return.
:returns: One note per line.
:rtype: str
"""

NUMPY = """Search the notes
for a phrase.

Parameters
----------
query : str
    The phrase to look for,
    matched without regard to case.
limit : int, optional
    Most notes to return.

Returns
-------
str
    One note per line.
"""

EPYDOC = """Search the notes
for a phrase.

@param query: The phrase to look for,
    matched without regard to case.
@type query: str
@param limit: Most notes to return.
@return: One note per line.
"""

STYLES = [
    pytest.param(GOOGLE, id="Google"),
    pytest.param(SPHINX, id="Sphinx"),
    pytest.param(NUMPY, id="NumPy"),
    pytest.param(EPYDOC, id="Epydoc"),
]


def _search(doc: str | None) -> Callable[..., str]:
    def search(query: str, context: ToolContext, limit: int = 10) -> str:
        return f"{query} {limit} {context}"

    search.__doc__ = doc
    return search


def _quiet(fn: Callable[..., Any], **options: Any) -> Tool:
    """`@tool` on `fn`, failing on any ToolDocWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ToolDocWarning)
        return tool(**options)(fn)


# -- every style ----------------------------------------------------------------------


@pytest.mark.parametrize("doc", STYLES)
def test_every_style_gives_the_same_tool(doc: str) -> None:
    made = _quiet(_search(doc))
    assert json.loads(made.spec_bytes) == {
        "name": "search",
        "description": "Search the notes for a phrase.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "query": {
                    "type": "string",
                    "description": "The phrase to look for, matched without regard to case.",
                },
                "limit": {"type": "integer", "default": 10, "description": "Most notes to return."},
            },
            "required": ["query"],
        },
    }
    assert made.spec_bytes == _quiet(_search(GOOGLE)).spec_bytes


SUMMARY_THEN_PARAMETERS = [
    pytest.param("Search the notes\nfor a phrase.\nArgs:\n    query: The phrase.", id="Google"),
    pytest.param("Search the notes\nfor a phrase.\n:param query: The phrase.", id="Sphinx"),
    pytest.param(
        "Search the notes\nfor a phrase.\nParameters\n----------\nquery : str\n    The phrase.",
        id="NumPy",
    ),
    pytest.param("Search the notes\nfor a phrase.\n@param query: The phrase.", id="Epydoc"),
]


@pytest.mark.parametrize("doc", SUMMARY_THEN_PARAMETERS)
def test_the_summary_ends_where_the_parameters_start(doc: str) -> None:
    parsed = parse_docstring(doc)
    assert (parsed.summary, parsed.params) == (
        "Search the notes for a phrase.",
        {"query": "The phrase."},
    )


def test_a_role_at_the_start_of_a_line_stays_in_the_summary() -> None:
    doc = "Search the notes, as\n:func:`grep` would.\n:param query: The phrase."
    assert parse_docstring(doc).summary == "Search the notes, as :func:`grep` would."


def test_numpy_names_sharing_an_entry_share_its_description() -> None:
    def move(x: int, y: int) -> str:
        """Move the cursor.

        Parameters
        ----------
        x, y : int
            Where to, in cells.
        """
        return f"{x} {y}"

    made = _quiet(move)
    assert {n: p["description"] for n, p in made.input_schema["properties"].items()} == {
        "x": "Where to, in cells.",
        "y": "Where to, in cells.",
    }


def test_the_warning_is_public() -> None:
    assert ToolDocWarning is ExportedToolDocWarning
    assert issubclass(ToolDocWarning, UserWarning)


# -- warnings -------------------------------------------------------------------------

UNDESCRIBED_LIMIT = [
    pytest.param("Search.\n\nArgs:\n    query: The phrase.", id="Google"),
    pytest.param("Search.\n\n:param query: The phrase.", id="Sphinx"),
    pytest.param("Search.\n\nParameters\n----------\nquery : str\n    The phrase.", id="NumPy"),
    pytest.param("Search.\n\n@param query: The phrase.", id="Epydoc"),
    pytest.param("Search.\n\nArgs:\n    query: The phrase.\n    limit:", id="an empty entry"),
]


@pytest.mark.parametrize("doc", UNDESCRIBED_LIMIT)
def test_a_parameter_left_out_of_the_docstring_warns(doc: str) -> None:
    with pytest.warns(ToolDocWarning, match=r"tool search: parameter 'limit' has no descr") as w:
        made = tool(_search(doc))
    assert [str(m.message) for m in w] == [
        "tool search: parameter 'limit' has no description in the docstring (it describes "
        "'query'); the model sees only its name and type"
    ]
    assert made.input_schema["properties"]["query"]["description"] == "The phrase."
    assert "description" not in made.input_schema["properties"]["limit"]


def test_a_documented_name_the_function_does_not_have_warns() -> None:
    doc = "Search.\n\nArgs:\n    qeury: The phrase.\n    limit: Most notes."
    with pytest.warns(ToolDocWarning, match=r"tool search: .*parameter '(qeury|query)'") as w:
        made = tool(_search(doc))
    assert [str(m.message) for m in w] == [
        "tool search: the docstring describes parameter 'qeury', which the function does not "
        "have (its parameters: query, limit); fix the name",
        "tool search: parameter 'query' has no description in the docstring (it describes "
        "'qeury', 'limit'); the model sees only its name and type",
    ]
    assert "description" not in made.input_schema["properties"]["query"]


UNREADABLE = [
    pytest.param("Search.\n\nArgs:\n    None", "Google", id="Google, no entry"),
    pytest.param(
        "Search.\n\n:param: The phrase.\n:param limit: Most notes.",
        "Sphinx",
        id="Sphinx, a field without a name",
    ),
    pytest.param(
        "Search.\n\n@param query The phrase.",
        "Epydoc",
        id="Epydoc, no colon",
    ),
]


@pytest.mark.parametrize(("doc", "section"), UNREADABLE)
def test_a_parameter_section_that_cannot_be_read_warns_for_each_parameter(
    doc: str, section: str
) -> None:
    with pytest.warns(
        ToolDocWarning, match=rf"tool search: parameter '(query|limit)' .* {section}-style"
    ) as w:
        made = tool(_search(doc))
    messages = [str(m.message) for m in w]
    assert [m.split(":", 2)[:2] for m in messages] == [
        ["tool search", " parameter 'query' has no description"],
        ["tool search", " parameter 'limit' has no description"],
    ]
    assert all(
        f"the docstring's {section}-style parameter section cannot be read (" in m for m in messages
    )
    assert all("description" not in p for p in made.input_schema["properties"].values())


def test_the_warning_points_at_the_function() -> None:
    def search(query: str, limit: int = 10) -> str:
        """Search.

        Args:
            query: The phrase.
        """
        return query * limit

    with pytest.warns(ToolDocWarning, match="parameter 'limit'") as w:
        tool(search)
    assert (w[0].filename, w[0].lineno) == (__file__, search.__code__.co_firstlineno)


QUIET = [
    pytest.param("Search the notes for a phrase.", id="a summary only"),
    pytest.param(None, id="no docstring"),
    pytest.param("Search.\n\nReturns:\n    One note per line.", id="no parameter section"),
    pytest.param(
        "Search.\n\nArgs:\n    query: The phrase.\n    limit: Most notes.\n"
        "    context: Who asks (injected).",
        id="the context parameter described too",
    ),
]


@pytest.mark.parametrize("doc", QUIET)
def test_no_warning_without_parameter_docs_or_for_the_context_parameter(
    doc: str | None,
) -> None:
    made = _quiet(_search(doc))
    assert made.context_param == "context"
    assert set(made.input_schema["properties"]) == {"query", "limit"}


def test_no_warning_when_a_tool_without_parameters_has_an_unreadable_section() -> None:
    def ping() -> str:
        """Ping the server.

        Args:
            None
        """
        return "pong"

    assert _quiet(ping).description == "Ping the server."


def test_an_explicit_description_still_takes_parameters_from_the_docstring() -> None:
    made = _quiet(_search(SPHINX), description="Find notes.")
    assert made.description == "Find notes."
    assert made.input_schema["properties"]["limit"]["description"] == "Most notes to return."


# -- any names and texts, in every style ------------------------------------------------

_NAMES = st.lists(
    st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
        lambda n: not keyword.iskeyword(n)
    ),
    min_size=1,
    max_size=4,
    unique=True,
)
_WORD = st.text(
    alphabet=st.sampled_from(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?()'-"
    ),
    min_size=1,
    max_size=10,
)
_LINES = st.lists(st.lists(_WORD, min_size=1, max_size=6), min_size=1, max_size=3)


def _render(style: str, summary: str, params: dict[str, list[list[str]]]) -> str:
    """A docstring documenting `params` (name -> lines of words) in `style`."""
    out = [summary, ""]
    if style == "Google":
        out.append("Args:")
    if style == "NumPy":
        out += ["Parameters", "----------"]
    for name, lines in params.items():
        text = [" ".join(words) for words in lines]
        if style == "Google":
            out += [f"    {name} (str): {text[0]}"] + [f"        {t}" for t in text[1:]]
        elif style == "Sphinx":
            out += [f":param {name}: {text[0]}"] + [f"    {t}" for t in text[1:]]
        elif style == "NumPy":
            out += [f"{name} : str"] + [f"    {t}" for t in text]
        else:
            out += [f"@param {name}: {text[0]}"] + [f"    {t}" for t in text[1:]]
    return "\n".join(out)


def _function(names: list[str], doc: str) -> Callable[..., str]:
    def body(**arguments: str) -> str:
        return " ".join(arguments.values())

    kind = inspect.Parameter.KEYWORD_ONLY
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, kind, annotation=str) for n in names]
    )
    body.__annotations__ = {n: str for n in names}
    body.__doc__ = doc
    return body


@settings(max_examples=50, deadline=None)
@given(
    style=st.sampled_from(["Google", "Sphinx", "NumPy", "Epydoc"]),
    names=_NAMES,
    texts=st.lists(_LINES, min_size=4, max_size=4),
)
def test_the_schema_carries_exactly_the_documented_descriptions(
    style: str, names: list[str], texts: list[list[list[str]]]
) -> None:
    params = dict(zip(names, texts, strict=False))
    made = _quiet(_function(names, _render(style, "Do the thing.", params)))
    assert made.description == "Do the thing."
    assert {n: p.get("description") for n, p in made.input_schema["properties"].items()} == {
        n: " ".join(" ".join(words) for words in lines) for n, lines in params.items()
    }
