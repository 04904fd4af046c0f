"""Measurements in a fresh process: :func:`run_isolated` runs a child, which hands its
result back with :func:`child_result`.

The allocator's state depends on what ran before in the same process, so one contestant's
timing can depend on another's; a fresh process per measurement removes that.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["child_result", "run_isolated"]


_RESULT_MARK = "@@benchmark-result "


def run_isolated(
    argv: Sequence[str], timeout: float | None = None, env: dict[str, str] | None = None
) -> dict:
    """Run ``python <argv>`` in a fresh process and return what it passed to :func:`child_result`.

    ``env`` is the child's whole environment (default: this process's), e.g.
    ``dict(os.environ) | {"THP_MEM_ALLOC_ENABLE": "1"}`` for settings read when torch
    starts. The child's other output is echoed. Raises ``SystemExit`` with the child's
    stderr when it fails or reports nothing.
    """
    cmd = [sys.executable, *map(str, argv)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(_RESULT_MARK):
            result = json.loads(line[len(_RESULT_MARK) :])
        elif line.strip():
            print(line)
    sys.stdout.flush()
    if proc.returncode or result is None:
        raise SystemExit(
            f"benchmark child {' '.join(cmd[1:])} failed (exit {proc.returncode}):\n"
            + proc.stderr[-4000:]
        )
    return result


def child_result(obj: dict) -> None:
    """Hand ``obj`` (JSON-serialisable) back to the :func:`run_isolated` caller."""
    print(_RESULT_MARK + json.dumps(obj), flush=True)
