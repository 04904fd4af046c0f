"""Where one compiled energy-diffusion training step's time goes, against ScoreMD's JAX/XLA.

For plain and FP steps on ScoreMD's Mueller-Brown recipe shape (MLP 3 x 92, batch 128; FP
weight 5e-4, two probes), in one run:

* the matrix products of one compiled training step of ours, recorded with
  ``torch.profiler`` (a second ``train`` call in the process reuses the compiled graph,
  so the profile holds steps, not compilation; products per step = events / steps), and
  their in-step self time (profiled, so somewhat inflated);
* the same list of products run alone as one program by torch (eager, and
  ``torch.compile``-d) and by XLA (``benchmarks/energy_diffusion/xla_gemm_driver.py``, one
  ``jax.jit`` program, under ``--scoremd-python``), per call;
* our step (an unprofiled ``train`` call, median epoch) and ScoreMD's (one run of
  ``benchmarks/energy_diffusion/scoremd_driver.py``);

on whole batches (``--frames`` rounded down to a multiple of 128, as ScoreMD drops the
short last batch). Each of ``--rounds`` rounds measures all of it (plain and FP
alternating); the rows are medians, the ratios medians of the per-round ratios.

``rest`` is our step minus its products' in-step (profiled) self time: the elementwise
kernels, random draws, batching and the per-call overhead. The products alone run on
distinct inputs per product, a larger working set than in a step (where they share
activations and weights), so their time alone can exceed their in-step time: they compare
the two GEMM libraries, not a step. ScoreMD has no in-step figure;
``step_over_xla_products`` is its step over XLA's time for *our* products (its autodiff
need not produce the same ones). This process and the JAX children are pinned to one CPU
(``--no-pin``: not).

The ScoreMD checkout and its JAX venv are those of
``benchmarks/energy_diffusion/vs_scoremd.py`` (see there). Run::

    python benchmarks/energy_diffusion/anatomy.py --scoremd-src /tmp/scoremd \\
        --scoremd-python /tmp/jaxenv/bin/python --threads 1 --repeats 5 --rounds 3 \\
        --json benchmarks/energy_diffusion/results/energy_diffusion_speed_anatomy.json
"""

from __future__ import annotations

import json
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
    FP_WEIGHT,
    HIDDEN,
    check_scoremd_args,
    contestant_cmd,
    inductor_cache_warm,
    run_child,
    summary,
    train_recipe,
    xla_flags,
)

GEMM_DRIVER = Path(__file__).resolve().parent / "xla_gemm_driver.py"
#: the products a compiled step calls (``torch.profiler`` event names)
GEMM_EVENTS = {"aten::mm": "mm", "aten::addmm": "addmm"}


def _gemm_list(events) -> tuple[list[dict], float]:
    """Products and their summed self time (us) from ``torch.profiler`` events.

    ``events`` are ``key_averages(group_by_input_shape=True)`` entries (``key``, ``count``,
    ``input_shapes``, ``self_cpu_time_total``); ``mm`` inputs are ``[[M, K], [K, N]]``,
    ``addmm`` inputs ``[bias, [M, K], [K, N], ...]``. Returns one
    ``{"op", "m", "k", "n", "count"}`` per shape (``count`` events, not yet per step).
    """
    out, self_us = [], 0.0
    for e in events:
        op = GEMM_EVENTS.get(e.key)
        if op is None or e.count == 0:
            continue
        shapes = [s for s in e.input_shapes if s]
        a, b = (shapes[0], shapes[1]) if op == "mm" else (shapes[1], shapes[2])
        if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
            raise ValueError(f"{e.key}: unexpected input shapes {e.input_shapes}")
        out.append({"op": op, "m": a[0], "k": a[1], "n": b[1], "count": int(e.count)})
        self_us += float(e.self_cpu_time_total)
    return sorted(out, key=lambda g: (g["op"], g["m"], g["k"], g["n"])), self_us


