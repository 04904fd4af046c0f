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

Part 3, **Muller-Brown** (md-engine's :class:`~sci_moe.sampling.md.potentials.MuellerBrown`,
standard parameters) at ``kT = 10`` (barrier out of the deepest minimum A ~ 10.6 kT), as
the log-density ``-E/kT`` (:func:`energy_log_prob`). Observable: the populations of the
three nearest-minimum (Voronoi) states A, B, C, exact by grid quadrature. 64 chains,
half started in A and half in B; every local kernel (RWMH step 0.06, MALA step 0.03,
Langevin BAOAB with timestep 0.02 and friction 10, unit mass) alone vs inside simulated
tempering (8 geometric levels from ``beta = 0.06``, i.e. up to kT = 167, SAMS weights),
the same number of iterations (one local step + one level move per iteration), the first
fifth discarded. Reported: populations, max |error|, the standard error of P(B), the
state changes per chain seen at the target level, round trips, ESS/s of the B indicator,
and ratios ST / plain for the same kernel.

Part 4, **alanine dipeptide** (md-engine's ``build_system``: amber99sbildn + OBC,
H-bond constraints; LangevinMiddle 1/ps, 2 fs, OpenMM Reference platform): plain MD at
300 K vs OpenMM simulated tempering (:class:`OpenMMSimulatedTempering`, 10 geometric
temperatures 300-800 K, SAMS weights, Gibbs level moves every 50 steps, velocities
rescaled) for the same number of MD steps. Frames every 50 steps (0.1 ps); macrostates
from (phi, psi): beta/C7eq (phi < 0, psi outside (-120, 50) deg), alpha_R, alpha_L/C7ax
(phi > 0); ST uses the frames at 300 K only. Reported: populations with standard errors
(Sokal IAT), phi transitions between the cores (-180, -30) and (30, 130) deg at 300 K (and
for ST at any level), temperature round trips, ESS/s of the alpha_L indicator, and the
running P(alpha_L) vs simulated time.

Run: ``python benchmarks/tempering/run.py [--quick] [--json PATH] [--seed 0] [--plots DIR]
[--threads N] [--theory]``; ``--theory`` runs only the issue-47 section instead (the
restricted-gap decomposition of :mod:`sci_moe.theory.spectral.st_bound` against exact
gaps, with verdicts; see ``benchmarks/tempering/_tempering_theory.py``). ``--quick``: D in
(2, 4, 8), 10000 iterations, Muller-Brown 3000 iterations, alanine 0.1 ns per sampler
(about 1 min on one core); full: D in (2, 4, 6, 8, 10, 12), 50000 iterations,
Muller-Brown 20000 iterations, alanine 5 ns per sampler (about 7-10 min on one core, most
of it the 5 million MD steps of the alanine part).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

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
    round_trips,
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


# ------------------------------------------------------------- part 3: Muller-Brown

MB_KT = 10.0  # target temperature (energy units of the potential); barrier A->C ~ 10.6 kT
MB_MINIMA = np.array([(-0.558, 1.442), (0.623, 0.028), (-0.050, 0.467)])
MB_STATES = ("A", "B", "C")
MB_LEVELS, MB_BETA_MIN = 8, 0.06  # hottest level kT = 10 / 0.06 = 167 > barrier 106
MB_CHAINS = 64
MB_BURN_IN = 5  # the first 1/5 of every run is discarded (ST: SAMS weights still adapting)


def mb_state(xy: np.ndarray) -> np.ndarray:
    """Nearest-minimum (Voronoi) state 0/1/2 = A/B/C of points ``(..., 2)``."""
    d = ((xy[..., None, :] - MB_MINIMA) ** 2).sum(-1)
    return d.argmin(-1)


def mb_exact_populations(mb) -> np.ndarray:
    """Boltzmann populations of the three Voronoi states at ``MB_KT`` by grid quadrature."""
    xs, ys = np.linspace(-2.2, 1.6, 1521), np.linspace(-1.0, 2.8, 1521)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    pts = np.stack([X.ravel(), Y.ravel()], 1)
    with torch.no_grad():
        e = mb(torch.tensor(pts)[:, None, :]).numpy()
    w = np.exp(-(e - e.min()) / MB_KT)
    lab = mb_state(pts)
    return np.array([w[lab == k].sum() for k in range(3)]) / w.sum()


