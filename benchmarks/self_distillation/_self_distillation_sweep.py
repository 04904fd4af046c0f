"""The theory sweeps of ``run.py``: optimal SD over alpha, and bias fixing under imbalance.

:func:`run_optimal` tunes the hyper-parameters of every variant of :data:`VARIANTS` on
the replica theory over a grid of ``alpha`` and simulates each optimum at finite N;
:func:`run_bias` compares a learned with a fixed bias at ``rho = 0.3``. Both append rows
and print their tables. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
from _common import (
    Row,
    print_table,
)
from _self_distillation_paired import seed_rows

from sci_moe.theory.self_distillation import (
    SelfDistillationModel,
    optimize_sd,
    simulate,
    solve_multistage,
)

__all__ = [
    "VARIANTS",
    "beta_u",
    "run_bias",
    "run_optimal",
    "warm_start",
]


VARIANTS = [("0-SD", 1, False), ("1-SD hard", 2, True), ("1-SD soft", 2, False)]
VARIANTS += [("2-SD hard", 3, True), ("2-SD soft", 3, False)]


def beta_u(opt, delta: float) -> float | None:
    """beta_1 times the spread sqrt(m^2 + Delta Q) of the first teacher's outputs (soft)."""
    if not opt.betas or math.isinf(opt.betas[0]):
        return None
    s = opt.result.stages[0]
    return float(opt.betas[0] * math.sqrt(s.m**2 + delta * s.Q))


def warm_start(prev, n_stages: int, hard: bool) -> list[float] | None:
    """x0 for T stages from the optimum of T - 1 stages (last lambda and beta repeated)."""
    if prev is None:
        return None
    lams = [*np.log10(prev.lambdas), math.log10(prev.lambdas[-1])]
    if hard:
        return [float(v) for v in lams]
    betas = [*np.log10(prev.betas), math.log10(prev.betas[-1])]
    return [float(v) for v in lams + betas]


