"""``parallel_map`` workers die with their parent (``kill -9`` of the main process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

_MAIN = textwrap.dedent(
    """
    import sys
    from sci_moe._util import parallel_map
    from tests._util._sleeper import record_pid_and_sleep

    if __name__ == "__main__":
        parallel_map(record_pid_and_sleep, [(sys.argv[1], 120.0)] * 2, n_jobs=2)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_workers_die_with_a_killed_parent(tmp_path):
    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "main.py"
    script.write_text(_MAIN)
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env, cwd=root)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.pid"))) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "workers did not start"
            time.sleep(0.1)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    workers = [int(p.stem) for p in tmp_path.glob("*.pid")]
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if _alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived their killed parent"
