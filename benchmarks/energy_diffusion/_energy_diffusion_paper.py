"""Mueller-Brown energy diffusion at ScoreMD's budget (``run.py --paper-budget``).

A helper of ``run.py`` (no entry point of its own): ``run_paper_budget``.

ScoreMD's Mueller-Brown recipe (Plainer et al. 2025, its ``mueller_brown`` config): 100k
training frames (kT 23, BAOAB), MLP energy 3 x 92 (SiLU), batch 128, 180 epochs x 781
steps = 140,580 optimiser steps, AdamW + cosine 3e-4 -> 1e-5, FP weight 5e-4 with the
two-probe estimator, t ~ U[1e-5, 1], time-weight midpoint 0.5. ScoreMD's "EMA 0.995"
updates ``ema = 0.995 * new + 0.005 * old`` (almost no averaging): in our convention that
is ``ema_decay=0.005`` with the per-epoch reset (``ema_reset=True``), used here.

Variants ``plain`` / ``fp`` / ``moe`` / ``both`` (see ``run.py``); the time
mixture splits the epochs 1/6, 1/6, 2/3 (ScoreMD: 30/30/120 of 180).

Per variant and seed: training steps, wall and CPU seconds, steps/s; i.i.d. samples
(reverse SDE, Euler-Maruyama) and Langevin MD with the learned forces at t = 1e-5,
each against an independent reference run, with JS under BOTH definitions:

* ``js_box``: ours, 100 x 100 bins on the fixed box :data:`MULLER_BROWN_BOX`;
* ``js_scoremd``: ScoreMD's, 100 bins on the joint min/max range of both sets
  (``js_divergence(limits=None)``);

and the PMF error (64 bins incl. outlier bins on the box, (kT)^2, no root; the same
definition as ScoreMD's); the FP residual sqrt(E r^2)/D versus t; the per-epoch DSM loss
(learning curve). The training speed is compared with the plain eager reference loop
(``fp_batched=False``, unfused AdamW, a host sync each step) timed on the same data in
the same run.

Training uses ``TrainConfig(compile=True)`` (the functional ``torch.func`` steps, plain
and FP, ``torch.compile``-d; ``--eager`` for the eager trainer); the evaluation records
its wall time and minor page faults; the Langevin forces are ``ModelForces(compile=True)``
too (``--eager``: autograd).

Each case checkpoints after every epoch (``<work>/<variant>_s<seed>/``) and writes its
result there when done: a killed run started again with the same arguments resumes.

ScoreMD's own numbers (its JAX code at the full budget, seed 1, from issue 28: measured
on another machine, not in this run) are written as quoted ``scoremd/*`` rows
(``"quoted": {"source", "machine"}``, no ``vs`` / ``ratio``) for the page to show beside
ours; :func:`quoted_rows` re-derives them in a stored JSON
(``run.py --quoted-only PATH``). ScoreMD's loop run beside ours on one
machine is ``benchmarks/energy_diffusion/vs_scoremd.py``. The paper's own Mueller-Brown
figures are quoted rows too (``paper/diffusion``).
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
import numpy as np
import torch
from _energy_diffusion import PATHS, langevin_with_model

from sci_moe._util import atomic_save_json
from sci_moe.data.toy import MULLER_BROWN_BOX, muller_brown_samples
from sci_moe.sampling.diffusion import (
    VPSDE,
    EnergyAtTime,
    MLPEnergy,
    Stage,
    TrainConfig,
    fp_error_curve,
    js_divergence,
    mueller_brown_model,
    mueller_brown_stages,
    pmf_error,
    reverse_sde_sample,
    train,
)
from sci_moe.train import is_flat, tail_gain

__all__ = [
    "PAPER",
    "PAPER_FIGURES",
    "PAPER_QUOTE",
    "SCOREMD",
    "SCOREMD_QUOTE",
    "last_stage_flatness",
    "quoted_rows",
    "replot",
    "run_paper_budget",
    "scoremd_rows",
]

#: ScoreMD's Mueller-Brown recipe
PAPER = dict(n_data=100_000, epochs=180, batch=128, steps_per_epoch=781, fp_weight=5e-4)
#: ScoreMD's figures quoted from issue 28 (its JAX code, seed 1, its metric definitions)
SCOREMD = {
    "plain": {"iid_js_scoremd": 0.0124, "md_js_scoremd": 0.0458, "train_wall_s": 124.5},
    "fp": {
        "iid_js_scoremd": 0.0135,
        "md_js_scoremd": 0.0163,
        "md_pmf": 0.154,
        "train_wall_s": 541.0,
    },
}
#: Where :data:`SCOREMD` comes from: quoted, not measured in this run.
SCOREMD_QUOTE = _common.quote(
    source="issue 28: ScoreMD's own JAX code (Mueller-Brown config, full budget, seed 1, "
    "its JS and PMF definitions), run by the issue's filer",
    machine="the issue-28 filer's 2-core AMD EPYC host, not the machine of this run",
)
#: The paper's own Mueller-Brown figures of its diffusion model (ScoreMD's JS and PMF
#: definitions), quoted from a secondary source as the results page first gave them.
PAPER_FIGURES = {
    "iid_js_scoremd": 0.0122,
    "md_js_scoremd": 0.0448,
    "iid_pmf": 0.111,
    "md_pmf": 0.504,
}
PAPER_QUOTE = _common.quote(
    source="Plainer et al. 2025 (ScoreMD), Mueller-Brown, the diffusion model without FP: "
    "i.i.d. / MD JS and PMF error, through a secondary source (first quoted in 4067771)",
    machine="the paper's hardware (not stated in the source)",
)
#: ``machine["scoremd_source"]`` of a paper-budget JSON.
SCOREMD_SOURCE = "quoted from issue 28 (another machine, not this run): the scoremd/* rows"


def scoremd_rows() -> list[_common.QuotedRow]:
    """ScoreMD's figures (:data:`SCOREMD`, case ``scoremd/<variant>/seed1``) and the
    paper's (:data:`PAPER_FIGURES`, case ``paper/diffusion``) as quoted rows."""
    rows = [
        _common.QuotedRow(f"scoremd/{variant}/seed1", k, v, "-", quoted=SCOREMD_QUOTE)
        for variant, d in SCOREMD.items()
        for k, v in d.items()
    ]
    rows += [
        _common.QuotedRow("paper/diffusion", k, v, "-", quoted=PAPER_QUOTE)
        for k, v in PAPER_FIGURES.items()
    ]
    return rows


