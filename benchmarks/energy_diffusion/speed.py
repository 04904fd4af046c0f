"""Training speed of the energy-diffusion trainer on ScoreMD's Mueller-Brown recipe shape.

Per optimiser step (ms) of plain (DSM only) and FP (DSM + two-probe Fokker-Planck term,
weight 5e-4) training of ``MLPEnergy((1, 2), hidden=(92, 92, 92))`` at batch 128, for

* ``reference``: the FP estimator's loop (``fp_batched=False``: four network calls and two
  gradients per probe), unfused AdamW;
* ``fused_adamw``: the reference with fused AdamW only (attribution);
* ``fast``: the defaults (one batched forward + one gradient for both probes and the
  time stencil, fused AdamW),

measured in the same run, the repeats interleaved (reference, fast, reference, ...) so
that a change of the machine's load hits all paths; the median of 3 repeats is reported.
Both paths compute the same loss (``tests/sampling/diffusion/test_fp_batched.py``,
``test_train.py::test_fast_defaults_equal_reference_path``).

* ``compiled``: ``TrainConfig(compile=True)``: the functional ``torch.func`` loss and
  gradient (plain: :func:`~sci_moe.sampling.diffusion.compiled.make_dsm_step`; FP:
  :func:`~sci_moe.sampling.diffusion.compiled.make_dsm_fp_step`, the vectorised two-probe
  estimator), ``torch.compile``-d, with fused AdamW; its compile time is the warm-up
  call's wall time minus its steps at the compiled rate (``compile_s``; the inductor's
  on-disk cache, ``inductor_cache_warm`` in the JSON, cuts it to seconds in later
  processes, and a second model in the same process reuses the graph).

ScoreMD's JAX loop on the same recipe, timed on another machine (issue 28), is quoted
beside: ``scoremd/*`` rows with ``"quoted": {"source", "machine"}`` and no ``vs`` /
``ratio`` (only a baseline measured in the same run gets a ratio, issue 41).

Evaluation: the reverse-SDE sampler at the paper's 100k samples (``--quick``: 20k), one
network call per step (``chunk_size=None``, as before) vs row chunks of 4096 with
preallocated buffers (the default), ms and minor page faults per sampler step; Langevin
(BAOAB, 100 walkers) with ``ModelForces`` by autograd vs ``compile=True``, us per step.

Also AdamW's step alone on the MLP's parameters (unfused vs fused, us), and the
Mueller-Brown data generator (``sci_moe.data.toy.muller_brown_samples``, 100
walkers, BAOAB): microseconds per integrator step with the generic
``PotentialForces(MuellerBrown())`` provider (reference) and with the generator's own
provider (bit-identical trajectories).

The ``--update-ab`` mode (the AdamW update and EMA inside the compiled step against
``AdamW.step``, ``benchmarks/energy_diffusion/results/energy_diffusion_speed_update.json``)
is gone since the trainer runs on the training engine (issue 39): the engine's optimiser
owns the update
and the compiled step returns its gradients (the ``compiled_grads`` path of that A/B).

The ``scoremd/*`` rows are quoted from issue 28 (measured on another host, not in this
run); ``benchmarks/energy_diffusion/vs_scoremd.py`` runs ScoreMD's own JAX loop beside
ours on the same host, which is where a ratio to ScoreMD comes from.
``--quoted-only PATH`` rewrites a stored JSON of this script in that form
(:func:`quoted_rows`: no timing is rerun).

``--device cuda`` times the training steps (``plain/*``, ``fp/*``: the trainer's
``TrainConfig.device``, the data moved by the engine, CUDA synchronised before each timing
ends) and AdamW's step alone (``adamw_step/*``: the MLP and its gradients moved there) on a
GPU; the sampler, Langevin and the Mueller-Brown generator stay on the CPU. The device and
this scope are recorded in the JSON's ``machine`` block (the stored results are the CPU's).

Run::

    OMP_NUM_THREADS=1 python benchmarks/energy_diffusion/speed.py --quick \\
        --json benchmarks/energy_diffusion/results/energy_diffusion_speed.json
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
import torch
from _common import OtherLoad, QuotedRow, Row
from _energy_diffusion import (
    BATCH,
    FP_WEIGHT,
    HIDDEN,
    MB_DT,
    MB_KT,
    MB_MASS,
    MB_STRIDE,
    PATHS,
    inductor_cache_warm,
    langevin_with_model,
)

from sci_moe.data.toy import muller_brown_samples
from sci_moe.sampling.diffusion import (
    VPSDE,
    EnergyAtTime,
    MLPEnergy,
    Stage,
    TrainConfig,
    reverse_sde_sample,
    train,
)
from sci_moe.train import run_device

#: ScoreMD's JAX training loop, ms per step, quoted from issue 28 (another host)
SCOREMD_MS = {"plain": 0.85, "fp": 3.85}
SCOREMD_SOURCE = (
    "quoted, not measured in this run: issue 28, ScoreMD's own JAX code, Mueller-Brown "
    "recipe (MLP 3x92, batch 128), on the filer's 2-core AMD EPYC host; full runs "
    "124.5 s / 541 s wall (same host: benchmarks/energy_diffusion/vs_scoremd.py)"
)
#: The ``quoted`` record of the ``scoremd/*`` rows.
SCOREMD_QUOTE = _common.quote(
    source="issue 28: ScoreMD's own JAX training loop, Mueller-Brown recipe (MLP 3x92, "
    "batch 128), ms per optimiser step",
    machine="the issue-28 filer's 2-core AMD EPYC host, not the machine of this run",
)


def _sync(device: str) -> None:
    """Wait for ``device``'s queued kernels (a no-op on the CPU)."""
    if device != "cpu":
        torch.cuda.synchronize(run_device(device))


