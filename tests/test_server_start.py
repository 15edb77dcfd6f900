"""Starting a server as a newcomer does, in a process of its own: a server that cannot
start says why in one `error:` line on standard error, with what to do, and exits 1,
with no traceback and no banner before it; one that starts prints its banner only once
its port answers."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from stoker.errors import ConfigError, PortInUse
from stoker.http_server import GC_YOUNG_THRESHOLD, listen, serve

pytestmark = pytest.mark.slow  # each test starts Stoker in a child process

USERS = '[[users]]\nid = "alice"\ntoken = "a-token-for-alice"\n'
BANNERS = ("gateway on", "Stoker proxy", "Stoker simulator on")


def _env(home: Path) -> dict[str, str]:
    """This process's environment, with a home of the test's own and no setting or key
    of Stoker or a provider (a developer's ANTHROPIC_API_KEY must not make a test pass)."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("STOKER_", "ANTHROPIC_", "OPENAI_"))
    }
    return {**kept, "STOKER_HOME": str(home)}


def _stoker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stoker", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path / "home"),
        timeout=120,
        check=False,
    )


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    # a config with no [agent] serves the starter agent over ./notes beside it; without
    # the folder the gateway also warns about it, and these tests hold the one error line
    (tmp_path / "notes").mkdir(exist_ok=True)
    return str(path)


def _refused(result: subprocess.CompletedProcess[str], *said: str) -> str:
    """The one line a refused start printed, which must say each of `said`."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not any(banner in result.stdout for banner in BANNERS), result.stdout
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ")
    for words in said:
        assert words in line
    return line


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another process (this one) listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_serve_on_a_port_in_use_says_so_and_how_to_pick_another(
    tmp_path: Path, taken_port: int
) -> None:
    config = _config(tmp_path, USERS)
    result = _stoker(tmp_path, "serve", "--config", config, "--port", str(taken_port))
    line = _refused(result, f"port {taken_port} on 127.0.0.1 is in use", "--port")
    assert line == (
        f"error: port {taken_port} on 127.0.0.1 is in use (another stoker serve?): "
        "pick another with --port"
    )


def test_proxy_on_a_port_in_use_says_so_before_it_makes_its_database(
    tmp_path: Path, taken_port: int
) -> None:
    db = tmp_path / "new" / "proxy.db"
    result = _stoker(tmp_path, "proxy", "--listen", f"127.0.0.1:{taken_port}", "--db", str(db))
    _refused(result, f"port {taken_port} on 127.0.0.1 is in use", "--listen")
    assert not db.parent.exists()


def test_sim_serve_on_a_port_in_use_says_so(tmp_path: Path, taken_port: int) -> None:
    result = _stoker(tmp_path, "sim", "serve", "--port", str(taken_port))
    _refused(result, f"port {taken_port} on 127.0.0.1 is in use", "stoker sim serve", "--port")


def test_serve_with_an_unknown_model_names_it_and_the_listing(tmp_path: Path) -> None:
    config = _config(tmp_path, USERS + '[agent]\nmodel = "claude-sonnet-9-9"\n')
    result = _stoker(tmp_path, "serve", "--config", config, "--port", "0")
    _refused(result, "unknown model 'claude-sonnet-9-9'", "`stoker models` lists them")


def test_serve_with_an_anthropic_model_and_no_key_names_the_variable(tmp_path: Path) -> None:
    config = _config(tmp_path, USERS + '[agent]\nmodel = "anthropic:claude-sonnet-4-6"\n')
    result = _stoker(tmp_path, "serve", "--config", config, "--port", "0")
    _refused(result, "the anthropic provider has no API key", "set ANTHROPIC_API_KEY")


def test_proxy_with_an_upstream_no_call_could_reach_is_refused_at_once(tmp_path: Path) -> None:
    """A malformed option, as click's own usage errors, exits 2."""
    result = _stoker(tmp_path, "proxy", "--upstream", "http://localhost:99999", "--listen", ":0")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: --upstream 'http://localhost:99999': Port out of range")


def test_serve_prints_its_banner_once_its_port_answers(tmp_path: Path) -> None:
    config = _config(tmp_path, USERS)
    command = [sys.executable, "-m", "stoker", "serve", "--config", config, "--port", "0"]
    command += ["--db", str(tmp_path / "gateway.db")]
    server = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path / "home"),
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()  # blocks until the banner, or the end
        found = re.fullmatch(r"gateway on (http://127\.0\.0\.1:\d+) \(dashboard at /ui\)\n", banner)
        assert found, banner
        health = httpx.get(found[1] + "/healthz", timeout=10)  # answers at once, no retry
        assert health.status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert "Traceback" not in err


# -- in this process ---------------------------------------------------------------------------


def test_a_stoker_error_at_startup_is_raised_and_not_logged_with_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What fails while the app starts (a chat platform that refuses its token) reaches
    the CLI's handler as the error it is."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        raise ConfigError("the bot token was refused: set TELEGRAM_BOT_TOKEN")
        yield

    said: list[str] = []
    sockets = listen("127.0.0.1", 0, owner="test", port_flag="--port", host_flag="--host")
    with caplog.at_level(logging.INFO), pytest.raises(ConfigError, match="token was refused"):
        serve(Starlette(lifespan=lifespan), sockets, started=lambda: said.append("up"))
    assert said == []
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in caplog.records)
    assert all(sock.fileno() == -1 for sock in sockets)  # closed


def test_listen_refuses_what_no_server_could_take(taken_port: int) -> None:
    flags = {"owner": "stoker serve", "port_flag": "--port", "host_flag": "--host"}
    with pytest.raises(PortInUse) as in_use:
        listen("127.0.0.1", taken_port, **flags)
    assert (in_use.value.host, in_use.value.port) == ("127.0.0.1", taken_port)
    with pytest.raises(ConfigError, match=r"^70000 is not a port number .* with --port$"):
        listen("127.0.0.1", 70000, **flags)
    with pytest.raises(ConfigError, match=r"not an address of this machine; give --host"):
        listen("192.0.2.1", 0, **flags)  # TEST-NET-1: never this machine's


SETTLED = """
import gc, signal
from starlette.applications import Starlette
from stoker.http_server import GC_YOUNG_THRESHOLD, listen, serve

def up():
    print(gc.get_freeze_count() > 1000, gc.get_threshold()[0], flush=True)
    signal.raise_signal(signal.SIGINT)  # stop as Ctrl-C does

print(gc.get_freeze_count(), gc.get_threshold()[0], flush=True)
serve(Starlette(), listen("127.0.0.1", 0, owner="t", port_flag="-p", host_flag="-H"), started=up)
"""


def test_a_serving_process_freezes_what_start_up_made_and_collects_young_objects_less_often() -> (
    None
):
    """Once its app has started, a server's process stops the collector walking start-up's
    objects again and again (`_settle_collector`); before that it is left as it was."""
    out = subprocess.run(
        [sys.executable, "-c", SETTLED], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split("\n")
    assert out[:2] == ["0 700", f"True {GC_YOUNG_THRESHOLD}"]
