"""File discipline shared by the memory and skills stores: an exclusive lock held across
read-modify-write, and atomic replacement.

Two processes (a chat and a gateway, or a session and its background review in a
worker thread) may write the same files; without the lock, both read the old file and
the second rename drops the first one's entry. The lock is `flock` on a separate lock
file: it excludes other processes *and* other threads of this process (each `open`
is its own file description), and the kernel releases it when a holder dies.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from stoker.memory.errors import MemoryStoreError

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
LOCK_TIMEOUT = 10.0
"""Seconds to wait for another writer; writers hold the lock for milliseconds."""

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def locked(directory: Path, *, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the directory's exclusive write lock (creating the directory if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise MemoryStoreError(
                    f"{directory} is locked by another writer for over {timeout:g} s; "
                    f"try again, or remove {directory / LOCK_FILE} if no Stoker process runs"
                )
            time.sleep(0.005)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) so readers see the old file or the new, never half.

    The temp file lives in the same directory (a rename across file systems is not
    atomic) and is fsynced before the rename. An existing file keeps its permissions;
    a new one is private (0600), since memory is about the user.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append one line to a log (callers hold the lock, so lines never interleave)."""
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_text(path: Path) -> str:
    """The file's text, "" when missing; tolerates a BOM and CRLF from a human's editor."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return ""


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not possible (nor needed) on Windows.
    if sys.platform == "win32":  # pragma: no cover
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        logger.debug("fsync of directory %s not supported", directory)
    finally:
        os.close(fd)