def run_optimal(args, rows, quick, config_opt, config_final, n_features, seeds):
    alphas = [0.5, 2.0] if quick else [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
    maxiter = 30 if quick else 50
    n_scan = 4 if quick else 5
    table, diff_table = [], []
    for loss in ("bce", "mse"):
        base = SelfDistillationModel(
            alpha=1.0, theta=args.theta, delta=args.delta, loss=loss, learn_bias=False
        )
        best = {}  # (label, alpha) -> (OptimalSD, sim)
        for label, n_stages, hard in VARIANTS:
            t0 = time.perf_counter()
            for alpha in alphas:
                model = dataclasses.replace(base, alpha=alpha)
                prev = None
                if n_stages == 3:
                    prev = best[(f"1-SD {'hard' if hard else 'soft'}", alpha)][0]
                opt = optimize_sd(
                    model,
                    n_stages,
                    hard_labels=hard,
                    x0=warm_start(prev, n_stages, hard),
                    log10_beta_bounds=(-1.0, 3.0),
                    config=config_opt,
                    maxiter=maxiter,
                    n_scan=n_scan,
                )
                final = solve_multistage(model, opt.lambdas, opt.betas, config=config_final)
                opt = dataclasses.replace(opt, error=final.error, result=final)
                best[(label, alpha)] = (opt, None)
            solve_s = time.perf_counter() - t0
            rows.append(Row(f"{loss} {label}", "solve_s", solve_s, "s"))
            print(f"  {loss} {label}: {solve_s:.1f} s for {len(alphas)} alphas", flush=True)
            for alpha in alphas:
                opt = best[(label, alpha)][0]
                model = dataclasses.replace(base, alpha=alpha)
                sim = simulate(model, opt.lambdas, opt.betas, n_features=n_features, seeds=seeds)
                best[(label, alpha)] = (opt, sim)
                s_mean, s_sem = float(sim.mean[-1]), float(sim.sem[-1])
                z = (s_mean - opt.error) / s_sem if s_sem > 0 else float("nan")
                case = f"{loss} {label} alpha={alpha:g}"
                rows.append(Row(case, "error", opt.error, "1"))
                rows.append(Row(case, "sim_error", s_mean, "1"))
                rows.append(Row(case, "sim_sem", s_sem, "1"))
                rows.append(Row(case, "sim_z", z, "se"))
                rows += seed_rows(case, seeds, sim.errors[:, -1])
                rows.append(Row(case, "n_failed", opt.n_failed, "1"))
                for i, lam in enumerate(opt.lambdas):
                    rows.append(Row(case, f"lambda_{i}", lam, "1"))
                for i, b in enumerate(opt.betas):
                    if math.isfinite(b):
                        rows.append(Row(case, f"beta_{i}", b, "1"))
                bu = beta_u(opt, args.delta)
                if bu is not None:
                    rows.append(Row(case, "beta_u", bu, "1"))
                gain = None
                if n_stages > 1:
                    ref = best[("0-SD", alpha)][0].error
                    gain = ref / opt.error
                    rows.append(Row(case, "gain", gain, "1", f"{loss} 0-SD", gain))
                table.append(
                    [
                        loss,
                        label,
                        alpha,
                        f"{opt.error:.4f}",
                        f"{s_mean:.4f}",
                        f"{s_sem:.4f}",
                        f"{z:+.2f}",
                        None if gain is None else f"{gain:.3f}",
                        " ".join(f"{v:.3g}" for v in opt.lambdas),
                        " ".join(f"{v:.3g}" for v in opt.betas),
                        None if bu is None else f"{bu:.3g}",
                    ]
                )
        # soft minus hard at 1-SD and 2-SD: theory, and paired over the simulation seeds
        for k in ("1-SD", "2-SD"):
            for alpha in alphas:
                (soft, s_sim), (hard, h_sim) = (
                    best[(f"{k} soft", alpha)],
                    best[(f"{k} hard", alpha)],
                )
                d = s_sim.errors[:, -1] - h_sim.errors[:, -1]
                d_sem = float(d.std(ddof=1) / math.sqrt(len(d)))
                case = f"{loss} {k} alpha={alpha:g}"
                rows.append(Row(case, "soft_minus_hard", soft.error - hard.error, "1"))
                rows.append(Row(case, "sim_soft_minus_hard", float(d.mean()), "1"))
                rows.append(Row(case, "sim_soft_minus_hard_sem", d_sem, "1"))
                diff_table.append(
                    [
                        loss,
                        k,
                        alpha,
                        f"{soft.error - hard.error:+.4f}",
                        f"{d.mean():+.4f}",
                        f"{d_sem:.4f}",
                    ]
                )
    print_table(
        [
            "loss",
            "SD",
            "alpha",
            "theory",
            "sim",
            "sim s.e.",
            "z",
            "gain",
            "lambdas",
            "betas",
            "b*u",
        ],
        table,
        title=(
            f"optimal SD errors, theta={args.theta}, Delta={args.delta}, rho=0.5, bias fixed "
            f"(theory beside N={n_features} simulation, {len(seeds)} seeds)"
        ),
    )
    print()
    print_table(
        ["loss", "SD", "alpha", "theory", "sim (paired)", "sim s.e."],
        diff_table,
        title="soft minus hard pseudo-labels (< 0: soft better)",
    )


def run_bias(args, rows, quick, config_opt, config_final, n_features, seeds):
    alphas = [0.5, 4.0] if quick else [0.5, 1.0, 2.0, 4.0]
    rho = 0.3
    maxiter = 30 if quick else 40
    n_scan = 4 if quick else 5
    table = []
    for loss in ("bce", "mse"):
        for label, n_stages, hard in [("0-SD", 1, False), ("1-SD hard", 2, True)]:
            for alpha in alphas:
                errs, sims = {}, {}
                for learn in (True, False):
                    model = SelfDistillationModel(
                        alpha=alpha,
                        theta=args.theta,
                        delta=args.delta,
                        rho=rho,
                        loss=loss,
                        learn_bias=learn,
                    )
                    opt = optimize_sd(
                        model,
                        n_stages,
                        hard_labels=hard,
                        config=config_opt,
                        maxiter=maxiter,
                        n_scan=n_scan,
                    )
                    final = solve_multistage(model, opt.lambdas, opt.betas, config=config_final)
                    sim = simulate(
                        model, opt.lambdas, opt.betas, n_features=n_features, seeds=seeds
                    )
                    errs[learn], sims[learn] = final, sim
                    kind = "learned" if learn else "fixed"
                    case = f"{loss} {label} rho={rho} alpha={alpha:g} {kind}"
                    rows.append(Row(case, "error", final.error, "1"))
                    rows.append(Row(case, "sim_error", float(sim.mean[-1]), "1"))
                    rows.append(Row(case, "sim_sem", float(sim.sem[-1]), "1"))
                    rows.append(Row(case, "bias", final.stages[-1].b, "1"))
                    for i, lam in enumerate(opt.lambdas):
                        rows.append(Row(case, f"lambda_{i}", lam, "1"))
                ratio = errs[True].error / errs[False].error
                case = f"{loss} {label} rho={rho} alpha={alpha:g}"
                rows.append(Row(case, "bias_fixing", ratio, "1", "learned bias", ratio))
                table.append(
                    [
                        loss,
                        label,
                        alpha,
                        f"{errs[True].error:.4f}",
                        f"{sims[True].mean[-1]:.4f}",
                        f"{errs[False].error:.4f}",
                        f"{sims[False].mean[-1]:.4f}",
                        f"{ratio:.3f}",
                        f"{errs[True].stages[-1].b:+.3f}",
                    ]
                )
    print()
    print_table(
        ["loss", "SD", "alpha", "learned", "(sim)", "fixed", "(sim)", "learned/fixed", "b"],
        table,
        title=f"bias fixing under imbalance (rho = {rho}, theta = {args.theta}, bias-fixed B = 0)",
    )
