"""Simulated tempering: exact spectral gaps against the decomposition bounds, and sampling.

Part 1, **exact gaps** (:mod:`sci_moe.theory.spectral`). A 1-D two-mode Gaussian mixture
``0.5 N(-D/2, 1) + 0.5 N(D/2, 1)`` on a grid of step ``h = 0.25`` (padded by 5 sigma),
grid RWMH with proposal scale 1, and the discretised simulated-tempering chain built on it
(:func:`simulated_tempering_chain` defaults: geometric ladder from ``beta = 1/D^2`` with
``ceil(2 ln D) + 2`` levels, matched level weights, power tempering). For every separation
``D`` the table gives the exact spectral gap of RWMH and of ST, the ratio ST / RWMH, and
the three lower bounds on the ST gap from :func:`check_bound` (``martin-randall`` and
``jstv`` with the hard (level, component) partition, ``soft`` with the component
responsibilities), each as bound / exact gap (<= 1 when the bound holds; closer to 1 is a
tighter bound). These are the classical decompositions, not Garg-Balasubramanian-Zhou's
constants (not available as text; see ``sci_moe.theory.spectral``). Plot: gap vs ``D``
on log-log axes (ST roughly polynomial, RWMH ``~ exp(-D^2/8)``).

Part 2, **sampling** (:mod:`sci_moe.sampling.tempering`). Two-mode mixtures
``0.3 N(-D/2 e_1, I) + 0.7 N(D/2 e_1, I)`` with ``D = 8`` in ``d = 2`` and ``d = 10``.
Observable: the mode indicator ``1[x_1 > 0]`` (exact mean 0.7). Contestants:

* ``RWMH``: :func:`sample` with :class:`RWMH`, 64 chains;
* ``ST``: :class:`SimulatedTempering` with RWMH, 64 chains, SAMS level weights (learned
  online, no prior knowledge of the normalising constants), estimates from the samples at
  ``beta = 1`` (:func:`masked_mean`);
* ``PT``: :class:`ParallelTempering` with RWMH, ``64 // L`` systems of ``L`` replicas.

Budget: a **fixed number of log-density evaluations**, ``64 * n_iterations`` for every
contestant (RWMH and ST spend one evaluation per chain and iteration, PT one per replica),
and the same ladder (geometric from ``1/D^2``; ``L = 7`` in 2-D, ``L = 12`` in 10-D) for ST
and PT. Chains start alternately at the two mode centres (half at each), so a sampler that
never crosses reports a weight near 0.5 (error about 0.2). Proposal scale at ``beta = 1``:
``2.38 / sqrt(d)``. Reported per contestant: estimate, |error|, its standard error, the
ESS of the indicator (Sokal IAT on the pooled series; ST: ``p (1 - p) / se^2`` from
:func:`masked_mean`) and ESS per second of wall time. Rows carry ``ratio`` against RWMH:
error_RWMH / error and ESS/s / ESS/s_RWMH (> 1: tempering better).

Not run here: the Muller-Brown potential and the alanine-dipeptide (OpenMM) parts of
issue 8.

Run: ``python benchmarks/tempering.py [--quick] [--json PATH] [--seed 0] [--plots DIR]
[--threads N]``. ``--quick``: D in (2, 4, 8) and 10000 iterations (about 20 s on two
cores); full: D in (2, 4, 6, 8, 10, 12) and 50000 iterations (about 70 s).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import torch
from _common import OtherLoad, Row, base_parser, machine_info, print_table, setup, write_json

from sci_moe.sampling.tempering import (
    RWMH,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    effective_sample_size,
    masked_mean,
    sample,
)
from sci_moe.sampling.tempering import geometric_ladder as torch_ladder
from sci_moe.theory.spectral import (
    bimodal_means,
    check_bound,
    gaussian_mixture_rwmh,
    simulated_tempering_chain,
    spectral_gap,
)

BENCHMARK = "tempering"
H, STEP = 0.25, 1.0  # grid step and RWMH proposal scale of the exact chains
BOUND_NAMES = ("martin-randall", "jstv", "soft")
N_CHAINS = 64
SEP, W_MINOR, W_MAJOR = 8.0, 0.3, 0.7


# ------------------------------------------------------------------ part 1: exact gaps


def exact_gaps(Ds: list[float]) -> list[dict]:
    out = []
    for D in Ds:
        t0 = time.perf_counter()
        means = bimodal_means(D, 1)
        rw, _, _ = gaussian_mixture_rwmh(means, 1.0, None, h=H, step=STEP)
        g_rw = spectral_gap(rw)
        st = simulated_tempering_chain(means, 1.0, None, h=H, step=STEP)
        g_st = spectral_gap(st.chain)
        bounds = {}
        for name in BOUND_NAMES:
            part = st.soft_weights if name == "soft" else st.labels
            bc = check_bound(st.chain, part, name, exact_gap=g_st)
            bounds[name] = (bc.bound, bc.holds)
        out.append(
            {
                "D": D,
                "n_rwmh": rw.n,
                "n_st": st.chain.n,
                "levels": st.betas.size,
                "gap_rwmh": g_rw,
                "gap_st": g_st,
                "bounds": bounds,
                "seconds": time.perf_counter() - t0,
            }
        )
    return out


def report_gaps(res: list[dict], rows: list[Row]) -> None:
    table = []
    for r in res:
        D, b = r["D"], r["bounds"]
        table.append(
            [
                f"D={D:g}",
                r["levels"],
                r["n_st"],
                r["gap_rwmh"],
                r["gap_st"],
                r["gap_st"] / r["gap_rwmh"],
                *[b[n][0] / r["gap_st"] for n in BOUND_NAMES],
                "yes" if all(b[n][1] for n in BOUND_NAMES) else "NO",
            ]
        )
        case = f"1d D={D:g}"
        rw_name = f"{case} RWMH"
        rows.append(Row(rw_name, "spectral_gap", r["gap_rwmh"], "1"))
        x_rw = r["gap_st"] / r["gap_rwmh"]
        rows.append(Row(f"{case} ST", "spectral_gap", r["gap_st"], "1", rw_name, x_rw))
        for n in BOUND_NAMES:
            rows.append(
                Row(
                    f"{case} ST bound {n}",
                    "gap_lower_bound",
                    b[n][0],
                    "1",
                    f"{case} ST",
                    b[n][0] / r["gap_st"],
                )
            )
    headers = ["case", "L", "states", "gap RWMH", "gap ST", "ST/RWMH"]
    headers += [f"{n}/gap" for n in ("MR", "JSTV", "soft")] + ["holds"]
    print_table(
        headers,
        table,
        title=f"exact spectral gaps, 1-D equal-weight mixture (h={H}, step={STEP}); "
        "bound/gap = lower bound on the ST gap / exact ST gap",
    )
    if len(res) >= 2:
        lD = np.log([r["D"] for r in res])
        s_st = np.polyfit(lD, np.log([r["gap_st"] for r in res]), 1)[0]
        D2 = np.array([r["D"] ** 2 for r in res])
        c_rw = np.polyfit(D2, np.log([r["gap_rwmh"] for r in res]), 1)[0]
        print(
            f"fits: gap_ST ~ D^{s_st:.2f} (log-log slope); "
            f"gap_RWMH ~ exp({c_rw:.3f} D^2) (theory for well separated modes: -1/8 = -0.125)"
        )
        rows.append(Row("1d fit ST", "loglog_slope_gap_vs_D", float(s_st), "1"))
        rows.append(Row("1d fit RWMH", "log_gap_per_D2", float(c_rw), "1"))


def plot_gaps(res: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    D = [r["D"] for r in res]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.loglog(D, [r["gap_rwmh"] for r in res], "o-", label="RWMH (exact)")
    ax.loglog(D, [r["gap_st"] for r in res], "s-", label="ST + RWMH (exact)")
    for n, m in zip(BOUND_NAMES, ("v--", "^--", "d--"), strict=True):
        ax.loglog(D, [max(r["bounds"][n][0], 1e-300) for r in res], m, label=f"{n} bound")
    ax.set_xlabel("separation D")
    ax.set_ylabel("spectral gap")
    ax.set_title("1-D two-mode mixture: gap vs separation")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------- part 2: sampling


def make_target(d: int):
    mu = torch.zeros(2, d, dtype=torch.float64)
    mu[0, 0], mu[1, 0] = -SEP / 2, SEP / 2
    logw = torch.tensor([math.log(W_MINOR), math.log(W_MAJOR)], dtype=torch.float64)

    def log_prob(x: torch.Tensor) -> torch.Tensor:
        sq = ((x[:, None, :] - mu[None]) ** 2).sum(-1)
        return torch.logsumexp(logw - 0.5 * sq, dim=1)

    return log_prob, mu


def run_sampling(d: int, n_iter: int, seed: int) -> dict:
    log_prob, mu = make_target(d)
    L = 7 if d <= 2 else 12
    betas = torch_ladder(1.0 / SEP**2, L, dtype=torch.float64)
    kernel = RWMH(step_size=2.38 / math.sqrt(d))
    gen = torch.Generator().manual_seed(seed)
    x0 = mu[torch.arange(N_CHAINS) % 2] + 0.1 * torch.randn(N_CHAINS, d, generator=gen)
    out = {"L": L}

    t0 = time.perf_counter()
    xs, _ = sample(kernel, log_prob, x0, n_iter, seed=seed, progress=False)
    wall = time.perf_counter() - t0
    ind = (xs[..., 0] > 0).double().numpy()
    ess = effective_sample_size(ind)
    out["RWMH"] = _summ(ind.mean(), np.sqrt(ind.mean() * (1 - ind.mean()) / ess), ess, wall)
    out["RWMH"]["evals"] = N_CHAINS * n_iter

    cfg = TemperingConfig(betas, kernel=kernel, weights="sams")
    res = SimulatedTempering(log_prob, cfg).run(x0, n_iter, seed=seed + 1, progress=False)
    ind = (res.x[..., 0] > 0).double().numpy()
    mask = (res.levels == L - 1).numpy()
    m, se = masked_mean(ind, mask)
    ess = m * (1 - m) / se**2 if se > 0 else float("nan")
    out["ST"] = _summ(m, se, ess, res.wall_time)
    out["ST"]["evals"] = N_CHAINS * n_iter
    out["ST"]["target_level_fraction"] = float(mask.mean())

    M = N_CHAINS // L
    pt_cfg = TemperingConfig(betas, kernel=kernel)
    res = ParallelTempering(log_prob, pt_cfg).run(x0[:M], n_iter, seed=seed + 2, progress=False)
    cold = res.x[:, torch.arange(M) * L + L - 1, 0]  # (T, M) positions at beta = 1
    ind = (cold > 0).double().numpy()
    ess = effective_sample_size(ind)
    out["PT"] = _summ(ind.mean(), np.sqrt(ind.mean() * (1 - ind.mean()) / ess), ess, res.wall_time)
    out["PT"]["evals"] = M * L * n_iter
    return out


def _summ(mean: float, se: float, ess: float, wall: float) -> dict:
    return {
        "estimate": float(mean),
        "error": float(abs(mean - W_MAJOR)),
        "stderr": float(se),
        "ess": float(ess),
        "wall_s": float(wall),
        "ess_per_s": float(ess / wall),
    }


def report_sampling(results: dict[int, dict], n_iter: int, rows: list[Row]) -> None:
    table = []
    for d, out in results.items():
        case = f"{d}d D={SEP:g} w=0.3/0.7"
        base = out["RWMH"]
        for who in ("RWMH", "ST", "PT"):
            r = out[who]
            e_ratio = base["error"] / r["error"] if who != "RWMH" and r["error"] > 0 else None
            s_ratio = r["ess_per_s"] / base["ess_per_s"] if who != "RWMH" else None
            table.append(
                [
                    case,
                    who,
                    r["evals"],
                    r["estimate"],
                    r["error"],
                    r["stderr"],
                    r["error"] / r["stderr"] if r["stderr"] > 0 else None,
                    r["ess"],
                    r["wall_s"],
                    r["ess_per_s"],
                    e_ratio,
                    s_ratio,
                ]
            )
            name = f"{case} {who}"
            vs = None if who == "RWMH" else f"{case} RWMH"
            rows.append(Row(name, "mode_weight_error", r["error"], "1", vs, e_ratio))
            rows.append(Row(name, "mode_weight_stderr", r["stderr"], "1"))
            rows.append(Row(name, "ess_mode_indicator", r["ess"], "samples"))
            rows.append(Row(name, "ess_per_s", r["ess_per_s"], "1/s", vs, s_ratio))
            rows.append(Row(name, "wall_time", r["wall_s"], "s"))
    headers = ["case", "sampler", "evals", "P(x1>0)", "|err|", "stderr", "err/se", "ESS"]
    headers += ["wall s"]
    print_table(
        [*headers, "ESS/s", "x err", "x ESS/s"],
        table,
        title=f"sampling: mode weight (exact 0.7), {n_iter} iterations, fixed budget of "
        f"{N_CHAINS} x {n_iter} log-density evaluations (PT: {N_CHAINS}//L systems); "
        "x = vs RWMH, > 1 better",
    )
    print(
        "  err/se >> 3 means the chains have not mixed between the modes: the stderr (and "
        "ESS) then\n  reflect only the run length (Sokal window), not real mixing."
    )
    for d, out in results.items():
        print(
            f"  {d}-D: L={out['L']}, ST time at beta=1: "
            f"{100 * out['ST']['target_level_fraction']:.1f}% of the samples"
        )


def plot_sampling(results: dict[int, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    who = ("RWMH", "ST", "PT")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    width = 0.25
    for k, (d, out) in enumerate(results.items()):
        xs = np.arange(len(who)) + (k - 0.5) * width
        axes[0].bar(
            xs,
            [out[w]["error"] for w in who],
            width,
            yerr=[out[w]["stderr"] for w in who],
            label=f"{d}-D",
        )
        axes[1].bar(xs, [max(out[w]["ess_per_s"], 1e-3) for w in who], width, label=f"{d}-D")
    for ax, t in zip(axes, ("|mode-weight error|", "ESS/s of mode indicator"), strict=True):
        ax.set_xticks(np.arange(len(who)), who)
        ax.set_title(t)
        ax.legend(fontsize=8)
    axes[1].set_yscale("log")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0])
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    args = parser.parse_args(argv)
    setup(args)
    Ds = [2.0, 4.0, 8.0] if args.quick else [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    n_iter = 10000 if args.quick else 50000
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        separations=Ds,
        grid_step=H,
        n_iterations=n_iter,
        n_chains=N_CHAINS,
        budget="fixed number of log-density evaluations",
    )
    print(
        f"tempering: torch {machine['torch']}, {machine['cpu']}, "
        f"{torch.get_num_threads()} threads, seed {args.seed}, git {machine['git']}"
    )
    print(
        "note: the Muller-Brown and alanine-dipeptide (OpenMM) parts of issue 8 are not "
        "run by this script"
    )
    other = OtherLoad()
    rows: list[Row] = []

    gaps = exact_gaps(Ds)
    report_gaps(gaps, rows)
    print()
    samp = {d: run_sampling(d, n_iter, args.seed) for d in (2, 10)}
    report_sampling(samp, n_iter, rows)

    if args.plots is not None:
        plot_gaps(gaps, args.plots / "tempering_gaps.png")
        plot_sampling(samp, args.plots / "tempering_sampling.png")
        print(f"plots in {args.plots}")
    load = other.report()
    machine["contention"] = load
    print(f"total {load['wall_s']:.0f} s; other processes used {load['other_cpu_s']} CPU s")
    if args.json is not None:
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
