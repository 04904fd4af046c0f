"""Part 3 of ``run.py``: local kernels alone vs inside simulated tempering on Muller-Brown.

:func:`run_muller_brown` runs RWMH, MALA and BAOAB with and without tempering at
``kT = 10`` and compares the Voronoi-state populations with the exact ones
(:func:`mb_exact_populations`, grid quadrature); :func:`report_muller_brown` prints the
table and appends the rows. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _common import Row, print_table

from sci_moe.sampling.tempering import (
    RWMH,
    SimulatedTempering,
    TemperingConfig,
    masked_mean,
    round_trips,
    sample,
)
from sci_moe.sampling.tempering import geometric_ladder as torch_ladder

__all__ = [
    "MB_BETA_MIN",
    "MB_BURN_IN",
    "MB_CHAINS",
    "MB_KT",
    "MB_LEVELS",
    "MB_MINIMA",
    "MB_STATES",
    "mb_exact_populations",
    "mb_state",
    "report_muller_brown",
    "run_muller_brown",
]


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
