"""Training speed of the energy-diffusion trainer on ScoreMD's Mueller-Brown recipe shape.

Per optimiser step (ms) of plain (DSM only) and FP (DSM + two-probe Fokker-Planck term,
weight 5e-4) training of ``MLPEnergy((1, 2), hidden=(92, 92, 92))`` at batch 128, for

* ``reference``: the FP estimator's loop (``fp_batched=False``: four network calls and two
  gradients per probe), unfused AdamW, the NaN check on every step (``check_every=1``);
* ``fused_adamw``: the reference with fused AdamW only (attribution);
* ``fast``: the defaults (one batched forward + one gradient for both probes and the
  time stencil, fused AdamW, host reads every 50 steps),

measured in the same run, the repeats interleaved (reference, fast, reference, ...) so
that a change of the machine's load hits all paths; the median of 3 repeats is reported.
Both paths compute the same loss (``tests/sampling/diffusion/test_fp_batched.py``,
``test_train.py::test_fast_defaults_equal_reference_path``).

With ``--compile``: the plain step through ``TrainConfig(compile=True)`` (a functional
``torch.func`` DSM loss-and-gradient, ``torch.compile``-d; FP steps stay eager), its ms per
step after compiling (``plain/compiled``, ratio vs ``plain/fast``) and the compile time
(``plain/compiled`` ``compile_s``: the first call's wall time minus its steps at the
compiled rate).

Also AdamW's step alone on the MLP's parameters (unfused vs fused, us), and the
Mueller-Brown data generator (``sci_moe.data.toy.muller_brown_samples``, 100
walkers, BAOAB): microseconds per integrator step with the generic
``PotentialForces(MuellerBrown())`` provider (reference) and with the generator's own
provider (bit-identical trajectories).

Run::

    OMP_NUM_THREADS=1 python benchmarks/energy_diffusion_speed.py --quick \\
        --json benchmarks/results/energy_diffusion_speed.json
"""

from __future__ import annotations

import time

import _common
import torch
from _common import OtherLoad, Row

from sci_moe.data.toy import muller_brown_samples
from sci_moe.sampling.diffusion import VPSDE, MLPEnergy, Stage, TrainConfig, train

BATCH = 128
HIDDEN = (92, 92, 92)
FP_WEIGHT = 5e-4
PATHS = {
    "reference": {"fp_batched": False, "fused_optimizer": False, "check_every": 1},
    "fused_adamw": {"fp_batched": False, "check_every": 1},
    "fast": {},
}


def _train_seconds(variant: str, path: str, steps: int, data: torch.Tensor, seed: int) -> float:
    torch.manual_seed(seed)
    net = MLPEnergy((1, 2), HIDDEN)
    fp = FP_WEIGHT if variant == "fp" else 0.0
    cfg = TrainConfig(
        stages=[Stage(1, (1e-5, 1.0), 0.5, fp)],
        batch_size=BATCH,
        ema_decay=0.005,
        max_batches_per_epoch=steps,
        progress=False,
        seed=seed,
        **PATHS[path],
    )
    t0 = time.perf_counter()
    train(net, data, VPSDE(), cfg)
    return time.perf_counter() - t0


def _compiled_rows(steps, data, seed, repeats, rows) -> list[Row]:
    """Rows of the compiled plain step (one process: the compiled graph is reused)."""
    torch.manual_seed(seed)
    net = MLPEnergy((1, 2), HIDDEN)

    def run(n):
        cfg = TrainConfig(
            stages=[Stage(1, (1e-5, 1.0), 0.5, 0.0)],
            batch_size=BATCH,
            ema_decay=0.005,
            max_batches_per_epoch=n,
            progress=False,
            seed=seed,
            compile=True,
        )
        t0 = time.perf_counter()
        train(net, data, VPSDE(), cfg)
        return time.perf_counter() - t0

    first = run(10)
    times = [run(steps) for _ in range(repeats)]
    ms = 1e3 * sorted(times)[len(times) // 2] / steps
    fast = next(r.value for r in rows if r.case == "plain/fast")
    return [
        Row("plain/compiled", "ms_per_step", round(ms, 3), "ms", "plain/fast", round(fast / ms, 3)),
        Row("plain/compiled", "compile_s", round(first - 10 * ms / 1e3, 1), "s"),
    ]


def _adamw_step_us(fused: bool, n: int = 1000) -> float:
    """Microseconds per AdamW step (lr set each step, as the trainer does) on the MLP."""
    net = MLPEnergy((1, 2), HIDDEN)
    for p in net.parameters():
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=1e-4, fused=fused or None)
    for _ in range(20):
        opt.step()
    t0 = time.perf_counter()
    for _ in range(n):
        for g in opt.param_groups:
            g["lr"] = 3e-4
        opt.step()
    return 1e6 * (time.perf_counter() - t0) / n