def run_muller_brown(n_iter: int, seed: int) -> dict:
    from sci_moe.sampling.md.potentials import MuellerBrown
    from sci_moe.sampling.tempering import BAOAB, MALA, energy_log_prob

    mb = MuellerBrown()
    exact = mb_exact_populations(mb)
    log_prob = energy_log_prob(mb, MB_KT, (1, 2))
    gen = torch.Generator().manual_seed(seed)
    # half of the chains start in A, half in B (the metastable second minimum)
    x0 = torch.tensor(MB_MINIMA[torch.arange(MB_CHAINS).numpy() % 2], dtype=torch.float64)
    x0 = x0 + 0.01 * torch.randn(MB_CHAINS, 2, generator=gen, dtype=torch.float64)
    betas = torch_ladder(MB_BETA_MIN, MB_LEVELS, dtype=torch.float64)
    kernels = {
        "RWMH": RWMH(step_size=0.06),
        "MALA": MALA(step_size=0.03),
        "BAOAB": BAOAB(step_size=0.02, friction=10.0),
    }
    out = {"exact": exact.tolist(), "kT": MB_KT, "L": MB_LEVELS, "beta_min": MB_BETA_MIN}
    for name, k in kernels.items():
        t0 = time.perf_counter()
        xs, _ = sample(k, log_prob, x0, n_iter, seed=seed, progress=False)
        wall = time.perf_counter() - t0
        burn = n_iter // MB_BURN_IN
        lab = mb_state(xs[burn:].numpy())
        out[name] = _mb_summary(lab, np.ones(lab.shape, bool), exact, wall)
        cfg = TemperingConfig(betas, kernel=k, weights="sams")
        res = SimulatedTempering(log_prob, cfg).run(x0, n_iter, seed=seed + 1, progress=False)
        lab = mb_state(res.x[burn:].numpy())
        top = (res.levels[burn:] == MB_LEVELS - 1).numpy()
        r = _mb_summary(lab, top, exact, res.wall_time)
        r["round_trips"] = int(round_trips(res.levels, MB_LEVELS).sum())
        r["target_level_fraction"] = float(top.mean())
        r["level_acceptance_min"] = float(res.level_acceptance.min())
        out[f"ST+{name}"] = r
    return out


def _mb_summary(lab: np.ndarray, mask: np.ndarray, exact: np.ndarray, wall: float) -> dict:
    pops, ses = [], []
    for k in range(3):
        m, se = masked_mean((lab == k).astype(float), mask)
        pops.append(m)
        ses.append(se)
    err = np.abs(np.array(pops) - exact)
    # ESS of the B indicator (the minority state the chains must find and leave)
    p = pops[1]
    ess = p * (1 - p) / ses[1] ** 2 if ses[1] > 0 else float("nan")
    # state changes per chain in its sequence of target-level samples
    jumps = np.mean([np.count_nonzero(np.diff(lab[mask[:, b], b])) for b in range(lab.shape[1])])
    return {
        "populations": pops,
        "stderr": ses,
        "max_error": float(err.max()),
        "error_B": float(err[1]),
        "ess_B": float(ess),
        "wall_s": float(wall),
        "ess_per_s": float(ess / wall),
        "state_changes_per_chain": float(jumps),
    }


def report_muller_brown(out: dict, n_iter: int, rows: list[Row]) -> None:
    exact = out["exact"]
    table = []
    for name in ("RWMH", "MALA", "BAOAB"):
        base = out[name]
        for who in (name, f"ST+{name}"):
            r = out[who]
            e_ratio = base["max_error"] / r["max_error"] if who != name else None
            s_ratio = r["ess_per_s"] / base["ess_per_s"] if who != name else None
            pops = "/".join(f"{v:.4f}" for v in r["populations"])
            table.append(
                [
                    who,
                    pops,
                    r["max_error"],
                    r["stderr"][1],
                    r["error_B"] / r["stderr"][1] if r["stderr"][1] > 0 else None,
                    r["state_changes_per_chain"],
                    r.get("round_trips"),
                    r["wall_s"],
                    r["ess_per_s"],
                    e_ratio,
                    s_ratio,
                ]
            )
            case = f"muller-brown kT={MB_KT:g} {who}"
            vs = None if who == name else f"muller-brown kT={MB_KT:g} {name}"
            rows.append(Row(case, "max_population_error", r["max_error"], "1", vs, e_ratio))
            rows.append(Row(case, "population_B", r["populations"][1], "1"))
            rows.append(Row(case, "population_B_stderr", r["stderr"][1], "1"))
            rows.append(Row(case, "ess_per_s_B", r["ess_per_s"], "1/s", vs, s_ratio))
            rows.append(Row(case, "wall_time", r["wall_s"], "s"))
            if "round_trips" in r:
                rows.append(Row(case, "round_trips", r["round_trips"], "1"))
    rows.append(Row(f"muller-brown kT={MB_KT:g} exact", "population_B", exact[1], "1"))
    print_table(
        [
            "sampler",
            "P(A)/P(B)/P(C)",
            "max|err|",
            "se(B)",
            "err/se",
            "changes",
            "trips",
            "wall s",
            "ESS/s",
            "x err",
            "x ESS/s",
        ],
        table,
        title=f"Muller-Brown at kT={MB_KT:g}: Voronoi-state populations (exact "
        + "/".join(f"{v:.4f}" for v in exact)
        + f" by quadrature), {MB_CHAINS} chains x {n_iter} iterations, half started in A "
        f"and half in B; ST: L={MB_LEVELS}, beta_min={MB_BETA_MIN}, SAMS weights; "
        "x = ST vs the same kernel without tempering",
    )


