"""Every code block in the README and the docs site is checked, so docs that run cannot rot.

What happens to a fenced block depends on its language:

- `python`: run as a script in a fresh process, in an empty folder with its own
  `STOKER_HOME`. `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` point at a `stoker sim serve`
  (any key works), so an example written for a real provider runs against the simulator
  unchanged. A block that names the gateway's default address (`127.0.0.1:8765`) or the
  simulator's (`127.0.0.1:8788`) gets a live one there.
- `sh`, `bash`, `console`: every `stoker ...` command in it is parsed by the CLI itself
  (unknown commands, options or missing arguments fail; a synopsis's `[optional]` parts
  are parsed as if given), every `make` target must exist,
  and the whole block must be valid bash (`bash -n`). A block preceded by the comment
  `<!-- test: run -->` is also run, with `bash -eu -o pipefail`, in the same setting as a
  python block: `stoker` on the PATH, the gateway (user `alice`, token `alice-secret`) and
  the simulator at the addresses the block names.
- `toml`: parsed; a gateway configuration (`[agent]`, `[[users]]`, `[platforms.*]`, ...) is
  loaded by `stoker serve`'s own loader, and a prices file by the price book.
- `json`: parsed.
- anything else (`text`, `nginx`, `caddy`, no language): shown, not checked.

`<!-- test: skip REASON -->` before a block leaves it unchecked; the reason is required
and shows in the test's output.

Python blocks are also type-checked, all at once, by `mypy --strict` against the package as
users install it (tests/test_typing_examples.py). `<!-- test: untyped REASON -->` before
a python block leaves it out of that check only (it still runs); the reason is required.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import click
import httpx
import pytest
from click.exceptions import Exit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
GATEWAY = "http://127.0.0.1:8765"  # `stoker serve`'s default address, as the docs write it
SIM = "http://127.0.0.1:8788"  # `stoker sim serve`'s default address
TOKEN = "alice-secret"  # alice's bearer token in the docs' gateway examples
SHELLS = {"sh", "bash", "console", "shell"}

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[^`]*)$")
_MARK = re.compile(r"^\s*<!--\s*test:\s*(?P<what>run|skip|untyped)\b\s*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    mark: str = ""  # "run", "skip", "untyped" or ""
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of `path` in order, dedented by their fence's indentation."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        before = next((x for x in reversed(lines[:start]) if x.strip()), "")
        mark = _MARK.match(before)
        found.append(
            Block(
                path=path,
                line=start + 1,
                language=(opened["info"].split() or [""])[0].lower(),
                code="\n".join(body) + "\n",
                mark=mark["what"] if mark else "",
                reason=mark["reason"] if mark else "",
            )
        )
        i += 1
    return found


def docs_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class Services:
    """A gateway and a simulator served for the examples, and a home for their files."""

    gateway: str
    sim: str
    home: Path

    def env(self, workdir: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STOKER_", "OTEL_"))} | {
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "STOKER_HOME": str(workdir / "stoker-home"),
            "ANTHROPIC_BASE_URL": self.sim,
            "ANTHROPIC_API_KEY": "any",
            "OPENAI_BASE_URL": self.sim + "/v1",
            "OPENAI_API_KEY": "any",
            "TOKEN": TOKEN,
            "COLUMNS": "120",
            "NO_COLOR": "1",
        }
        env.pop("PYTHONPATH", None)
        return env

    def localize(self, code: str) -> str:
        """The block with the default addresses replaced by the live services'."""
        return code.replace(GATEWAY, self.gateway).replace(SIM, self.sim)


