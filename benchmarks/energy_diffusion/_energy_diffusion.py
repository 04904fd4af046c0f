"""Pieces shared by the energy-diffusion benchmark scripts.

Scripts import this module as ``_energy_diffusion`` (Python puts the script's own folder
first on ``sys.path``); no script imports another (``pyproject.toml``, contract
``scripts-independent``).

* Mueller-Brown (``run.py``, its ``--paper-budget`` run in
  ``_energy_diffusion_paper.py``, ``speed.py``): the Langevin settings
  :data:`MB_KT`, :data:`MB_MASS`, :data:`MB_DT`, :data:`MB_STRIDE` and
  :func:`langevin_with_model` (MD with the learned forces on the package's
  ``Simulation``); the networks are :func:`sci_moe.sampling.diffusion.mueller_brown_model`.
* ScoreMD's recipe shape (``speed.py``, ``vs_scoremd.py``,
  ``anatomy.py``): :data:`BATCH`, :data:`HIDDEN`, :data:`FP_WEIGHT`,
  :data:`FULL_RUN_STEPS`, the trainer's :data:`PATHS` and :func:`inductor_cache_warm`.
* The same-host ScoreMD comparison (``vs_scoremd.py``,
  ``anatomy.py``): the contestants' child processes
  (:func:`contestant_cmd`, :func:`run_child`, :func:`summary`), :func:`train_recipe`,
  :func:`xla_flags` and :func:`check_scoremd_args`. The ``ours`` contestant is
  ``vs_scoremd.py --child-ours`` (:data:`VS_SCOREMD`).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from sci_moe.sampling.diffusion import (
    VPSDE,
    MLPEnergy,
    Stage,
    TrainConfig,
    train,
)
from sci_moe.sampling.md import LangevinBAOAB, ModelForces, Simulation, SimulationFailure

__all__ = [
    "BATCH",
    "CONTESTANTS",
    "DRIVER",
    "FP_WEIGHT",
    "FULL_RUN_STEPS",
    "HIDDEN",
    "MB_DT",
    "MB_KT",
    "MB_MASS",
    "MB_STRIDE",
    "PATHS",
    "RESULT_MARKS",
    "VS_SCOREMD",
    "check_scoremd_args",
    "contestant_cmd",
    "inductor_cache_warm",
    "langevin_with_model",
    "parse_child",
    "run_child",
    "summary",
    "train_recipe",
    "xla_flags",
]

# ------------------------------------------------------------------ Mueller-Brown

MB_KT, MB_MASS, MB_DT, MB_STRIDE = 23.0, 0.5, 5e-3, 50


def langevin_with_model(
    energy, starts, masses, kT, dt, friction, n_frames, stride, seed, compile=False
):
    """Langevin (BAOAB) with learned forces from ``starts`` (W, N, D); frames (F*W, N, D).

    A :class:`~sci_moe.sampling.md.Simulation` of :class:`~sci_moe.sampling.md.ModelForces`
    (``compile``: its ``compile=True``) with :class:`~sci_moe.sampling.md.LangevinBAOAB`,
    its generator seeded with ``seed``, checked every ``stride`` steps; a frame is taken
    every ``stride`` steps into one preallocated buffer. A walker's non-finite energy
    stops the run (:class:`~sci_moe.sampling.md.SimulationFailure`) after the frame in
    which it happened (the other walkers' rows of that frame are kept).
    """
    provider = ModelForces(
        energy, masses, dim=starts.shape[-1], check_inputs=False, compile=compile
    )
    sim = Simulation(
        provider,
        LangevinBAOAB(dt, friction_per_ps=friction, kT=kT),
        starts,
        seed=seed,
        check_interval=stride,
        energy_jump_kj_mol=None,
    )
    frames = torch.empty((n_frames, *starts.shape), dtype=starts.dtype)
    for n in range(n_frames):
        try:
            sim.run(stride)
        except SimulationFailure:  # the last frame, with the walker(s) gone non-finite
            frames[n].copy_(sim.state.positions.detach())
            return frames[: n + 1].flatten(0, 1)
        frames[n].copy_(sim.state.positions.detach())
    return frames.flatten(0, 1)


# ------------------------------------------------------------------ ScoreMD's recipe shape

BATCH = 128
HIDDEN = (92, 92, 92)
FP_WEIGHT = 5e-4
#: ScoreMD's Mueller-Brown run: 180 epochs x 781 steps
FULL_RUN_STEPS = 180 * 781
PATHS = {
    "reference": {"fp_batched": False, "fused": False},
    "fused_adamw": {"fp_batched": False},
    "fast": {},
    "compiled": {"compile": True},
}


def inductor_cache_warm() -> bool:
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        d = cache_dir()
    except Exception:  # private API; the default location otherwise
        d = os.path.join("/tmp", f"torchinductor_{os.environ.get('USER', 'root')}")
    return os.path.isdir(d) and bool(os.listdir(d))


# ------------------------------------------------------------------ same-host ScoreMD comparison

DRIVER = Path(__file__).resolve().parent / "scoremd_driver.py"
#: the script whose ``--child-ours`` runs the ``ours`` contestants
VS_SCOREMD = Path(__file__).resolve().parent / "vs_scoremd.py"
RESULT_MARKS = ("@@benchmark-result ", "@@scoremd-result ")
CONTESTANTS = ("ours", "ours_cpp_wrapper", "scoremd")


def train_recipe(
    variant: str, epochs: int, frames: int, seed: int, cpp_wrapper: bool = False
) -> list[dict]:
    """One compiled ``train`` call on the recipe's shape; its per-epoch history."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randn(frames, 1, 2, generator=g) * 0.4
    torch.manual_seed(seed)
    net = MLPEnergy((1, 2), HIDDEN, t_range=(0.0, 1.0))
    cfg = TrainConfig(
        stages=[Stage(epochs, (1e-5, 1.0), 0.5, FP_WEIGHT if variant == "fp" else 0.0)],
        batch_size=BATCH,
        ema_decay=0.005,  # ScoreMD's EMA 0.995 in our convention (issue 28)
        progress=False,
        seed=seed,
        compile=True,
        compile_cpp_wrapper=cpp_wrapper,
    )
    return train(net, data, VPSDE(), cfg)["history"]


def xla_flags(threads: int) -> str | None:
    """JAX's one-thread setting; ``None`` (XLA's default: all CPUs the process may use) else."""
    if threads == 1:
        return "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return None


def contestant_cmd(name: str, variant: str, threads: int, args) -> tuple[list[str], dict]:
    """Command line and environment of one contestant's child process."""
    if name not in CONTESTANTS:
        raise ValueError(f"unknown contestant {name!r}")
    env = dict(os.environ) | {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    common = ["--epochs", str(args.epochs), "--frames", str(args.frames), "--seed", str(args.seed)]
    if name == "scoremd":
        env.pop("XLA_FLAGS", None)
        if xla_flags(threads) is not None:
            env["XLA_FLAGS"] = xla_flags(threads)
        cmd = [str(args.scoremd_python), str(DRIVER), "--src", str(args.scoremd_src)]
        return [*cmd, "--variant", variant, *common], env
    cmd = [sys.executable, str(VS_SCOREMD), "--child-ours", variant, *common]
    cmd += ["--threads", str(threads)]
    if name == "ours_cpp_wrapper":
        cmd.append("--cpp-wrapper")
    return cmd, env


def parse_child(stdout: str) -> dict | None:
    """The JSON a child printed after one of :data:`RESULT_MARKS` (the last one)."""
    found = None
    for line in stdout.splitlines():
        for mark in RESULT_MARKS:
            if line.startswith(mark):
                found = json.loads(line[len(mark) :])
    return found


def run_child(cmd: list[str], env: dict, cpus: set[int] | None, timeout: float) -> dict:
    """Run one contestant; its result plus ``wall_s`` and ``cpu_s`` (user + system)."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=pin
    )
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = parse_child(proc.stdout)
    if proc.returncode or res is None:
        raise SystemExit(
            f"contestant {' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return res | {"wall_s": wall, "cpu_s": cpu}


def summary(res: dict) -> dict:
    """ms per step (median epoch after the first), compile seconds, CPU per wall second."""
    sec, steps = res["epoch_seconds"], res["steps_per_epoch"]
    if len(sec) < 2:
        raise ValueError("need >= 2 epochs: the first holds the compile")
    steady = statistics.median(sec[1:])
    return {
        "ms": 1e3 * steady / steps,
        "compile_s": max(0.0, sec[0] - steady),
        "cpu_per_wall": res["cpu_s"] / res["wall_s"] if res.get("wall_s") else None,
    }


def check_scoremd_args(args) -> None:
    """Both ``--scoremd-*``; a checkout with ``src/scoremd``; an executable."""
    src, py = args.scoremd_src, args.scoremd_python
    if src is None or py is None:
        raise SystemExit("give both --scoremd-src and --scoremd-python")
    if not (Path(src) / "src" / "scoremd").is_dir():
        raise SystemExit(f"--scoremd-src {src}: no src/scoremd there (a ScoreMD checkout)")
    if not (Path(py).is_file() and os.access(py, os.X_OK)):
        raise SystemExit(f"--scoremd-python {py}: not an executable file")
    if args.epochs < 2:
        raise SystemExit("--epochs must be >= 2 (the first holds the compile)")
    if args.frames < BATCH:
        raise SystemExit(f"--frames must be >= {BATCH} (one batch)")