# ----------------------------------------------------------- part 4: alanine dipeptide

ALA_T0, ALA_TMAX, ALA_LEVELS = 300.0, 800.0, 10
ALA_STEPS_PER_FRAME = 50  # 0.1 ps at 2 fs: frames of plain MD, ST iterations
ALA_STEPS = 2_500_000  # 5 ns per sampler (full run)


def ala_states(pp: np.ndarray) -> np.ndarray:
    """Macrostates from (phi, psi) radians: 0 = beta/C7eq/PII (phi < 0, psi outside
    (-120, 50) deg), 1 = alpha_R (phi < 0, -120 < psi < 50 deg), 2 = alpha_L/C7ax (phi > 0).
    """
    phi, psi = np.degrees(pp[..., 0]), np.degrees(pp[..., 1])
    out = np.where((psi > -120) & (psi < 50), 1, 0)
    return np.where(phi > 0, 2, out)


def _core_transitions(phi_deg: np.ndarray) -> int:
    """phi < 0 <-> phi > 0 transitions between cores (-180, -30) and (30, 130) deg."""
    n, side = 0, 0
    for v in phi_deg:
        s = -1 if v < -30 else (1 if 30 < v < 130 else 0)
        if s != 0:
            if side != 0 and s != side:
                n += 1
            side = s
    return n


def run_alanine(n_steps: int, seed: int) -> dict:
    import openmm
    import openmm.app as app
    import openmm.unit as u

    from sci_moe.sampling.md import build_system, phi_psi
    from sci_moe.sampling.tempering import OpenMMSimulatedTempering, OpenMMTemperingConfig

    top, system, pos = build_system(constraints="hbonds")
    n_frames = n_steps // ALA_STEPS_PER_FRAME
    out = {"n_steps": n_steps, "timestep_fs": 2.0, "frame_ps": ALA_STEPS_PER_FRAME * 0.002}

    # plain MD at 300 K: LangevinMiddle, 1/ps, 2 fs, H-bond constraints, Reference platform
    integ = openmm.LangevinMiddleIntegrator(ALA_T0 * u.kelvin, 1 / u.picosecond, 0.002)
    integ.setRandomNumberSeed(seed + 1)
    sim = app.Simulation(top, system, integ, openmm.Platform.getPlatformByName("Reference"))
    sim.context.setPositions(pos * u.nanometer)
    sim.minimizeEnergy()
    sim.context.setVelocitiesToTemperature(ALA_T0 * u.kelvin, seed + 1)
    frames = np.empty((n_frames, 22, 3), np.float32)
    t0 = time.perf_counter()
    for i in range(n_frames):
        integ.step(ALA_STEPS_PER_FRAME)
        st = sim.context.getState(positions=True)
        frames[i] = st.getPositions(asNumpy=True).value_in_unit(u.nanometer)
    wall = time.perf_counter() - t0
    pp = phi_psi(frames)
    lab = ala_states(pp)
    out["MD"] = _ala_summary(lab, np.ones(n_frames, bool), pp, wall)

    cfg = OpenMMTemperingConfig(
        min_temperature_k=ALA_T0,
        max_temperature_k=ALA_TMAX,
        n_temperatures=ALA_LEVELS,
        steps_per_iteration=ALA_STEPS_PER_FRAME,
        weights="sams",
        seed=seed,
    )
    stt = OpenMMSimulatedTempering.from_system(top, system, pos, cfg, platform="Reference")
    res = stt.run(n_frames, progress=False)
    pp = phi_psi(res.positions)
    lab = ala_states(pp)
    s = _ala_summary(lab, res.target_frames(), pp, res.wall_time)
    summ = res.summary()
    s["round_trips"] = summ["round_trips"]
    s["level_histogram"] = summ["level_histogram"].tolist()
    s["level_acceptance"] = summ["level_acceptance"].tolist()
    s["target_fraction"] = summ["target_fraction"]
    s["temperatures_k"] = res.temperatures_k.tolist()
    s["log_z_estimate"] = summ["log_z_estimate"].tolist()
    s["transitions_all_levels"] = _core_transitions(np.degrees(pp[:, 0]))
    out["ST"] = s
    return out


