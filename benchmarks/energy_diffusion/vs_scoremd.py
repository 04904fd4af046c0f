"""Our compiled energy-diffusion trainer against ScoreMD's own JAX loop, on the same host.

Issue 28's speed target: plain and FP training at least as fast per step as ScoreMD's JAX
code on ScoreMD's Mueller-Brown recipe shape (MLP 3 x 92, batch 128; FP weight 5e-4 with
two probes). ScoreMD's side runs ``benchmarks/energy_diffusion/scoremd_driver.py`` (its own modules,
imported from a checkout the user gives; nothing of it is copied here) under a separate
Python with its JAX stack; ours runs the package's ``train`` in this venv.

``--scoremd-src DIR --scoremd-python PY`` (both required): ``DIR`` is a checkout of
https://github.com/noegroup/ScoreMD, ``PY`` a Python with its JAX stack (outside this
repository's venv)::

    python3 -m venv /tmp/jaxenv
    /tmp/jaxenv/bin/pip install jax==0.5.2 jaxlib==0.5.1 flax==0.10.4 optax==0.2.4 \\
        chex==0.1.89 orbax-checkpoint==0.11.6 "numpy<2" tqdm matplotlib python-dotenv einops

Each round runs, each in a fresh process and in alternating order, our compiled trainer
(``ours``: a real ``train`` call, ``TrainConfig(compile=True)``, ``--epochs`` epochs on
``--frames`` rows; the trainer's defaults), the same with the inductor's C++ wrapper
(``ours_cpp_wrapper``, ``compile_cpp_wrapper=True``: an A/B, not the default) and
``benchmarks/energy_diffusion/scoremd_driver.py`` (``scoremd``: ScoreMD's
``OneAfterAnother.train``, its jitted epoch), plain and FP, at each of
``--scoremd-threads`` (both sides pinned to the
same CPUs; ours ``--threads n`` and ``OMP_NUM_THREADS``, JAX ``XLA_FLAGS``
``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` at one thread). ms
per step from the epochs after the first (the first holds the compile: ``compile_s`` is
its excess), the median over ``--repeats`` rounds; the ratio is the median of the
per-round ratios; ``full_run_s``: compile plus 140,580 steps (ScoreMD's 180 epochs x 781)
at that rate; ``cpu_per_wall``: the child's CPU seconds per wall second (threads used).

``benchmarks/energy_diffusion/anatomy.py`` breaks one step down (its matrix products against
XLA's, and the rest).

Run::

    python benchmarks/energy_diffusion/vs_scoremd.py --scoremd-src /tmp/scoremd \\
        --scoremd-python /tmp/jaxenv/bin/python --threads 1 \\
        --json benchmarks/energy_diffusion/results/energy_diffusion_speed_scoremd.json
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
import torch
from _common import OtherLoad, Row
from _energy_diffusion import (
    BATCH,
    CONTESTANTS,
    FP_WEIGHT,
    FULL_RUN_STEPS,
    HIDDEN,
    check_scoremd_args,
    contestant_cmd,
    inductor_cache_warm,
    run_child,
    summary,
    train_recipe,
    xla_flags,
)


def _ours_child(variant: str, epochs: int, frames: int, seed: int, cpp_wrapper: bool) -> dict:
    """One contestant run (in a fresh process): the compiled trainer on the recipe's shape."""
    hist = train_recipe(variant, epochs, frames, seed, cpp_wrapper)
    return {
        "variant": variant,
        "epoch_seconds": [r["seconds"] for r in hist],
        "steps_per_epoch": math.ceil(frames / BATCH),
        "mean_loss": [r["loss"] for r in hist],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpp_wrapper": cpp_wrapper,
    }