def quoted_rows(doc: dict) -> list[_common.Row | _common.QuotedRow]:
    """The rows of a stored paper-budget JSON with ScoreMD's figures as quoted rows.

    The ``--quoted-only`` rule (issue 41): every ``scoremd/*`` and ``paper/*`` row is
    rebuilt by :func:`scoremd_rows` (its stored value must be that figure) with its
    ``quoted`` record and no ``vs`` / ``ratio``; the paper's rows are appended when the
    JSON has none yet; no other row may name a quoted one as its ``vs``; every other row is
    kept as it is. ``machine["scoremd_source"]`` is corrected to :data:`SCOREMD_SOURCE`.

    Raises
    ------
    ValueError
        When a stored quoted figure differs from the script's, or a row compares itself
        with a quoted one.
    """
    quoted = {(r.case, r.metric): r for r in scoremd_rows()}
    out, seen = [], set()
    for r in doc["rows"]:
        key = (r["case"], r["metric"])
        if r["case"].startswith(("scoremd/", "paper/")):
            if key not in quoted or r["value"] != quoted[key].value:
                raise ValueError(f"stored ScoreMD figure {key} = {r['value']} is not in SCOREMD")
            out.append(quoted[key])
            seen.add(key)
        elif str(r.get("vs") or "").startswith(("scoremd/", "paper/")):
            raise ValueError(f"{key} has a ratio to a quoted figure ({r['vs']})")
        else:
            out.append(_common.Row(**r))
    scoremd = {k for k in quoted if k[0].startswith("scoremd/")}
    if seen & scoremd and not scoremd <= seen:
        raise ValueError(f"ScoreMD rows missing from the JSON: {sorted(scoremd - seen)}")
    out += [row for k, row in quoted.items() if k not in seen and k[0].startswith("paper/")]
    if "scoremd_source" in doc.get("machine", {}):
        doc["machine"]["scoremd_source"] = SCOREMD_SOURCE
    return out


FP_CURVE_TS = (1e-4, 1e-3, 1e-2, 0.1, 0.3, 0.6, 1.0)
KT, MASS, DT, STRIDE = 23.0, 0.5, 5e-3, 50


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _metrics(ref: np.ndarray, x: np.ndarray, prefix: str) -> dict:
    box = MULLER_BROWN_BOX
    ok = np.isfinite(x).all(1)
    x = x[ok]
    return {
        f"{prefix}_js_box": js_divergence(ref, x, 100, box),
        f"{prefix}_js_scoremd": js_divergence(ref, x, 100, None),
        f"{prefix}_pmf": pmf_error(ref, x, 64, box),
        f"{prefix}_nonfinite": float(1 - ok.mean()),
    }