def _ala_summary(lab: np.ndarray, mask: np.ndarray, pp: np.ndarray, wall: float) -> dict:
    pops, ses = [], []
    for k in range(3):
        m, se = masked_mean((lab == k).astype(float)[:, None], mask[:, None])
        pops.append(m)
        ses.append(se)
    phi_t = np.degrees(pp[mask, 0])
    n_trans = _core_transitions(phi_t)
    # the ESS of the alpha_L indicator means something only if the sampler went there
    # and back at 300 K; otherwise its Sokal window measures wiggles inside one basin
    p = pops[2]
    ess = p * (1 - p) / ses[2] ** 2 if ses[2] > 0 and n_trans > 0 else None
    # running estimate of P(alpha_L) at the target temperature vs simulated time
    ind = (lab == 2).astype(float)
    cum = np.cumsum(ind * mask) / np.maximum(np.cumsum(mask), 1)
    checkpoints = np.unique(np.linspace(0, lab.size - 1, 21).astype(int))
    return {
        "populations": pops,
        "stderr": ses,
        "ess_alphaL": ess,
        "wall_s": float(wall),
        "ess_per_s": None if ess is None else float(ess / wall),
        "transitions_target": n_trans,
        "running_alphaL": [[int(c + 1), float(cum[c])] for c in checkpoints],
    }