def _mb_reference(n_frames: int, walkers: int, stride: int, seed: int) -> None:
    """The generator's loop with the generic provider (as before this benchmark's change)."""
    from sci_moe.sampling.md import LangevinBAOAB, MuellerBrown, PotentialForces

    gen = torch.Generator().manual_seed(seed)
    prov = PotentialForces(MuellerBrown(), torch.tensor([0.5], dtype=torch.float64))
    integ = LangevinBAOAB(5e-3, friction_per_ps=1.0, kT=23.0)
    x0 = torch.tensor((-0.558, 1.442), dtype=torch.float64).expand(walkers, 1, 2).clone()
    state = integ.init_state(prov, x0, gen)
    for _ in range(n_frames):
        state = integ.step(state, prov, gen, n_steps=stride)
        state.positions[:, 0].numpy().copy()


def main() -> int:
    p = _common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compile", action="store_true", help="also time TrainConfig(compile=True)")
    args = p.parse_args()
    _common.setup(args)
    other, t0 = OtherLoad(), time.perf_counter()
    warn = _common.busy_warning()
    if warn:
        print(warn)
    steps = 200 if args.quick else 1000
    mb_frames = 10 if args.quick else 100
    walkers, stride = 100, 50
    g = torch.Generator().manual_seed(args.seed)
    data = (torch.randn(BATCH * steps, 1, 2, generator=g) * 0.4).float()
    rows: list[Row] = []
    repeats_ms: dict[str, list[float]] = {}
    for variant in ("plain", "fp"):
        times: dict[str, list[float]] = {k: [] for k in PATHS}
        for path in PATHS:  # warm-up
            _train_seconds(variant, path, max(5, steps // 10), data, args.seed)
        for _ in range(args.repeats):
            for path in PATHS:
                times[path].append(_train_seconds(variant, path, steps, data, args.seed))
        ms = {k: 1e3 * sorted(v)[len(v) // 2] / steps for k, v in times.items()}
        for k, v in times.items():
            repeats_ms[f"{variant}/{k}"] = [round(1e3 * x / steps, 3) for x in v]
        rows.append(Row(f"{variant}/reference", "ms_per_step", round(ms["reference"], 3), "ms"))
        for path in ("fused_adamw", "fast"):
            rows.append(
                Row(
                    f"{variant}/{path}",
                    "ms_per_step",
                    round(ms[path], 3),
                    "ms",
                    f"{variant}/reference",
                    round(ms["reference"] / ms[path], 3),
                )
            )
    if args.compile:
        rows.extend(_compiled_rows(steps, data, args.seed, args.repeats, rows))
    adam: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for fused in (False, True):
            adam[fused].append(_adamw_step_us(fused))
    au = {k: sorted(v)[len(v) // 2] for k, v in adam.items()}
    rows.append(Row("adamw_step/unfused", "us_per_step", round(au[False], 1), "us"))
    rows.append(
        Row(
            "adamw_step/fused",
            "us_per_step",
            round(au[True], 1),
            "us",
            "adamw_step/unfused",
            round(au[False] / au[True], 3),
        )
    )
    mb: dict[str, list[float]] = {"reference": [], "fast": []}
    n_steps = mb_frames * stride
    _mb_reference(1, walkers, stride, args.seed)
    for _ in range(args.repeats):
        s = time.perf_counter()
        _mb_reference(mb_frames, walkers, stride, args.seed)
        mb["reference"].append(time.perf_counter() - s)
        s = time.perf_counter()
        muller_brown_samples(
            mb_frames * walkers, walkers, stride=stride, burn_in=0, seed=args.seed, progress=False
        )
        mb["fast"].append(time.perf_counter() - s)
    us = {k: 1e6 * sorted(v)[len(v) // 2] / n_steps for k, v in mb.items()}
    rows.append(
        Row("muller_brown_samples/reference", "us_per_step", round(us["reference"], 1), "us")
    )
    rows.append(
        Row(
            "muller_brown_samples/fast",
            "us_per_step",
            round(us["fast"], 1),
            "us",
            "muller_brown_samples/reference",
            round(us["reference"] / us["fast"], 3),
        )
    )
    _common.print_table(
        ["case", "metric", "value", "unit", "ratio"],
        [[r.case, r.metric, r.value, r.unit, r.ratio] for r in rows],
        title="energy-diffusion training speed (ratio > 1: fast path faster)",
    )
    machine = _common.machine_info(
        seed=args.seed,
        recipe=(
            f"MLPEnergy (1,2) hidden {HIDDEN}, batch {BATCH}, VP SDE, t~U[1e-5,1], mid 0.5, "
            f"FP weight {FP_WEIGHT} (two probes); {steps} steps per timing, "
            f"median of {args.repeats}; Mueller-Brown: {walkers} walkers x {n_steps} steps"
        ),
        busy_warning=warn,
        repeats_ms_per_step=repeats_ms,
        quick=args.quick,
    )
    return _common.finish(args, "energy_diffusion_speed", machine, rows, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
