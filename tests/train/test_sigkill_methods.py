"""SIGKILL at any point, then ``--resume``: bitwise the same model, for three kinds of method.

FAME (function-on-function regression), the MoSES VRP solver (three training stages of
generated instances) and MvCGE (full-batch graph training) run through the real
``sci-moe train`` command in a subprocess with a checkpoint every step; a second run is
killed once it has written a few steps, resumed, and its model file must equal the
uninterrupted run's tensor for tensor.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

ARGS = {
    "fame": [
        *("--steps", "30", "--n-train", "6", "--n-val", "3", "--n-test", "3"),
        *("--batch-size", "3", "--hidden", "3", "--expert-hidden", "4"),
        *("--attention-dim", "3", "--decoder-hidden", "3", "--num-quadrature", "5"),
        *("--num-experts", "2", "--eval-every", "5"),
    ],
    "vrp": [
        *("--steps", "12", "--expert-steps", "6", "--gate-steps", "6", "--num-customers", "5"),
        *("--batch-size", "2", "--d-model", "8", "--num-heads", "2", "--num-layers", "1"),
        *("--rank", "2", "--val-instances", "2", "--test-instances", "1"),
    ],
    "mvcge": [
        *("--steps", "40", "--hidden-dim", "8", "--num-nodes", "60", "--mean-degree", "4"),
        *("--mmd-max-nodes", "16"),
    ],
}


def _cmd(method: str, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "sci_moe.cli.main",
        "train",
        method,
        "--out",
        str(out),
        *ARGS[method],
        "--checkpoint-every",
        "1",
        "--no-progress",
        *extra,
    ]


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _lines(out: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in out.rglob("metrics.jsonl"))


@pytest.mark.parametrize("method", list(ARGS))
def test_sigkill_then_resume_gives_the_same_model(method, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCI_MOE_PROGRESS": "off"}
    subprocess.run(_cmd(method, tmp_path / "a"), check=True, env=env, cwd=ROOT, timeout=600)
    out = tmp_path / "b"
    proc = subprocess.Popen(
        _cmd(method, out), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and _lines(out) < 3:
        time.sleep(0.005)
    killed = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert killed, "the run finished before it could be killed: make it longer"
    assert not (out / "model.pt").exists()
    subprocess.run(_cmd(method, out, "--resume"), check=True, env=env, cwd=ROOT, timeout=600)
    a = torch.load(tmp_path / "a" / "model.pt", weights_only=False)
    b = torch.load(out / "model.pt", weights_only=False)
    assert _equal(a, b)