def last_stage_flatness(loss: list[float]) -> dict:
    """Whether a case's training converged, by the house rule :func:`sci_moe.train.is_flat`.

    Parameters
    ----------
    loss : list of float, shape (epochs,)
        The per-epoch mean training objective (DSM plus the weighted FP term) of the last
        stage trained: the one a time mixture ends with, the only one of a plain model.

    Returns
    -------
    dict
        ``train_last_gain``: :func:`sci_moe.train.tail_gain` over the epochs (the relative
        gain of the best loss of the last fifth of epochs over the best before it; NaN for
        fewer than five epochs); ``train_flat``: 1.0 when :func:`sci_moe.train.is_flat`
        (< 1 % gain) holds, else 0.0.
    """
    epochs = list(range(1, len(loss) + 1))
    return {
        "train_last_gain": tail_gain(epochs, loss),
        "train_flat": float(is_flat(epochs, loss)),
    }


def _last_stage_loss(history: list[dict]) -> list[float]:
    """The per-epoch loss of the last stage of a training's ``history``."""
    last = max(h["stage"] for h in history)
    return [h["loss"] for h in history if h["stage"] == last]


def _stored_last_stage_loss(res: dict, epochs: int) -> list[float]:
    """The last stage's per-epoch loss of a finished case, from its stored DSM and FP
    curves and the stages of its variant (the FP term weighted as it was trained)."""
    stage = mueller_brown_stages(res["variant"], epochs, fp_weight=PAPER["fp_weight"])[-1]
    n = stage.epochs
    dsm, fp = res["curve_dsm"][-n:], res["curve_fp"][-n:]
    return [d + stage.fp_weight * f for d, f in zip(dsm, fp, strict=True)]


def _case(variant, seed, data, ref, args, work: Path, hours: float | None = None) -> dict | None:
    """Train, sample and score one case; ``None`` when ``hours`` ran out first (a later
    call resumes the training from its checkpoint)."""
    done = work / "result.json"
    if done.exists():  # convergence judged again by the current rule (cheap, stored curves)
        res = json.loads(done.read_text())
        flat = last_stage_flatness(_stored_last_stage_loss(res, args.epochs))
        if any(res.get(k) != v for k, v in flat.items()):
            res.update(flat)
            atomic_save_json(done, res)
        return res
    torch.manual_seed(seed)
    model = mueller_brown_model(variant)
    sde = VPSDE()
    cfg = TrainConfig(
        stages=mueller_brown_stages(variant, args.epochs, fp_weight=PAPER["fp_weight"]),
        batch_size=PAPER["batch"],
        ema_decay=0.005,
        ema_reset=True,
        max_batches_per_epoch=args.steps_per_epoch,
        seed=seed,
        progress=False,
        compile=not args.eager,
        device=getattr(args, "device", None),  # may change when a case resumes
        max_hours=hours,
    )
    t0, c0 = time.perf_counter(), _cpu_s()
    out = train(model, data, sde, cfg, out_dir=work, resume=True)
    wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
    if not out["done"]:
        return None
    hist = out["history"]
    # a resumed run: the epochs' own seconds give the whole training wall time
    train_wall = float(sum(h["seconds"] for h in hist))
    steps = len(hist) * min(math.ceil(len(data) / PAPER["batch"]), args.steps_per_epoch)
    model.cpu().eval()  # the sampling, MD and FP residual on the CPU (the reference's)
    gen = torch.Generator().manual_seed(10_000 + seed)
    t1, f1 = time.perf_counter(), _minflt()
    iid = reverse_sde_sample(
        model.score, sde, (args.n_iid, 1, 2), n_steps=args.sde_steps, generator=gen
    )[:, 0].numpy()
    t_iid, f_iid = time.perf_counter() - t1, _minflt() - f1
    energy = EnergyAtTime(model, kT=KT, scale=1.0, t_eval=1e-5)
    idx = torch.randint(len(data), (args.walkers,), generator=gen)
    t1, f1 = time.perf_counter(), _minflt()
    md = langevin_with_model(
        energy,
        data[idx],
        torch.tensor([MASS]),
        KT,
        DT,
        1.0,
        args.md_frames,
        STRIDE,
        20_000 + seed,
        compile=not args.eager,
    )[:, 0].numpy()
    t_md, f_md = time.perf_counter() - t1, _minflt() - f1
    # a time mixture's energy (and so its FP residual) exists only on the small-t expert
    ts = FP_CURVE_TS if variant in ("plain", "fp") else tuple(t for t in FP_CURVE_TS if t < 0.099)
    fp = fp_error_curve(model.energy, sde, data, ts, n_per_t=1024, generator=gen)
    res = {
        "variant": variant,
        "seed": seed,
        "steps": steps,
        "train_wall_s": train_wall,
        "train_cpu_s_this_call": cpu,
        "wall_s_this_call": wall,
        "steps_per_s": steps / train_wall,
        "compiled": not args.eager,
        "iid_s": t_iid,
        "md_s": t_md,
        "iid_minor_faults": f_iid,
        "md_minor_faults": f_md,
        **_metrics(ref, iid, "iid"),
        **_metrics(ref, md, "md"),
        **{f"fp_t{t:g}": float(v) for t, v in zip(ts, fp, strict=True)},
        **last_stage_flatness(_last_stage_loss(hist)),
        "curve_dsm": [float(h["dsm"]) for h in hist],
        "curve_fp": [float(h["fp"]) for h in hist],
    }
    np.savez_compressed(work / "samples.npz", iid=iid, md=md)
    atomic_save_json(done, res)
    return res


