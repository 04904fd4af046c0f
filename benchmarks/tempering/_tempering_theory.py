"""Issue 47, item 1: the restricted-gap decomposition for simulated tempering, decided.

Run through ``python benchmarks/tempering/run.py --theory [--quick] [--json PATH] [--plots DIR]``
(this module holds the section; ``tempering.py`` only dispatches to it).

(a) **Exact gaps vs the decomposition.** Two-mode mixture ``0.5 N(-D/2 e_1, I) +
0.5 N(D/2 e_1, I)`` in ``d`` dimensions on one grid rule for every ``d`` (step ``H = 1``,
padded by ``PAD = 2.5``), grid RWMH (proposal scale 1, level ``i`` scale ``1/sqrt(beta_i)``)
and the ST chain of :func:`simulated_tempering_chain` (geometric ladder from ``1/D^2``,
``ceil(2 ln D) + 2`` levels, exact level weights, power tempering). For every ``(d, D)``:
the exact spectral gap of ST and of plain RWMH (MH), the exact restricted gap of ST on
``Omega0 = {(i, x): |x| <= D/2 + 2}`` (``Gap(P^0) / pi(Omega0)``, the identity proved in
:func:`st_decomposition`), and the decomposition bound of
:func:`tempering_decomposition` on ``Omega0`` and on the whole space (component kernels:
the level's RWMH proposal targeting the component; in 1-D also the generic restriction of
the local kernel). Exact eigenvalues:
dense up to 2500 states, deflated ``eigsh`` above (validated against dense on one case);
the restricted gap is validated against :func:`restricted_spectral_gap` where it is
small enough. A finer 1-D grid (``h = 0.25``, pad 5) checks that the grid does not drive
the D-scaling.

(b) **log(1/eps).** Exact total variation of the ST chain from a point mass at the minor
mode's centre at ``beta = 1`` (matrix powers), the first step ``t(eps)`` below
``eps = 1e-1 .. 1e-8``, a straight-line fit of ``t`` against ``log(1/eps)``.

(c) **Simulation** (the paper's ST-MH vs MH): ``0.3 N(-4 e_1, I) + 0.7 N(4 e_1, I)`` in
``d = 2`` and ``4``, 32 chains started alternately at the two centres, RWMH scale
``2.38 / sqrt(d)`` alone or inside ST (SAMS weights learned online, geometric ladder from
``1/64``), the same number of iterations, the first fifth discarded, 5 seeds. Metric: the
absolute error of the mode weight ``P(x_1 > 0) = 0.7``.

Fits: ``log y`` against ``log D`` (polynomial), ``D`` (exponential) and ``D^2`` (Gaussian)
over ``D >= 4``, the best by residual sum of squares; against ``d``: ``d`` (exponential)
vs ``log d``.
Verdict rules: :func:`verdicts` (one entry per claim of the abstract, plus the simulation).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _common import Row, print_table
from _tempering_exact import (
    FINE_H,
    FINE_PAD,
    MARGIN,
    PAD,
    STEP,
    H,
    gap_case,
    scaling,
    tv_case,
    validate_solvers,
)
from _tempering_heavy import HEAVY, heavy_case, heavy_fit, plot_heavy
from _tempering_stsim import SIM_D, sim_run
from _tempering_theory_verdicts import verdicts


def settings(quick: bool) -> dict:
    if quick:
        return {"Ds": [2.0, 4.0, 6.0], "dims": [1, 2, 3], "d4_max": 0, "sim_iter": 3000,
                "seeds": [0, 1, 2, 3, 4], "sim_dims": [2]}  # fmt: skip
    return {"Ds": [2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0], "dims": [1, 2, 3, 4], "d4_max": 8.0,
            "sim_iter": 20000, "seeds": [0, 1, 2, 3, 4], "sim_dims": [2, 4]}  # fmt: skip


# --------------------------------------------------------------------------- report


def plot(cases: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = sorted({c["d"] for c in cases if c["h"] == H})
    fig, axes = plt.subplots(1, len(dims), figsize=(3.4 * len(dims), 3.4), sharey=True)
    for ax, d in zip(np.atleast_1d(axes), dims, strict=True):
        cs = sorted((c for c in cases if c["d"] == d and c["h"] == H), key=lambda c: c["D"])
        D = [c["D"] for c in cs]
        ax.loglog(D, [c["rgap_st"] for c in cs], "s-", label="ST restricted gap (exact)")
        ax.loglog(D, [c["gap_st"] for c in cs], "s:", label="ST gap (exact)", alpha=0.6)
        ax.loglog(D, [c["bound"] for c in cs], "d--", label="decomposition bound")
        ax.loglog(D, [c["gap_mh"] for c in cs], "o-", label="MH gap (exact)")
        ax.set_title(f"d = {d}")
        ax.set_xlabel("separation D")
        ax.set_xticks(D, [f"{x:g}" for x in D])
        ax.minorticks_off()
    np.atleast_1d(axes)[0].set_ylabel("gap")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_theory(quick: bool, plots: Path | None) -> tuple[list[Row], list[dict], dict]:
    """Run (a)-(d); returns the rows, the verdicts and the details for the JSON."""
    s = settings(quick)
    rows: list[Row] = []
    print("(a) exact gaps vs the decomposition bound", flush=True)
    cases = []
    for d in s["dims"]:
        for D in s["Ds"]:
            if d == 4 and D > s["d4_max"]:
                continue
            cases.append(gap_case(d, D))
    fine = [gap_case(1, D, FINE_H, FINE_PAD) for D in s["Ds"]]
    val = validate_solvers() if not quick else None
    if val:
        print(f"  solver check {val}", flush=True)
    table = []
    for c in cases + fine:
        case = f"d={c['d']} D={c['D']:g} h={c['h']:g}"
        table.append(
            [case, c["levels"], c["states"], c["gap_mh"], c["gap_st"], c["rgap_st"], c["bound"],
             c["bound"] / c["rgap_st"], c["gap_projection"], c["min_component_gap"]]
        )  # fmt: skip
        rows += [
            Row(f"{case} MH", "spectral_gap", c["gap_mh"], "1"),
            Row(f"{case} ST", "spectral_gap", c["gap_st"], "1", f"{case} MH",
                c["gap_st"] / c["gap_mh"]),
            Row(f"{case} ST", "restricted_gap", c["rgap_st"], "1"),
            Row(f"{case} ST", "st_bound", c["bound"], "1", f"{case} ST", c["bound"] / c["rgap_st"]),
            Row(f"{case} ST", "st_bound_full_space", c["bound_full"], "1"),
            *([Row(f"{case} ST", "st_bound_restriction_kernel", c["bound_restriction_kernel"], "1")]
              if c["bound_restriction_kernel"] is not None else []),
            Row(f"{case} ST", "projection_gap", c["gap_projection"], "1"),
            Row(f"{case} ST", "min_component_gap", c["min_component_gap"], "1"),
        ]  # fmt: skip
    print_table(
        [
            "case",
            "L",
            "states",
            "gap MH",
            "gap ST",
            "rgap ST",
            "bound",
            "bound/rgap",
            "gbar",
            "lam",
        ],
        table,
        title="exact gaps and the restricted-gap decomposition bound (Omega0: |x| <= D/2 + 2)",
    )
    sc = scaling(cases)
    sc_fine = scaling(fine)
    for d, f in sc["D"].items():
        for q, r in f.items():
            print(f"  fit in D, d={d}, {q}: best {r['best']}, " + ", ".join(
                f"{k} slope {r[k]['slope']:.3g}" for k in ("poly", "exp", "gauss")))  # fmt: skip
            rows.append(Row(f"fit D d={d} {q}", "loglog_slope", r["poly"]["slope"], "1"))
            rows.append(Row(f"fit D d={d} {q}", "log_slope_per_D2", r["gauss"]["slope"], "1"))
    for D, f in sc["d"].items():
        for q, r in f.items():
            print(f"  fit in d, D={D:g}, {q}: best {r['best']}, exp slope {r['exp']['slope']:.3g},"
                  f" poly slope {r['poly']['slope']:.3g}")  # fmt: skip
            rows.append(Row(f"fit d D={D:g} {q}", "log_slope_per_d", r["exp"]["slope"], "1"))
    print("(b) TV vs log(1/eps)", flush=True)
    tvs = [tv_case(8.0 if not quick else 6.0, 1), tv_case(6.0, 2)]
    for t in tvs:
        print(f"  d={t['d']} D={t['D']:g}: t(eps) {t['t_eps']}, slope {t['slope']:.4g} "
              f"(1/gap_abs {t['theory_slope']:.4g}), R^2 {t['r2']:.5f}")  # fmt: skip
        rows.append(Row(f"tv d={t['d']} D={t['D']:g} ST", "steps_per_log_inv_eps", t["slope"],
                        "steps", None, None))  # fmt: skip
    print("(c) simulation, 5 seeds", flush=True)
    sims = []
    for d in s["sim_dims"]:
        for seed in s["seeds"]:
            r = sim_run(d, s["sim_iter"], seed)
            print(f"  d={d} seed={seed}: |err| MH {r['err_mh']:.4f} (se {r['se_mh']:.4f}), "
                  f"ST {r['err_st']:.4f} (se {r['se_st']:.4f})", flush=True)  # fmt: skip
            sims.append(r)
        for who in ("mh", "st"):
            vals = [r[f"err_{who}"] for r in sims if r["d"] == d]
            rows.append(Row(f"sim d={d} D={SIM_D:g} {who.upper()}", "mode_weight_abs_error_mean",
                            float(np.mean(vals)), "1"))  # fmt: skip
    print("(d) heavy tails: the full gap degenerates, the restricted one does not", flush=True)
    heavy = [heavy_case(pad) for pad in (HEAVY["quick_pads"] if quick else HEAVY["pads"])]
    hfit = heavy_fit(heavy)
    for c in heavy:
        case = f"heavy pad={c['pad']:g}"
        print(f"  pad {c['pad']:g} ({c['states']} states): full gap {c['full_gap']:.3e}, "
              f"restricted gap {c['restricted_gap']:.3e}, bound {c['bound']:.3e}, "
              f"full-space bound {c['bound_full']:.3e}", flush=True)  # fmt: skip
        rows += [
            Row(f"{case} ST", "spectral_gap", c["full_gap"], "1"),
            Row(f"{case} ST", "restricted_gap", c["restricted_gap"], "1"),
            Row(f"{case} ST", "st_bound", c["bound"], "1", f"{case} ST",
                c["bound"] / c["restricted_gap"]),
            Row(f"{case} ST", "st_bound_full_space", c["bound_full"], "1"),
        ]  # fmt: skip
    for q, r in hfit.items():
        rows.append(Row(f"heavy fit {q}", "loglog_slope_in_pad", r["slope"], "1"))
        rows.append(Row(f"heavy fit {q}", "fall_over_sweep", r["fall"], "x"))
    ver = verdicts(cases, sc, tvs, sims, s["sim_dims"], heavy=(heavy, hfit))
    for v in ver:
        print(f"  VERDICT {v['verdict']:>12} decisive={v['decisive']}: {v['claim']}")
    if plots is not None:
        plot(cases, plots / "tempering_theory_gaps.png")
        plot_heavy(heavy, plots / "tempering_theory_heavy.png")
    details = {
        "settings": {**s, "h": H, "pad": PAD, "step": STEP, "omega0_margin": MARGIN},
        "cases": cases,
        "fine_1d": fine,
        "fits": _jsonable(sc),
        "fits_fine_1d": _jsonable(sc_fine),
        "solver_check": val,
        "tv": tvs,
        "simulation": sims,
        "heavy": {"settings": _jsonable(dict(HEAVY)), "cases": heavy, "fit": hfit},
    }
    return rows, ver, details


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    return o


def main_theory(args) -> int:
    """``tempering.py --theory``: run, print, write the JSON (with ``verdicts``) and plot."""
    from _common import OtherLoad, machine_info, verdict_entry, write_json_doc

    other = OtherLoad()
    t0 = time.perf_counter()
    machine = machine_info(seed=args.seed, quick=args.quick, section="theory (issue 47)")
    print(f"tempering --theory: {machine['cpu']}, seed {args.seed}, git {machine['git']}")
    rows, ver, details = run_theory(args.quick, args.plots)
    machine["contention"] = other.report()
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.json is not None:
        doc = {
            "benchmark": "tempering_theory",
            "machine": machine,
            "rows": [r.__dict__ for r in rows],
            "verdicts": [verdict_entry(**v) for v in ver],
            "details": details,
        }
        write_json_doc(args.json, doc)
        print(f"wrote {args.json}")
    return 0