def _wait(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer {url} within 60 s")


PROMPT = "You help a Python team review their pull requests carefully. " * 120
PLAN = "# Release plan\n\nWe ship on Friday after review.\n"


def gateway_config(home: Path) -> Path:
    """The first gateway of the docs (docs/gateway/index.md, "A first gateway"), with the
    system prompt and workspace folder it names."""
    page = DOCS / "gateway" / "index.md"
    config = next(b.code for b in blocks(page) if b.language == "toml" and "[[users]]" in b.code)
    assert f'token = "{TOKEN}"' in config, f"{page}: the first gateway's user is alice, {TOKEN}"
    (home / "prompt.md").write_text(PROMPT, encoding="utf-8")
    (home / "notes").mkdir(exist_ok=True)
    (home / "notes" / "plan.md").write_text(PLAN, encoding="utf-8")
    path = home / "gateway.toml"
    path.write_text(config, encoding="utf-8")
    return path


@contextlib.contextmanager
def services(home: Path) -> Iterator[Services]:
    """`stoker sim serve`, and `stoker serve` with the docs' first gateway configuration
    (on the simulator; user alice), on free ports."""
    home.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("STOKER_")}
    base |= {"STOKER_HOME": str(home)}
    config = gateway_config(home)
    sim_port, gateway_port = free_port(), free_port()
    stoker = str(BIN / "stoker")
    sim = subprocess.Popen(
        [stoker, "sim", "serve", "--port", str(sim_port)],
        env=base,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    gateway = subprocess.Popen(
        [stoker, "serve", "--config", str(config), "--port", str(gateway_port)],
        env=base,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        found = Services(
            gateway=f"http://127.0.0.1:{gateway_port}",
            sim=f"http://127.0.0.1:{sim_port}",
            home=home,
        )
        _wait(found.sim + "/v1/models", sim, "stoker sim serve")
        _wait(found.gateway + "/healthz", gateway, "stoker serve")
        yield found
    finally:
        for process in (gateway, sim):
            process.terminate()
        for process in (gateway, sim):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _run(block: Block, live: Services, workdir: Path, argv: list[str]) -> CompletedProcess[str]:
    """Run `argv` for a block in `workdir`; fails the test with its output if it fails."""
    done = subprocess.run(
        argv,
        cwd=workdir,
        env=live.env(workdir),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"{block.id} failed:\n{done.stdout}\n{done.stderr}"
    return done


def run_python(block: Block, live: Services, workdir: Path) -> CompletedProcess[str]:
    """Run a python block as a script."""
    script = workdir / "example.py"
    script.write_text(live.localize(block.code), encoding="utf-8")
    return _run(block, live, workdir, [sys.executable, str(script)])


def run_shell(block: Block, live: Services, workdir: Path) -> CompletedProcess[str]:
    return _run(
        block, live, workdir, ["bash", "-eu", "-o", "pipefail", "-c", live.localize(block.code)]
    )


def commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block: continuation lines joined, comments and
    leading `VAR=value` assignments dropped, split at `&&`, `||`, `;`, `|` and `&`."""
    joined = re.sub(r"\\\n", " ", code)
    found: list[list[str]] = []
    for line in joined.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token in {";", "&&", "||", "|", "&", ";;"}:
                while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                    words.pop(0)
                if words:
                    found.append(words)
                words = []
            else:
                words.append(token)
    return found


def check_stoker_command(argv: Sequence[str]) -> None:
    """Parse `stoker ARGV` as the CLI would, without running it. A synopsis's optional
    parts (`[--limit 20] [--json]`) are parsed as if given."""
    from stoker.cli.app import app

    command: click.Command = app
    name, rest = "stoker", [w.removeprefix("[").removesuffix("]") for w in argv]
    parent = None
    while rest and not rest[0].startswith("-") and isinstance(command, click.Group):
        parent = command.make_context(name, [], parent=parent, resilient_parsing=True)
        sub = command.get_command(parent, rest[0])
        assert sub is not None, f"no command {rest[0]!r} in `{name}`"
        name, command, rest = rest[0], sub, rest[1:]
    try:
        command.make_context(name, rest, parent=parent)
    except Exit:  # --help, --version
        return
    except click.ClickException as exc:  # usage errors: unknown option, missing argument
        raise AssertionError(f"`stoker {shlex.join(argv)}`: {exc.format_message()}") from exc


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.M))


def check_shell(block: Block) -> None:
    """Every stoker command parses, every make target exists, and bash can read it all."""
    syntax = subprocess.run(
        ["bash", "-n", "-c", block.code],
        capture_output=True,
        text=True,
        check=False,
    )
    assert syntax.returncode == 0, f"{block.id}: {syntax.stderr}"
    targets = make_targets()
    for words in commands(block.code):
        program = Path(words[0]).name
        if program == "stoker":
            check_stoker_command(words[1:])
        elif program == "python" and words[1:3] == ["-m", "stoker"]:
            check_stoker_command(words[3:])
        elif program == "make":
            missing = [w for w in words[1:] if not w.startswith("-") and w not in targets]
            assert not missing, f"{block.id}: no make target {missing}"


GATEWAY_TABLES = {
    "host",
    "port",
    "database",
    "agent",
    "users",
    "limits",
    "cache",
    "keep_warm",
    "store",
    "lifecycle",
    "approvals",
    "timeouts",
    "memory",
    "platforms",
    "telemetry",
}


def check_toml(block: Block, workdir: Path) -> None:
    parsed = tomllib.loads(block.code)
    if "models" in parsed:  # a prices file
        from stoker.cache.prices import PriceBook

        path = workdir / "prices.toml"
        path.write_text(block.code, encoding="utf-8")
        book = PriceBook.load(path)
        for model in parsed["models"]:
            book.require(model, "anthropic")
    elif set(parsed) & GATEWAY_TABLES:
        from stoker.gateway.config import load_config

        path = workdir / "gateway.toml"
        path.write_text(block.code, encoding="utf-8")
        for name in ("prompt.md", "system.md"):
            (workdir / name).write_text("You are helpful.\n", encoding="utf-8")
        load_config(path, env={})


def check_block(block: Block, live: Services | None, workdir: Path) -> str:
    """Check one block as its language says; what was done ("ran", "parsed", ...)."""
    if block.mark == "skip":
        assert block.reason, f"{block.id}: `<!-- test: skip -->` needs a reason"
        return f"skipped: {block.reason}"
    if block.mark == "untyped":
        assert block.language == "python", f"{block.id}: only python blocks are type-checked"
        assert block.reason, f"{block.id}: `<!-- test: untyped -->` needs a reason"
    if block.language == "python":
        assert live is not None
        run_python(block, live, workdir)
        return "ran"
    if block.language in SHELLS:
        check_shell(block)
        if block.mark == "run":
            assert live is not None
            run_shell(block, live, workdir)
            return "ran"
        return "parsed"
    if block.language == "toml":
        check_toml(block, workdir)
        return "loaded"
    if block.language == "json":
        json.loads(block.code)
        return "parsed"
    return "shown"


def needs_services(block: Block) -> bool:
    return block.mark != "skip" and (
        block.language == "python" or (block.language in SHELLS and block.mark == "run")
    )


def have_tools() -> list[str]:
    return [t for t in ("bash", "curl", "jq") if shutil.which(t) is None]


@contextlib.contextmanager
def live_services(home: Path, whose: str) -> Iterator[Services]:
    """`services` for the examples of a test module, which is skipped when a tool their
    shell blocks need is missing (`whose` names them in the reason)."""
    missing = have_tools()
    if missing:
        pytest.skip(f"{whose} shell examples need {', '.join(missing)}")
    with services(home) as found:
        yield found


def check_with(block: Block, request: pytest.FixtureRequest, workdir: Path) -> None:
    """`check_block`, with the module's `live` services when the block needs them."""
    live = request.getfixturevalue("live") if needs_services(block) else None
    check_block(block, live, workdir)