def _train_seconds(
    variant: str, path: str, steps: int, data: torch.Tensor, seed: int, device: str = "cpu"
) -> float:
    """Wall seconds of ``steps`` training steps of ``path`` on ``device`` (the model built
    on the CPU, then moved by the engine)."""
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
        device=device,
        **PATHS[path],
    )
    _sync(device)
    t0 = time.perf_counter()
    train(net, data, VPSDE(), cfg)
    _sync(device)
    return time.perf_counter() - t0


def _scoremd_row(variant: str) -> QuotedRow:
    """ScoreMD's JAX step time (issue 28), a quoted row: no ratio to it."""
    return QuotedRow(
        f"scoremd/{variant}", "ms_per_step", SCOREMD_MS[variant], "ms", quoted=SCOREMD_QUOTE
    )


def quoted_rows(doc: dict) -> list[Row | QuotedRow]:
    """The rows of a stored JSON of this script with ScoreMD's step times as quoted rows.

    The ``--quoted-only`` rule (issue 41): each ``scoremd/*`` row is rebuilt by
    :func:`_scoremd_row` (its stored value must be :data:`SCOREMD_MS`'s); the rows that
    compared our compiled step with it (``ms_per_step_vs_scoremd``, a ratio to a figure of
    another machine) are dropped, their value being the ``ms_per_step`` row of the same
    case, which must be stored; every other row is kept. ``machine["scoremd_source"]``
    becomes :data:`SCOREMD_SOURCE`, ``scoremd_quoted`` goes (the rows say it).

    Raises
    ------
    ValueError
        When a stored ScoreMD figure differs from :data:`SCOREMD_MS`, a dropped row's value
        is not stored as ``ms_per_step``, or another row has a ratio to a quoted one.
    """
    val = {(r["case"], r["metric"]): r["value"] for r in doc["rows"]}
    out = []
    for r in doc["rows"]:
        case, metric = r["case"], r["metric"]
        if case.startswith("scoremd/"):
            q = _scoremd_row(case.split("/", 1)[1])
            if (q.case, q.metric, q.value) != (case, metric, r["value"]):
                raise ValueError(f"stored ScoreMD figure {case} {metric} {r['value']} unknown")
            out.append(q)
        elif metric == "ms_per_step_vs_scoremd":
            if val.get((case, "ms_per_step")) != r["value"]:
                raise ValueError(f"{case}: {metric} {r['value']} is not its ms_per_step row")
        elif str(r.get("vs") or "").startswith("scoremd/"):
            raise ValueError(f"{case} {metric} has a ratio to a quoted figure ({r['vs']})")
        else:
            out.append(Row(**r))
    machine = doc.get("machine", {})
    machine.pop("scoremd_quoted", None)
    if "scoremd_source" in machine:
        machine["scoremd_source"] = SCOREMD_SOURCE
    return out


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _iid_rows(n_rows: int, n_steps: int, repeats: int, seed: int) -> list[Row]:
    """Reverse-SDE sampler: one network call per step vs row chunks (interleaved)."""
    torch.manual_seed(seed)
    net = MLPEnergy((1, 2), HIDDEN, t_range=(0.0, 1.0)).eval()
    paths = {"unchunked": None, "chunked": 4096}
    out: dict[str, list[tuple[float, float]]] = {k: [] for k in paths}

    def once(chunk, steps):
        g = torch.Generator().manual_seed(seed)
        f0, t0 = _minflt(), time.perf_counter()
        reverse_sde_sample(net.score, VPSDE(), (n_rows, 1, 2), steps, generator=g, chunk_size=chunk)
        return (time.perf_counter() - t0) / steps, (_minflt() - f0) / steps

    for chunk in paths.values():
        once(chunk, 1)
    for _ in range(repeats):
        for k, chunk in paths.items():
            out[k].append(once(chunk, n_steps))
    med = {k: sorted(v)[len(v) // 2] for k, v in out.items()}
    rows = []
    for k in paths:
        vs = ratio = None
        if k == "chunked":
            vs, ratio = "iid_sampler/unchunked", round(med["unchunked"][0] / med[k][0], 3)
        rows.append(
            Row(f"iid_sampler/{k}", "ms_per_step", round(1e3 * med[k][0], 2), "ms", vs, ratio)
        )
        rows.append(Row(f"iid_sampler/{k}", "minor_faults_per_step", round(med[k][1]), "-"))
    return rows


def _md_rows(n_frames: int, repeats: int, seed: int) -> list[Row]:
    """Langevin with the learned forces, autograd vs compiled ``ModelForces`` (interleaved)."""
    torch.manual_seed(seed)
    net = MLPEnergy((1, 2), HIDDEN, t_range=(0.0, 1.0)).eval()
    energy = EnergyAtTime(net, kT=MB_KT, scale=1.0, t_eval=1e-5)
    starts = torch.randn(100, 1, 2, generator=torch.Generator().manual_seed(seed)) * 0.4
    mass = torch.tensor([MB_MASS])

    def once(compile, frames):
        t0 = time.perf_counter()
        langevin_with_model(
            energy, starts, mass, MB_KT, MB_DT, 1.0, frames, MB_STRIDE, seed, compile=compile
        )
        return time.perf_counter() - t0

    warm = {c: once(c, 1) for c in (False, True)}
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for c in (False, True):
            times[c].append(once(c, n_frames))
    us = {c: 1e6 * sorted(v)[len(v) // 2] / (n_frames * MB_STRIDE) for c, v in times.items()}
    return [
        Row("md_forces/autograd", "us_per_step", round(us[False], 1), "us"),
        Row(
            "md_forces/compiled",
            "us_per_step",
            round(us[True], 1),
            "us",
            "md_forces/autograd",
            round(us[False] / us[True], 3),
        ),
        Row(
            "md_forces/compiled",
            "compile_s",
            round(warm[True] - us[True] * MB_STRIDE / 1e6, 1),
            "s",
        ),
    ]


def _adamw_step_us(fused: bool, n: int = 1000, device: str = "cpu") -> float:
    """Microseconds per AdamW step (lr set each step, as the trainer does) on the MLP, on
    ``device`` (the MLP and its gradients drawn on the CPU and moved there)."""
    net = MLPEnergy((1, 2), HIDDEN)
    for p in net.parameters():
        p.grad = torch.randn_like(p)
    if device != "cpu":
        net.to(run_device(device))  # the gradients move with the parameters
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=1e-4, fused=fused or None)
    for _ in range(20):
        opt.step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        for g in opt.param_groups:
            g["lr"] = 3e-4
        opt.step()
    _sync(device)
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


def main(argv: list[str] | None = None) -> int:
    p = _common.base_parser(__doc__.splitlines()[0], device=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--quoted-only",
        default=None,
        metavar="JSON",
        help="mark a stored JSON's ScoreMD figures as quoted rows (no timing)",
    )
    args = p.parse_args(argv)
    if args.quoted_only is not None:
        return _common.rederive_rows(args.quoted_only, quoted_rows)
    _common.setup(args)
    other, t0 = OtherLoad(), time.perf_counter()
    warn = _common.warn_if_busy()
    steps = 200 if args.quick else 1000
    mb_frames = 10 if args.quick else 100
    walkers, stride = 100, 50
    g = torch.Generator().manual_seed(args.seed)
    data = (torch.randn(BATCH * steps, 1, 2, generator=g) * 0.4).float()
    cache_warm = inductor_cache_warm()
    rows: list[Row | QuotedRow] = []
    repeats_ms: dict[str, list[float]] = {}
    for variant in ("plain", "fp"):
        times: dict[str, list[float]] = {k: [] for k in PATHS}
        warm_steps = max(5, steps // 10)
        warm = {}
        for path in PATHS:  # warm-up (lazy initialisation; compiling)
            warm[path] = _train_seconds(variant, path, warm_steps, data, args.seed, args.device)
        for _ in range(args.repeats):
            for path in PATHS:
                times[path].append(
                    _train_seconds(variant, path, steps, data, args.seed, args.device)
                )
        ms = {k: 1e3 * sorted(v)[len(v) // 2] / steps for k, v in times.items()}
        for k, v in times.items():
            repeats_ms[f"{variant}/{k}"] = [round(1e3 * x / steps, 3) for x in v]
        rows.append(Row(f"{variant}/reference", "ms_per_step", round(ms["reference"], 3), "ms"))
        for path in ("fused_adamw", "fast", "compiled"):
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
        rows.append(
            Row(
                f"{variant}/compiled",
                "speedup_vs_fast",
                round(ms["fast"] / ms["compiled"], 3),
                "x",
                f"{variant}/fast",
            )
        )
        compile_s = warm["compiled"] - warm_steps * ms["compiled"] / 1e3
        rows.append(Row(f"{variant}/compiled", "compile_s", round(compile_s, 1), "s"))
        rows.append(_scoremd_row(variant))
    rows.extend(
        _iid_rows(
            20_000 if args.quick else 100_000, 3 if args.quick else 5, args.repeats, args.seed
        )
    )
    rows.extend(_md_rows(10 if args.quick else 40, args.repeats, args.seed))
    adam: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for fused in (False, True):
            adam[fused].append(_adamw_step_us(fused, device=args.device))
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
    _common.print_rows(
        rows, title="energy-diffusion training and evaluation speed (ratio > 1: candidate faster)"
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
        inductor_cache_warm=cache_warm,
        scoremd_source=SCOREMD_SOURCE,
        quick=args.quick,
        device=args.device,
        device_scope="training steps (plain/*, fp/*) and adamw_step/*; the rest on the CPU",
    )
    return _common.finish(args, "energy_diffusion_speed", machine, rows, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
