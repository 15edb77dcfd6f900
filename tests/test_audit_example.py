"""The example trace the README and docs/proxy.md audit: what they quote is what `stoker
audit` prints on the committed file, the file is what `scripts/audit_example.py` writes,
and its HTML report shows each table once."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.audit import audit_file
from stoker.report.html import render_html
from tests.doc_examples import blocks

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGE = ROOT / "docs" / "proxy.md"
TRACE = ROOT / "docs" / "examples" / "audit-trace.jsonl"
BIN = Path(sys.executable).parent


def _words(text: str) -> str:
    return " ".join(text.split())


def _readme_claim() -> tuple[str, list[str]]:
    """The command the README names for the example, and every `quoted` figure after it in
    that paragraph: what it says the command prints."""
    text = README.read_text(encoding="utf-8")
    (paragraph,) = [p for p in text.split("\n\n") if "`stoker audit docs/examples/" in p]
    quoted = [_words(q) for q in re.findall(r"`([^`]+)`", paragraph)]
    at = next(i for i, q in enumerate(quoted) if q.startswith("stoker audit docs/examples/"))
    return quoted[at], quoted[at + 1 :]


COMMAND, QUOTED = _readme_claim()


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The README's command, run as a reader runs it: from the repository's root, with a
    home of its own (no prices.toml of the machine's) and its output not a terminal."""
    home = tmp_path_factory.mktemp("audit-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STOKER_", "OTEL_"))}
    env |= {"STOKER_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
    done = subprocess.run(
        shlex.split(COMMAND), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_quotes_what_stoker_audit_prints_on_the_example(printed: str) -> None:
    assert COMMAND == "stoker audit docs/examples/audit-trace.jsonl"
    assert len(QUOTED) >= 2, QUOTED
    for figure in QUOTED:
        assert figure in _words(printed), figure


def test_the_docs_page_shows_all_that_the_command_prints(printed: str) -> None:
    found = blocks(PAGE)
    at = next(i for i, b in enumerate(found) if b.language == "sh" and b.code.strip() == COMMAND)
    shown = found[at + 1]
    assert shown.language == "text"
    assert [line.rstrip() for line in shown.code.splitlines()] == [
        line.rstrip() for line in printed.splitlines()
    ]
    assert "session code-review-bot" not in printed  # a conversation's id is said once


@pytest.mark.slow
def test_the_committed_trace_is_what_the_script_writes(tmp_path: Path) -> None:
    """Everything the audit reads of a new run equals the committed file's (the bytes may
    differ where a newer instrumentation records more, or names its own version)."""
    fresh = tmp_path / "trace.jsonl"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "audit_example.py"), "--out", str(fresh)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

    def read(path: Path) -> dict[str, object]:
        report = audit_file(path).to_dict()
        assert report.pop("source") == f"{path}: 5 spans"
        return report

    assert read(fresh) == read(TRACE)
    assert "gen_ai.prompt" not in fresh.read_text(encoding="utf-8")  # usage, not content


def test_the_html_report_shows_each_table_once(tmp_path: Path) -> None:
    one = render_html(audit_file(TRACE))
    assert one.count("would have saved</th>") == 1
    assert one.count("<h2>code-review-bot · claude-sonnet-4-6</h2>") == 1
    assert "session code-review-bot" not in one
    # With two conversations the page adds them up, and each tree shows its own share.
    text = TRACE.read_text(encoding="utf-8")
    two = tmp_path / "two.jsonl"
    other = text.replace('"code-review-bot"', '"docs-bot"').replace('"traceId":"0', '"traceId":"f')
    two.write_text(text + other, encoding="utf-8")
    report = audit_file(two)
    assert len(report.lineages) == 2
    page = render_html(report)
    assert page.count("would have saved</th>") == 3
    assert page.count("<h3>What Stoker would have saved here</h3>") == 2
    (total,) = report.what_if
    assert total.saving_usd == pytest.approx(2 * audit_file(TRACE).what_if[0].saving_usd)