def _per_step(gemms: list[dict], n_steps: int) -> list[dict]:
    """Event counts divided by the profiled steps; refuses counts that do not divide."""
    out = []
    for g in gemms:
        if g["count"] % n_steps:
            raise ValueError(
                f"{g['op']} {g['m']}x{g['k']}x{g['n']}: {g['count']} events over {n_steps} "
                "steps is not a whole number per step (did the profile catch a compilation?)"
            )
        out.append(g | {"count": g["count"] // n_steps})
    return out


def _profile_step(variant: str, frames: int, seed: int, warm_up: bool = True) -> dict:
    """Products per compiled step and their in-step self time (a profiled ``train`` call).

    ``warm_up``: first a ``train`` call that compiles (the profiled call then reuses the
    graph); not needed once this process has trained ``variant``.
    """
    from torch.profiler import ProfilerActivity, profile

    if warm_up:
        train_recipe(variant, 2, frames, seed)
    epochs = 2
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        hist = train_recipe(variant, epochs, frames, seed)
    n_steps = epochs * math.ceil(frames / BATCH)
    gemms, self_us = _gemm_list(prof.key_averages(group_by_input_shape=True))
    return {
        "gemms": _per_step(gemms, n_steps),
        "in_step_self_us": self_us / n_steps,
        "profiled_ms": 1e3 * sum(r["seconds"] for r in hist) / n_steps,
    }


def _torch_program(gemms: list[dict], seed: int):
    """Distinct float32 inputs for every product of ``gemms`` and the program running them."""
    g = torch.Generator().manual_seed(seed)
    xs = []
    for p in gemms:
        for _ in range(p["count"]):
            a = torch.randn(p["m"], p["k"], generator=g)
            b = torch.randn(p["k"], p["n"], generator=g)
            c = torch.randn(p["n"], generator=g) if p["op"] == "addmm" else None
            xs.append((a, b, c))

    def program(xs):
        return [a @ b if c is None else torch.addmm(c, a, b) for a, b, c in xs]

    return program, xs


def _time_us(fn, arg, repeats: int, calls: int) -> list[float]:
    """Microseconds per ``fn(arg)``, one figure per repeat of ``calls`` calls, sorted."""

    def block():
        for _ in range(calls):
            fn(arg)

    return sorted(1e6 * s / calls for s in _common.time_fn(block, repeats).times)


def _one_round(variant: str, args, cpus: set[int] | None, calls: int, warm_up: bool = True) -> dict:
    """One measurement of ``variant``'s step, its products and XLA's time for them
    (``warm_up``: compile first, see :func:`_profile_step`)."""
    prof = _profile_step(variant, args.frames, args.seed, warm_up)
    gemms = prof["gemms"]
    hist = train_recipe(variant, args.epochs, args.frames, args.seed)
    ours_ms = 1e3 * statistics.median([r["seconds"] for r in hist]) / math.ceil(args.frames / BATCH)
    cmd, env = contestant_cmd("scoremd", variant, 1, args)
    sm = summary(run_child(cmd, env, cpus, timeout=args.child_timeout))
    program, xs = _torch_program(gemms, args.seed)
    eager = _time_us(program, xs, args.repeats, calls)
    compiled = _time_us(torch.compile(program, dynamic=False), xs, args.repeats, calls)
    env = dict(os.environ) | {"OMP_NUM_THREADS": "1", "XLA_FLAGS": xla_flags(1)}
    cmd = [str(args.scoremd_python), str(GEMM_DRIVER), "--gemms", json.dumps(gemms)]
    cmd += ["--repeats", str(args.repeats), "--calls", str(calls)]
    xla = run_child(cmd, env, cpus, timeout=args.child_timeout)
    return {
        "scoremd_ms": sm["ms"],
        "ours_ms": ours_ms,
        "in_step_us": prof["in_step_self_us"],
        "xla_us": xla["median_us"],
        "eager_us": eager[len(eager) // 2],
        "compiled_us": compiled[len(compiled) // 2],
        "n_products": sum(g["count"] for g in gemms),
        "gemms_per_step": gemms,
        "profiled_ms_per_step": round(prof["profiled_ms"], 3),
        "ours_epoch_seconds": [round(r["seconds"], 4) for r in hist],
        "scoremd_compile_s": round(sm["compile_s"], 1),
        "jax": xla.get("jax"),
    }


def _anatomy_rows(rounds: dict[str, list[dict]]) -> list[Row]:
    """Rows from :func:`_one_round` figures per variant: medians over the rounds; each
    ratio the median of the per-round ratios (> 1: ours / torch faster)."""
    rows: list[Row] = []
    for variant, rs in rounds.items():
        c = f"anatomy/{variant}"

        def med(key, rs=rs):
            return statistics.median([r[key] for r in rs])

        def ratio(num, den, rs=rs):
            return round(statistics.median([r[num] / r[den] for r in rs]), 3)

        rest = statistics.median([1e3 * r["ours_ms"] - r["in_step_us"] for r in rs])
        rows += [
            Row(f"{c}/scoremd", "ms_per_step", round(med("scoremd_ms"), 3), "ms"),
            Row(
                f"{c}/ours",
                "ms_per_step",
                round(med("ours_ms"), 3),
                "ms",
                f"{c}/scoremd",
                ratio("scoremd_ms", "ours_ms"),
            ),
            Row(f"{c}/ours", "products_per_step", float(med("n_products")), "-"),
            Row(f"{c}/ours", "products_in_step_us", round(med("in_step_us"), 1), "us"),
            Row(f"{c}/xla", "products_alone_us", round(med("xla_us"), 1), "us"),
            Row(
                f"{c}/torch_compiled",
                "products_alone_us",
                round(med("compiled_us"), 1),
                "us",
                f"{c}/xla",
                ratio("xla_us", "compiled_us"),
            ),
            Row(
                f"{c}/torch_eager",
                "products_alone_us",
                round(med("eager_us"), 1),
                "us",
                f"{c}/xla",
                ratio("xla_us", "eager_us"),
            ),
            Row(f"{c}/ours", "rest_us", round(rest, 1), "us"),
            Row(
                f"{c}/scoremd",
                "step_over_xla_products",
                round(statistics.median([1e3 * r["scoremd_ms"] / r["xla_us"] for r in rs]), 3),
                "x",
            ),
        ]
    return rows


def anatomy(args, warn: str | None, other: OtherLoad, t0: float) -> int:
    """Step time, its products and the rest: ours against ScoreMD's and XLA's, same run."""
    cpus = None
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if args.pin and allowed:
        cpus = {allowed[0]}
        os.sched_setaffinity(0, cpus)  # this process (ours) and the JAX children: one CPU
    calls = 100 if args.quick else 500
    # whole batches only: a short last batch is a step of other shapes (ScoreMD drops it)
    args.frames = BATCH * (args.frames // BATCH)
    rounds: dict[str, list[dict]] = {"plain": [], "fp": []}
    for r in range(args.rounds):
        for variant in ("plain", "fp") if r % 2 == 0 else ("fp", "plain"):
            fig = _one_round(variant, args, cpus, calls, warm_up=r == 0)
            rounds[variant].append(fig)
            print(
                f"round {r + 1} {variant}: ours {fig['ours_ms']:.3f} ms, ScoreMD "
                f"{fig['scoremd_ms']:.3f} ms; {fig['n_products']} products: torch "
                f"{fig['eager_us']:.0f} us eager, XLA {fig['xla_us']:.0f} us",
                flush=True,
            )
    rows = _anatomy_rows(rounds)
    _common.print_rows(
        rows,
        title="one step: products and the rest, ours vs ScoreMD / XLA (ratio > 1: ours faster)",
    )
    machine = _common.machine_info(
        seed=args.seed,
        recipe=(
            f"Mueller-Brown recipe shape: MLP (1,2) hidden {HIDDEN}, batch {BATCH}, FP weight "
            f"{FP_WEIGHT} (two probes); {args.frames} rows; ours: compiled train, "
            f"{args.epochs} epochs, median epoch; products alone: {args.repeats} x {calls} "
            f"calls, median; {args.rounds} rounds, medians"
        ),
        busy_warning=warn,
        pinned_cpus=sorted(cpus) if cpus else None,
        xla_flags=xla_flags(1),
        anatomy=rounds,
        inductor_cache_warm=inductor_cache_warm(),
        scoremd_src=str(args.scoremd_src),
        quick=args.quick,
    )
    return _common.finish(args, "energy_diffusion_speed_anatomy", machine, rows, other, t0)


def main(argv: list[str] | None = None) -> int:
    p = _common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="timing repeats per round")
    p.add_argument("--rounds", type=int, default=3, help="whole measurements (medians)")
    p.add_argument("--scoremd-src", type=Path, default=None, metavar="DIR", help="ScoreMD checkout")
    p.add_argument(
        "--scoremd-python", type=Path, default=None, metavar="PY", help="Python with JAX"
    )
    p.add_argument("--epochs", type=int, default=None, help="epochs of our timed call (3)")
    p.add_argument("--frames", type=int, default=None, help="training rows (default 100000)")
    p.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin to one CPU")
    p.add_argument("--child-timeout", type=float, default=900.0, help="seconds per child")
    args = p.parse_args(argv)
    if args.epochs is None:
        args.epochs = 2 if args.quick else 3
    if args.frames is None:
        args.frames = 200 * BATCH if args.quick else 100_000
    check_scoremd_args(args)
    if args.rounds < 1:
        raise SystemExit("--rounds must be >= 1")
    _common.setup(args)
    other, t0 = OtherLoad(), time.perf_counter()
    warn = _common.warn_if_busy()
    return anatomy(args, warn, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