def _same_host_rows(rounds: dict[str, list[dict]]) -> list[Row]:
    """Rows of the same-host comparison from per-round summaries.

    ``rounds["t{n}/{name}/{variant}"]`` is one ``_energy_diffusion.summary`` per round
    (``name`` in ``CONTESTANTS``; ``ours_cpp_wrapper`` optional). Ratios > 1: the candidate faster
    (``ours`` vs ``scoremd``: ScoreMD's ms / ours; ``ours_cpp_wrapper`` vs ``ours``: ours'
    ms / its ms).
    """
    rows: list[Row] = []
    groups = {k.rsplit("/", 2)[0] + "/" + k.rsplit("/", 1)[1] for k in rounds}
    groups = sorted(groups, key=lambda g: (int(g.split("/")[0][1:]), g.endswith("/fp")))
    for group in groups:
        tn, variant = group.split("/")
        key = {n: f"{tn}/{n}/{variant}" for n in CONTESTANTS}
        if key["ours"] not in rounds or key["scoremd"] not in rounds:
            raise ValueError(f"{group}: needs both ours and scoremd")
        med = {
            n: {m: statistics.median([r[m] for r in rounds[k]]) for m in ("ms", "compile_s")}
            for n, k in key.items()
            if k in rounds
        }
        for n in med:
            med[n]["full_run_s"] = med[n]["compile_s"] + med[n]["ms"] * FULL_RUN_STEPS / 1e3

        def per_round(a: str, b: str, key: dict = key) -> float:
            pairs = zip(rounds[key[a]], rounds[key[b]], strict=True)
            return statistics.median([x["ms"] / y["ms"] for x, y in pairs])

        rows.append(Row(key["scoremd"], "ms_per_step", round(med["scoremd"]["ms"], 3), "ms"))
        rows.append(
            Row(
                key["ours"],
                "ms_per_step",
                round(med["ours"]["ms"], 3),
                "ms",
                key["scoremd"],
                round(per_round("scoremd", "ours"), 3),
            )
        )
        if "ours_cpp_wrapper" in med:
            rows.append(
                Row(
                    key["ours_cpp_wrapper"],
                    "ms_per_step",
                    round(med["ours_cpp_wrapper"]["ms"], 3),
                    "ms",
                    key["ours"],
                    round(per_round("ours", "ours_cpp_wrapper"), 3),
                )
            )
        for n in med:
            rows.append(Row(key[n], "compile_s", round(med[n]["compile_s"], 1), "s"))
        rows.append(Row(key["scoremd"], "full_run_s", round(med["scoremd"]["full_run_s"], 1), "s"))
        for n in ("ours", "ours_cpp_wrapper"):
            if n in med:
                rows.append(
                    Row(
                        key[n],
                        "full_run_s",
                        round(med[n]["full_run_s"], 1),
                        "s",
                        key["scoremd"],
                        round(med["scoremd"]["full_run_s"] / med[n]["full_run_s"], 3),
                    )
                )
        for k in key.values():
            cpw = [r["cpu_per_wall"] for r in rounds.get(k, []) if r["cpu_per_wall"] is not None]
            if cpw:
                rows.append(Row(k, "cpu_per_wall", round(statistics.median(cpw), 2), "-"))
    return rows


