"""Exclusive locks on run directories: one writer per ``--out``.

:func:`lock_directory` takes a non-blocking exclusive ``fcntl.flock`` on ``<dir>/.lock``
and writes the holder (pid, host, command, start time) into it, so that a second process
on the same directory fails at once with a message that says who holds it. The kernel
drops a ``flock`` when its process dies (``kill -9`` included), so a lock is never stale:
a left-over ``.lock`` file of a killed run does not block the next one. The file is
removed on release; the lock is re-taken if the file was replaced in between (the usual
inode check), so removal cannot let two holders in.

Where ``fcntl`` does not exist (Windows) the lock is a no-op.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["LOCK_NAME", "DirectoryLock", "DirectoryLocked", "lock_directory"]

#: Name of the lock file inside a locked directory.
LOCK_NAME = ".lock"


class DirectoryLocked(ValueError):
    """Another process holds the directory's lock (a ``ValueError``: exit code 2 in the CLI).

    Attributes
    ----------
    path : Path
        The locked directory.
    holder : dict
        What the holder wrote (``pid``, ``host``, ``command``, ``started``); may be empty.
    """

    def __init__(self, path: Path, holder: dict):
        self.path, self.holder = path, holder
        who = (
            f"process {holder.get('pid')} on {holder.get('host')} "
            f"({holder.get('command', '?')}, since {holder.get('started', '?')})"
            if holder
            else "another process"
        )
        super().__init__(
            f"{path} is in use by {who}; wait for it to finish (or stop it), or use another folder"
        )


def _holder(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 65536)
        out = json.loads(data.decode("utf-8")) if data else {}
        return out if isinstance(out, dict) else {}
    except (OSError, ValueError):
        return {}


class DirectoryLock:
    """A held lock on a directory (from :func:`lock_directory`); :meth:`release` frees it."""

    def __init__(self, path: Path, fd: int | None):
        self.path = path
        self._fd = fd

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Remove ``.lock`` and drop the lock (idempotent)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.unlink(self.path / LOCK_NAME)
        os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> DirectoryLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.release()


def lock_directory(path: str | os.PathLike, *, command: str | None = None) -> DirectoryLock:
    """Take the exclusive lock of directory ``path`` (created if missing).

    Parameters
    ----------
    path : str or PathLike
        The run directory.
    command : str, optional
        What the holder is doing, for the message another process gets (default: this
        process's command line).

    Returns
    -------
    DirectoryLock
        Use as a context manager, or call :meth:`DirectoryLock.release`; the kernel also
        releases it when the process exits.

    Raises
    ------
    DirectoryLocked
        If another process (or another lock in this one) holds it; the message names the
        holder's pid, host and command.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover - Windows
        return DirectoryLock(path, None)
    lock_file = path / LOCK_NAME
    while True:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DirectoryLocked(path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock_file))
        except FileNotFoundError:  # released (and removed) between open and flock
            same = False
        if same:
            break
        os.close(fd)
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command if command is not None else " ".join(sys.argv),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    os.ftruncate(fd, 0)
    os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
    return DirectoryLock(path, fd)