def _speed_ratio(data: torch.Tensor, seed: int, steps: int, repeats: int = 3) -> dict:
    """ms/step of the eager reference loop, the eager default and the compiled path.

    Same data, same run; the repeats interleaved (reference, fast, compiled, reference,
    ...) so that a change of the machine's load hits every path; medians.
    """
    paths = ("reference", "fast", "compiled")
    times: dict[str, list[float]] = {}
    for variant in ("plain", "fp"):  # warm-up (lazy initialisation; compiling)
        for path in paths:
            _train_ms(data, seed, max(2, steps // 10), variant, path)
    for _ in range(repeats):
        for variant in ("plain", "fp"):
            for path in paths:
                ms = _train_ms(data, seed, steps, variant, path)
                times.setdefault(f"{variant}/{path}", []).append(ms)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def _train_ms(data, seed, steps, variant, path) -> float:
    fp = PAPER["fp_weight"] if variant == "fp" else 0.0
    net = MLPEnergy((1, 2), (92, 92, 92), t_range=(0.0, 1.0))
    cfg = TrainConfig(
        stages=[Stage(1, (1e-5, 1.0), 0.5, fp)],
        batch_size=PAPER["batch"],
        ema_decay=0.005,
        max_batches_per_epoch=steps,
        seed=seed,
        progress=False,
        **PATHS[path],
    )
    t0 = time.perf_counter()
    train(net, data, VPSDE(), cfg)
    return 1e3 * (time.perf_counter() - t0) / steps


def run_paper_budget(args) -> tuple[list, bool]:
    """Run the cases of ``args.variants`` x seeds; returns the benchmark rows and whether
    every case is done (``--max-hours`` may stop the run between or inside cases: its
    finished cases are kept in the work folder, and running it again continues)."""
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "data.npz"
    if cache.exists():
        z = np.load(cache)
        data_np, ref = z["data"], z["ref"]
    else:
        print(f"Mueller-Brown data: 2 x {args.n_data} frames (seeds 1, 2) ...", flush=True)
        data_np = muller_brown_samples(args.n_data, n_walkers=100, seed=1, progress=False)
        ref = muller_brown_samples(args.n_data, n_walkers=100, seed=2, progress=False)
        np.savez(cache, data=data_np, ref=ref)
    data = torch.tensor(data_np, dtype=torch.float32).view(-1, 1, 2)
    rows: list[_common.Row | _common.QuotedRow] = []
    floor = _metrics(ref, data_np, "floor")
    for k in ("floor_js_box", "floor_js_scoremd", "floor_pmf"):
        rows.append(_common.Row("mb_paper/floor", k[6:], floor[k], "-"))
    speed_file = work / "speed.json"  # measured once per work folder (a rerun reuses it)
    if speed_file.exists():
        speed = json.loads(speed_file.read_text())
    else:
        speed = _speed_ratio(data, args.seed, args.speed_steps)
        atomic_save_json(speed_file, speed)
    for k, v in speed.items():
        variant, path = k.split("/")
        vs = ratio = None
        if path != "reference":
            vs, ratio = f"speed/{variant}/reference", speed[f"{variant}/reference"] / v
        rows.append(_common.Row(f"speed/{k}", "ms_per_step", round(v, 3), "ms", vs, ratio))
    print(f"speed (ms/step): {speed}", flush=True)
    results: dict[str, list[dict]] = {}
    deadline = _common.piece_deadline(args)
    todo = [(s, v) for s in args.paper_seeds for v in args.variants]
    for seed, variant in todo:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        hours = None if math.isinf(left) else left / 3600
        r = _case(variant, seed, data, ref, args, work / f"{variant}_s{seed}", hours)
        if r is None:  # --max-hours spent inside this case's training
            break
        results.setdefault(variant, []).append(r)
        print(
            f"  {variant} seed {seed}: {r['steps']} steps {r['train_wall_s']:.0f} s "
            f"iid JS box/scoremd {r['iid_js_box']:.4f}/{r['iid_js_scoremd']:.4f} "
            f"MD {r['md_js_box']:.4f}/{r['md_js_scoremd']:.4f} "
            f"PMF iid/MD {r['iid_pmf']:.3f}/{r['md_pmf']:.3f} "
            f"(last-stage gain {r['train_last_gain']:.2%})",
            flush=True,
        )
    skip = {"variant", "seed", "curve_dsm", "curve_fp"}
    for variant, per in results.items():
        for r in per:
            case = f"mb_paper/{variant}/seed{r['seed']}"
            for k, v in r.items():
                if k not in skip:
                    rows.append(_common.Row(case, k, float(v), "-"))
            for d in ("scoremd", "box"):
                rows.append(
                    _common.Row(
                        case, f"md_over_iid_js_{d}", r[f"md_js_{d}"] / r[f"iid_js_{d}"], "-"
                    )
                )
            full = PAPER["epochs"] * PAPER["steps_per_epoch"]
            rows.append(_common.Row(case, "budget_fraction", r["steps"] / full, "-"))
        for k in ("iid_js_box", "iid_js_scoremd", "md_js_box", "md_js_scoremd", "md_pmf"):
            vals = [r[k] for r in per]
            rows.append(_common.Row(f"mb_paper/{variant}", k, float(np.mean(vals)), "-"))
            rows.append(_common.Row(f"mb_paper/{variant}", k + "_std", float(np.std(vals)), "-"))
            rows.append(_common.Row(f"mb_paper/{variant}", k + "_n", float(len(vals)), "-"))
    rows.extend(scoremd_rows())
    n_done = sum(len(per) for per in results.values())
    complete = n_done == len(todo)
    if not complete:
        print(
            f"--max-hours spent: {n_done} of {len(todo)} cases done; run the same command "
            f"again to continue (the cases resume from {work})",
            flush=True,
        )
    if args.plots and complete:
        plot_curves(results, Path(args.plots) / args.paper_plot_name)
    return rows, complete


def replot(args) -> Path:
    """``--paper-replot``: draw :func:`plot_curves` again from the finished cases of
    ``args.work_dir`` (their ``result.json``); returns the PNG's path.

    Raises
    ------
    SystemExit
        (exit code 2) When a case of ``args.variants`` x ``args.paper_seeds`` is not
        finished: its folder is named.
    """
    work = Path(args.work_dir)
    results: dict[str, list[dict]] = {}
    missing = []
    for seed in args.paper_seeds:
        for variant in args.variants:
            done = work / f"{variant}_s{seed}" / "result.json"
            if done.exists():
                results.setdefault(variant, []).append(json.loads(done.read_text()))
            else:
                missing.append(str(done.parent))
    if missing:
        _common.refuse(f"--paper-replot: cases not finished: {', '.join(missing)}")
    out = Path(args.plots) / args.paper_plot_name
    plot_curves(results, out)
    return out


def plot_curves(results: dict, out: Path) -> None:
    """Learning curves (DSM loss per epoch) and the FP residual versus t: one colour per
    variant, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (variant, per) in enumerate(results.items()):
        color = f"C{i}"
        for j, r in enumerate(per):
            label = f"{variant} ({len(per)} seed{'s' if len(per) > 1 else ''})" if j == 0 else None
            a.plot(
                np.arange(1, len(r["curve_dsm"]) + 1),
                r["curve_dsm"],
                color=color,
                lw=0.8,
                alpha=0.8,
                label=label,
            )
            # fp_error_curve clips a negative two-probe mean to 0: such t are left out
            ts = [t for t in FP_CURVE_TS if r.get(f"fp_t{t:g}", 0.0) > 0]
            b.loglog(
                ts, [r[f"fp_t{t:g}"] for t in ts], "o-", color=color, ms=3, lw=0.8, label=label
            )
    a.set_xlabel("epoch")
    a.set_ylabel("DSM loss (epoch mean)")
    a.set_yscale("log")
    a.set_title("learning curves")
    a.legend(fontsize=7)
    b.set_xlabel("t")
    b.set_ylabel("FP residual sqrt(E r^2)/D")
    b.set_title("FP residual vs t (t with a clipped 0 left out)")
    b.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
