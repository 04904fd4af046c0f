"""``lock_directory``: one holder per run directory, who holds it, released on exit/kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sci_moe._util import LOCK_NAME, DirectoryLocked, lock_directory

_HOLD = textwrap.dedent(
    """
    import sys, time
    from sci_moe._util import lock_directory
    lock = lock_directory(sys.argv[1], command="holder-test")
    print("locked", flush=True)
    time.sleep(60)
    """
)


def test_second_lock_refused_then_free_after_release(tmp_path):
    run = tmp_path / "run"
    with lock_directory(run, command="first") as lock:
        assert lock.held and (run / LOCK_NAME).is_file()
        with pytest.raises(DirectoryLocked, match=rf"process {os.getpid()} .*first") as err:
            lock_directory(run)
        assert isinstance(err.value, ValueError) and err.value.holder["command"] == "first"
    assert not lock.held and not (run / LOCK_NAME).exists()  # released and removed
    with lock_directory(run):
        pass


def test_lock_of_a_killed_process_is_not_stale(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(DirectoryLocked, match=rf"process {proc.pid} on .*holder-test"):
            lock_directory(run)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert (run / LOCK_NAME).exists()  # left behind by kill -9 ...
    deadline = time.monotonic() + 5
    with lock_directory(run) as lock:  # ... but the kernel dropped the flock
        assert lock.held and time.monotonic() < deadline