def report_alanine(out: dict, rows: list[Row]) -> None:
    ns = out["n_steps"] * 2e-6
    table = []
    base = out["MD"]
    for who in ("MD", "ST"):
        r = out[who]
        s_ratio = None
        if who == "ST" and base["ess_per_s"] and r["ess_per_s"]:
            s_ratio = r["ess_per_s"] / base["ess_per_s"]
        t_ratio = None
        if who == "ST" and base["transitions_target"] > 0:
            t_ratio = r["transitions_target"] / base["transitions_target"]
        table.append(
            [
                who,
                "/".join(f"{v:.4f}" for v in r["populations"]),
                "/".join(f"{v:.4f}" for v in r["stderr"]),
                r["transitions_target"],
                r.get("transitions_all_levels"),
                r.get("round_trips"),
                r["wall_s"],
                "not mixed" if r["ess_per_s"] is None else r["ess_per_s"],
                s_ratio,
            ]
        )
        case = f"alanine-dipeptide 300K {who}"
        vs = "alanine-dipeptide 300K MD" if who == "ST" else None
        for k, name in enumerate(("beta", "alphaR", "alphaL")):
            rows.append(Row(case, f"population_{name}", r["populations"][k], "1"))
            rows.append(Row(case, f"population_{name}_stderr", r["stderr"][k], "1"))
        rows.append(
            Row(
                case,
                "phi_transitions_300K_per_ns",
                r["transitions_target"] / ns,
                "1/ns",
                vs,
                t_ratio,
            )
        )
        if r["ess_per_s"] is not None:  # only for a sampler that crossed at 300 K
            rows.append(Row(case, "ess_per_s_alphaL", r["ess_per_s"], "1/s", vs, s_ratio))
        rows.append(Row(case, "wall_time", r["wall_s"], "s"))
        if who == "ST":
            rows.append(Row(case, "round_trips", r["round_trips"], "1"))
            rows.append(
                Row(
                    case,
                    "phi_transitions_all_levels_per_ns",
                    r["transitions_all_levels"] / ns,
                    "1/ns",
                )
            )
            rows.append(Row(case, "target_level_fraction", r["target_fraction"], "1"))
    print_table(
        [
            "sampler",
            "P(beta)/P(aR)/P(aL)",
            "stderr",
            "phi trans 300K",
            "phi trans all",
            "trips",
            "wall s",
            "ESS/s aL",
            "x ESS/s",
        ],
        table,
        title=f"alanine dipeptide (amber99sbildn + OBC, H-bond constraints, 2 fs), {ns:g} ns "
        f"per sampler: plain MD at {ALA_T0:g} K vs OpenMM simulated tempering "
        f"{ALA_T0:g}-{ALA_TMAX:g} K ({ALA_LEVELS} levels, SAMS, Gibbs moves every "
        f"{ALA_STEPS_PER_FRAME} steps); populations at {ALA_T0:g} K; 'not mixed': no phi "
        "transition at 300 K, so no ESS",
    )
    st = out["ST"]
    print(
        "  ST level histogram "
        + " ".join(f"{v:.3f}" for v in st["level_histogram"])
        + "; min level acceptance "
        + f"{min(st['level_acceptance']):.2f}"
    )
    print("  running P(alpha_L) at 300 K (frames -> estimate):")
    for who in ("MD", "ST"):
        pts = out[who]["running_alphaL"]
        print(f"    {who}: " + ", ".join(f"{n}:{v:.3f}" for n, v in pts[:: max(1, len(pts) // 6)]))


def plot_extra(mb: dict, ala: dict | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncol = 2 if ala is not None else 1
    fig, axes = plt.subplots(1, ncol, figsize=(5 * ncol, 3.8), squeeze=False)
    ax = axes[0, 0]
    names = ("RWMH", "ST+RWMH", "MALA", "ST+MALA", "BAOAB", "ST+BAOAB")
    ax.bar(
        range(len(names)),
        [mb[n]["populations"][1] for n in names],
        yerr=[mb[n]["stderr"][1] for n in names],
        color=["C0", "C1"] * 3,
    )
    ax.axhline(mb["exact"][1], color="k", ls="--", label="exact")
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_yscale("log")
    ax.set_ylabel("P(state B)")
    ax.set_title(f"Muller-Brown, kT={MB_KT:g}")
    ax.legend(fontsize=8)
    if ala is not None:
        ax = axes[0, 1]
        frame_ns = ala["frame_ps"] / 1000
        for who, c in (("MD", "C0"), ("ST", "C1")):
            pts = np.array(ala[who]["running_alphaL"])
            ax.plot(pts[:, 0] * frame_ns, pts[:, 1], "o-", color=c, label=who)
        ax.set_xlabel("simulated time per sampler (ns)")
        ax.set_ylabel("running P(alpha_L) at 300 K")
        ax.set_title("alanine dipeptide")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0])
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument(
        "--theory",
        action="store_true",
        help="run only the issue-47 section (benchmarks/tempering/_tempering_theory.py): the "
        "restricted-gap decomposition vs exact gaps in D and d, TV vs log(1/eps), ST-MH vs "
        "MH over 5 seeds, with verdicts",
    )
    args = parser.parse_args(argv)
    setup(args)
    if args.theory:
        from _tempering_theory import main_theory

        return main_theory(args)
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
        muller_brown={"kT": MB_KT, "levels": MB_LEVELS, "beta_min": MB_BETA_MIN},
        alanine={
            "temperatures_k": [ALA_T0, ALA_TMAX],
            "levels": ALA_LEVELS,
            "steps": 50_000 if args.quick else ALA_STEPS,
            "platform": "Reference",
        },
    )
    print(
        f"tempering: torch {machine['torch']}, {machine['cpu']}, "
        f"{torch.get_num_threads()} threads, seed {args.seed}, git {machine['git']}"
    )
    other = OtherLoad()
    rows: list[Row] = []

    gaps = exact_gaps(Ds)
    report_gaps(gaps, rows)
    print()
    samp = {d: run_sampling(d, n_iter, args.seed) for d in (2, 10)}
    report_sampling(samp, n_iter, rows)
    print()
    mb_iter = 3000 if args.quick else 20000
    mb = run_muller_brown(mb_iter, args.seed)
    report_muller_brown(mb, mb_iter, rows)
    print()
    ala_steps = 50_000 if args.quick else ALA_STEPS
    ala = run_alanine(ala_steps, args.seed)
    report_alanine(ala, rows)

    if args.plots is not None:
        plot_gaps(gaps, args.plots / "tempering_gaps.png")
        plot_sampling(samp, args.plots / "tempering_sampling.png")
        plot_extra(mb, ala, args.plots / "tempering_mb_alanine.png")
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
