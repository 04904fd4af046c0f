"""Data parallelism: a 2-process gloo run under torchrun equals the 1-process run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from sci_moe.train import ShuffledBatches

from ._toy import make, weights

ROOT = Path(__file__).resolve().parents[2]


def test_shards_partition_every_global_batch():
    src = ShuffledBatches(50, 8, lambda idx: idx, seed=3)
    for step in range(20):
        full = src.indices(step)
        parts = [src.indices(step, r, 3) for r in range(3)]
        assert sorted(i for p in parts for i in p) == sorted(full)


def test_two_gloo_processes_equal_one(tmp_path):
    steps = 14  # crosses an epoch boundary: 50 examples in batches of 8 (last one short)
    one = make(steps, None, dropout=0.0, restore_best=False)
    one.fit()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "tests.train._toy",
        str(tmp_path),
        str(steps),
        "--ddp",
    ]
    subprocess.run(cmd, check=True, env=env, cwd=ROOT, timeout=300)
    two = torch.load(tmp_path / "final.pt")
    ref = weights(one)
    assert ref.keys() == two.keys()
    for k in ref:
        torch.testing.assert_close(two[k], ref[k], rtol=1e-5, atol=1e-6)
    # only rank 0 wrote: one metrics file, no rank-suffixed files
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.pt",
        "checkpoint_prev.pt",
        "final.pt",
        "metrics.jsonl",
    ]