def _parse_threads(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--scoremd-threads must be a comma list of ints, got {text!r}") from None
    if not out or any(n < 1 for n in out):
        raise SystemExit(f"--scoremd-threads must list thread counts >= 1, got {text!r}")
    return out


def _same_host(args, warn: str | None, other: OtherLoad, t0: float) -> int:
    """ScoreMD's JAX loop vs our compiled trainer, alternating child processes."""
    threads = _parse_threads(args.scoremd_threads)
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    names = CONTESTANTS if args.wrapper_ab else ("ours", "scoremd")
    rounds: dict[str, list[dict]] = {}
    raw: dict[str, list[dict]] = {}
    info: dict[str, dict] = {}
    pinned = {}
    cache_warm = inductor_cache_warm()
    for n in threads:
        cpus = set(allowed[:n]) if args.pin and len(allowed) >= n else None
        pinned[f"t{n}"] = sorted(cpus) if cpus else None
        for r in range(args.repeats):
            for variant in ("plain", "fp"):
                order = names if r % 2 == 0 else tuple(reversed(names))
                for name in order:
                    cmd, env = contestant_cmd(name, variant, n, args)
                    res = run_child(cmd, env, cpus, timeout=args.child_timeout)
                    k = f"t{n}/{name}/{variant}"
                    summ = summary(res)
                    rounds.setdefault(k, []).append(summ)
                    raw.setdefault(k, []).append(
                        {
                            "epoch_seconds": [round(x, 4) for x in res["epoch_seconds"]],
                            "steps_per_epoch": res["steps_per_epoch"],
                            "wall_s": round(res["wall_s"], 2),
                            "cpu_s": round(res["cpu_s"], 2),
                        }
                    )
                    info.setdefault(name, {k2: v for k2, v in res.items() if k2 in _INFO_KEYS})
                    print(
                        f"t{n} round {r + 1} {name:>16}/{variant:<5} "
                        f"{summ['ms']:.3f} ms/step, compile {summ['compile_s']:.1f} s",
                        flush=True,
                    )
        if args.json is not None:  # a checkpoint: a later failure keeps what was measured
            partial_machine = {"partial": True, "threads_done": threads[: threads.index(n) + 1]}
            _common.write_json(
                args.json,
                "energy_diffusion_speed_scoremd",
                partial_machine | {"rounds": raw, "contestants": info},
                _same_host_rows(rounds),
            )
    rows = _same_host_rows(rounds)
    _common.print_rows(
        rows, title="same host: ScoreMD's JAX loop vs our compiled trainer (ratio > 1: ours faster)"
    )
    machine = _common.machine_info(
        seed=args.seed,
        recipe=(
            f"Mueller-Brown recipe shape: MLP (1,2) hidden {HIDDEN} swish energy, batch "
            f"{BATCH}, VP SDE, t~U[1e-5,1], mid 0.5, FP weight {FP_WEIGHT} (two probes), "
            f"cosine AdamW 3e-4 -> 1e-5, clip 1e3, EMA 0.995 (ScoreMD's convention); "
            f"{args.frames} rows, {args.epochs} epochs per child, epochs 2+ timed; "
            f"{args.repeats} rounds, contestants alternating; full run = {FULL_RUN_STEPS} steps"
        ),
        busy_warning=warn,
        thread_counts=threads,
        pinned_cpus=pinned,
        xla_flags={f"t{n}": xla_flags(n) for n in threads},
        contestants=info,
        rounds=raw,
        inductor_cache_warm=cache_warm,
        scoremd_src=str(args.scoremd_src),
        scoremd_driver="benchmarks/energy_diffusion/scoremd_driver.py",
        quick=args.quick,
    )
    return _common.finish(args, "energy_diffusion_speed_scoremd", machine, rows, other, t0)


_INFO_KEYS = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "devices",
    "xla_flags",
    "scoremd_commit",
    "stubbed",
    "torch",
    "torch_threads",
    "cpp_wrapper",
)


def main(argv: list[str] | None = None) -> int:
    p = _common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="rounds")
    p.add_argument(
        "--scoremd-src",
        type=Path,
        default=None,
        metavar="DIR",
        help="ScoreMD checkout (holds src/scoremd)",
    )
    p.add_argument(
        "--scoremd-python",
        type=Path,
        default=None,
        metavar="PY",
        help="a Python with ScoreMD's JAX stack",
    )
    p.add_argument("--scoremd-threads", default="1", help="thread counts for both sides (e.g. 1,2)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per contestant (default 3)")
    p.add_argument("--frames", type=int, default=None, help="training rows (default 100000)")
    p.add_argument(
        "--no-wrapper-ab",
        dest="wrapper_ab",
        action="store_false",
        help="leave out the ours_cpp_wrapper contestant",
    )
    p.add_argument(
        "--no-pin", dest="pin", action="store_false", help="do not pin the children's CPUs"
    )
    p.add_argument("--child-timeout", type=float, default=900.0, help="seconds per child")
    p.add_argument("--child-ours", choices=("plain", "fp"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--cpp-wrapper", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.epochs is None:
        args.epochs = 2 if args.quick else 3
    if args.frames is None:
        args.frames = 200 * BATCH if args.quick else 100_000
    if args.child_ours is None:
        check_scoremd_args(args)
    _common.setup(args)
    if args.child_ours is not None:
        _common.child_result(
            _ours_child(args.child_ours, args.epochs, args.frames, args.seed, args.cpp_wrapper)
        )
        return 0
    other, t0 = OtherLoad(), time.perf_counter()
    warn = _common.warn_if_busy()
    return _same_host(args, warn, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
