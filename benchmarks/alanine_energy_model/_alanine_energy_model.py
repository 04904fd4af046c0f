"""Evaluation of an alanine-dipeptide energy-model file, shared by its benchmark and trainer.

``benchmarks/alanine_energy_model/run.py`` (the benchmark) and
``scripts/train_alanine_energy_model.py`` (its learning-curve points) score a model file
the same way: phi/psi of i.i.d. reverse-SDE samples (:func:`iid_phi_psi`) and of
``sci-moe md run`` + ``md analyse`` (:func:`md_js`), each histogrammed on
:data:`BINS` x :data:`BINS` bins over [-pi, pi]^2 and compared with the shipped reference
(:func:`reference`) by the JS divergence in nats (:func:`js_to_reference`).

Both import this module as ``_alanine_energy_model``: the benchmark from its own folder
(Python puts it first on ``sys.path``), the trainer puts ``benchmarks/alanine_energy_model/``
there first.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sci_moe.sampling.diffusion import load_diffusion_model, reverse_sde_sample
from sci_moe.sampling.md import alanine_phi_psi, angle_histogram, js_divergence, reference_histogram
from sci_moe.sampling.md.analysis import load_run_positions

__all__ = [
    "BINS",
    "REFERENCE",
    "drop_burn_in",
    "iid_phi_psi",
    "js_to_reference",
    "md_js",
    "reference",
]

REFERENCE = "amber99sbildn_obc_300K"
BINS = 64


def reference() -> dict:
    """The shipped reference histogram (``p``, 64 x 64) and its metadata (floor, frames)."""
    return reference_histogram(REFERENCE, BINS)


def iid_phi_psi(path, n: int, seed: int, n_steps: int = 1000, batch: int = 2000) -> np.ndarray:
    """(phi, psi) radians of ``n`` reverse-SDE samples of the model file ``path``, (n, 2).

    Non-finite samples are dropped (as ScoreMD does).
    """
    model, sde, cfg = load_diffusion_model(path)
    gen = torch.Generator().manual_seed(seed)
    n_atoms = len(cfg["masses"])
    out = []
    for lo in range(0, n, batch):
        b = min(batch, n - lo)
        x = reverse_sde_sample(model.score, sde, (b, n_atoms, 3), n_steps=n_steps, generator=gen)
        x = x[torch.isfinite(x).flatten(1).all(1)]
        out.append(x.double().numpy() / cfg["scale"])
    return alanine_phi_psi(np.concatenate(out), cfg["atom_indices"])


def js_to_reference(angles: np.ndarray, p_ref: np.ndarray) -> float:
    """JS (nats) of the phi/psi histogram of ``angles`` against ``p_ref``."""
    p, _ = angle_histogram(angles, BINS)
    return js_divergence(p_ref, p)


def md_js(
    path,
    seed: int,
    walkers: int,
    time_ns: float,
    work: Path,
    existing=None,
    wait=False,
    burn_in_ps: float = 0.0,
) -> dict:
    """``sci-moe md run`` + ``md analyse`` with the model file ``path``: JS, frames, wall s.

    ``existing``: analyse this run folder (e.g. ``demo_out/md``) instead of running;
    ``burn_in_ps``: frames before this time of each walker are dropped (``md analyse
    --burn-in-ps``), also from the returned histogram.
    """
    exe = Path(sys.executable).with_name("sci-moe")
    out = work / f"md_{Path(path).stem}_s{seed}"
    wall_run = None
    if existing is not None:
        marker = Path(existing).with_name(Path(existing).name + ".done")
        while wait and not marker.exists():
            time.sleep(10)  # a run started in parallel: wait for its end marker
        out = work / f"reused_{Path(path).stem}_s{seed}"
        shutil.copytree(existing, out)
    else:
        t0 = time.perf_counter()
        run = [str(exe), "md", "run", "--model", str(path), "--out", str(out)]
        run += ["--walkers", str(walkers), "--time-ns", str(time_ns)]
        run += ["--report-interval", "200", "--checkpoint-interval", "10000"]
        run += ["--seed", str(seed), "--overwrite", "--no-progress"]
        subprocess.run(run, check=True, capture_output=True, text=True)
        wall_run = time.perf_counter() - t0
    js_path = out / "result.json"
    subprocess.run(
        [
            str(exe),
            "md",
            "analyse",
            str(out),
            "--json",
            str(js_path),
            "--burn-in-ps",
            f"{burn_in_ps}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    res = json.loads(js_path.read_text())
    x = load_run_positions(out)
    ang = alanine_phi_psi(x, load_diffusion_model(path)[2]["atom_indices"])
    ang = drop_burn_in(ang, max(1, len(list(out.glob("trajectory_w*")))), 0.2, burn_in_ps)
    return {
        "hist": angle_histogram(ang, BINS)[0],
        "phi_positive_fraction": float((ang[:, 0] > 0).mean()),
        "js": float(res["js_divergence"]),
        "frames": int(res["frames"]),
        "wall_s": wall_run,
    }


def drop_burn_in(ang: np.ndarray, walkers: int, frame_ps: float, burn_in_ps: float) -> np.ndarray:
    """Frames of ``ang`` (walker-major, (walkers * F, ...)) at or after ``burn_in_ps``.

    Frame k = 1, 2, ... of a walker is at ``k * frame_ps``; the rule of ``md analyse
    --burn-in-ps`` (:func:`sci_moe.sampling.md.analysis.analyse_run`).
    """
    if burn_in_ps < 0:
        raise ValueError(f"burn_in_ps must be >= 0, got {burn_in_ps}")
    per = len(ang) // walkers
    if per * walkers != len(ang):
        raise ValueError(f"{len(ang)} frames do not split into {walkers} walkers")
    skip = min(per, max(0, int(np.ceil(burn_in_ps / frame_ps - 1e-9)) - 1))
    if skip == per:
        raise ValueError(f"no frames left after a burn-in of {burn_in_ps} ps")
    return ang.reshape(walkers, per, *ang.shape[1:])[:, skip:].reshape(-1, *ang.shape[1:])
