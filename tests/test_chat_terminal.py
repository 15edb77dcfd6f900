"""`stoker chat` in a real terminal (a pty): what a person sees, in the order they see it.

A risky tool's question comes before any "running" line for it, and /help lists each
command once (/quit is /exit's other name, on /exit's line)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
if sys.platform == "win32":  # pragma: no cover
    pytest.skip("needs a pty", allow_module_level=True)


class Terminal:
    """A process on the slave side of a pty; `seen` is everything it printed so far,
    without colour codes."""

    def __init__(self, master: int, process: subprocess.Popen[bytes]) -> None:
        self.master = master
        self.process = process
        self.seen = ""

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def wait_for(self, text: str, *, after: int = 0, timeout: float = 60.0) -> int:
        """Read until `text` shows up past position `after`; its position."""
        deadline = time.monotonic() + timeout
        while (found := self.seen.find(text, after)) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or (self.process.poll() is not None and not self._read(0)):
                raise AssertionError(f"never saw {text!r}; the terminal shows:\n{self.seen}")
            self._read(min(left, 1.0))
        return found

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the other side closed
            return False
        self.seen += _ANSI.sub("", chunk.decode(errors="replace")).replace("\r\n", "\n")
        return bool(chunk)


@contextmanager
def chat_in_pty(tmp_path: Path) -> Iterator[Terminal]:
    master, slave = os.openpty()
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "NO_COLOR": "1", "TERM": "xterm"}
    env["STOKER_HOME"] = str(tmp_path / "home")
    command = [sys.executable, "-m", "stoker", "chat", "--db", str(tmp_path / "s.db")]
    process = subprocess.Popen(
        [*command, "--workdir", str(tmp_path)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    try:
        yield Terminal(master, process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
        os.close(master)


def test_a_risky_tool_is_asked_about_before_it_says_running(tmp_path: Path) -> None:
    with chat_in_pty(tmp_path) as term:
        term.wait_for("you> ")
        term.type("add_note 'ship on friday'")
        asked = term.wait_for('Allow add_note(text="ship on friday")? [y/N]')
        assert "add_note running" not in term.seen  # nothing claims it runs before the answer
        term.type("y")
        running = term.wait_for("… add_note running", after=asked)
        done = term.wait_for("✓ add_note done", after=running)
        term.wait_for("you> ", after=done)

        term.type("add_note 'and on monday'")
        asked = term.wait_for('Allow add_note(text="and on monday")? [y/N]', after=done)
        term.type("n")
        refused = term.wait_for("✗ add_note not run", after=asked)
        prompt = term.wait_for("you> ", after=refused)
        assert "add_note running" not in term.seen[asked:prompt]
        assert "add_note done" not in term.seen[asked:prompt]

        term.type("/help")
        start = term.wait_for("/help list these commands", after=prompt)
        end = term.wait_for("Anything else goes to the model", after=start)
        listed = term.seen[start:end]
        assert listed.count("/quit") == 1
        assert listed.count("/exit") == 1
        assert "/exit, /quit leave" in listed
        term.type("/quit")
        term.wait_for("resume with: stoker chat --resume", after=end)
        assert term.process.wait(30) == 0
    assert (tmp_path / "NOTES.md").read_text() == "- ship on friday\n"
