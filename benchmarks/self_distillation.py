"""Optimal multi-stage self-distillation: replica theory beside finite-N simulation.

Takanami, Takahashi and Sakata (NeurIPS 2025, arXiv:2501.16226), via
``sci_moe.theory.self_distillation``. For a noisy Gaussian mixture (label noise ``theta``,
``Delta = 1``) the script tunes ``{lambda_t, beta_t}`` of the final stage's test error
("optimal SD") for 0-SD (plain ridge), 1-SD and 2-SD with soft and hard pseudo-labels, for BCE
and MSE, over a grid of ``alpha``; reports the gain of SD over 0-SD, the effect of fixing the
bias under label imbalance, a finite-N simulation at each optimum (same model, fixed seeds) and
the solver time per curve.

Rows: ``error`` (theory), ``sim_error`` (mean over seeds), ``sim_z`` ((sim - theory) / s.e.),
``gain`` (0-SD error / SD error, ``vs`` = 0-SD, > 1 means SD helps), ``bias_fixing``
(learned-bias error / fixed-bias error, > 1 means fixing helps), ``solve_s``.
"""

from __future__ import annotations

import dataclasses
import time

from _common import Row, base_parser, machine_info, print_table, setup, write_json

from sci_moe.theory.self_distillation import (
    SelfDistillationModel,
    SolverConfig,
    optimize_sd,
    simulate,
)

BENCHMARK = "self_distillation"


def variants(quick: bool):
    """(label, n_stages, hard_labels) of the SD variants."""
    out = [("0-SD", 1, False), ("1-SD hard", 2, True), ("1-SD soft", 2, False)]
    out.append(("2-SD hard", 3, True))
    if not quick:
        out.append(("2-SD soft", 3, False))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0])
    parser.add_argument("--theta", type=float, default=0.2, help="label noise (default 0.2)")
    args = parser.parse_args(argv)
    setup(args)
    quick = args.quick
    alphas = [0.5, 1.0, 2.0] if quick else [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
    losses = ["bce", "mse"]
    n_features, seeds = (400, range(4)) if quick else (1000, range(10))
    seeds = [args.seed + s for s in seeds]
    config = SolverConfig(n_samples=4000 if quick else 10_000, seed=args.seed)
    maxiter = 40 if quick else 300
    n_scan = 4 if quick else 8
    machine = machine_info(seed=args.seed, quick=quick, n_features=n_features, seeds=len(seeds))
    print(
        f"self_distillation: theta={args.theta}, alphas={alphas}, N={n_features}, "
        f"{len(seeds)} seeds from {args.seed}, git {machine['git']}"
    )
    rows: list[Row] = []
    table = []
    for loss in losses:
        base = SelfDistillationModel(alpha=1.0, theta=args.theta, loss=loss, learn_bias=False)
        for label, n_stages, hard in variants(quick):
            t0 = time.perf_counter()
            opts = []
            for alpha in alphas:
                model = dataclasses.replace(base, alpha=alpha)
                opts.append(
                    optimize_sd(
                        model,
                        n_stages,
                        hard_labels=hard,
                        config=config,
                        maxiter=maxiter,
                        n_scan=n_scan,
                    )
                )
            solve_s = time.perf_counter() - t0
            rows.append(Row(f"{loss} {label}", "solve_s", solve_s, "s"))
            for alpha, opt in zip(alphas, opts, strict=True):
                case = f"{loss} {label} alpha={alpha:g}"
                model = dataclasses.replace(base, alpha=alpha)
                sim = simulate(model, opt.lambdas, opt.betas, n_features=n_features, seeds=seeds)
                s_mean, s_sem = float(sim.mean[-1]), float(sim.sem[-1])
                z = (s_mean - opt.error) / s_sem if s_sem > 0 else float("nan")
                rows.append(Row(case, "error", opt.error, "1"))
                rows.append(Row(case, "sim_error", s_mean, "1"))
                rows.append(Row(case, "sim_z", z, "se"))
                gain = None
                if n_stages > 1:
                    ref = next(
                        r.value
                        for r in rows
                        if r.case == f"{loss} 0-SD alpha={alpha:g}" and r.metric == "error"
                    )
                    gain = ref / opt.error
                    rows.append(Row(case, "gain", gain, "1", f"{loss} 0-SD", gain))
                table.append(
                    [
                        loss,
                        label,
                        alpha,
                        opt.error,
                        s_mean,
                        s_sem,
                        z,
                        gain,
                        " ".join(f"{v:.3g}" for v in opt.lambdas),
                        " ".join(f"{v:.3g}" for v in opt.betas),
                    ]
                )
            print(f"  {loss} {label}: {solve_s:.1f} s", flush=True)
    print_table(
        ["loss", "SD", "alpha", "theory", "sim", "sim s.e.", "z", "gain", "lambdas", "betas"],
        table,
        title=f"optimal SD errors (theory beside N={n_features} simulation)",
    )
    # bias fixing under label imbalance
    bias_table = []
    alpha_b = 1.0
    for loss in losses:
        for label, n_stages, hard in [("0-SD", 1, False), ("1-SD hard", 2, True)]:
            errs = {}
            for learn in (True, False):
                model = SelfDistillationModel(
                    alpha=alpha_b, theta=args.theta, rho=0.3, loss=loss, learn_bias=learn
                )
                opt = optimize_sd(
                    model,
                    n_stages,
                    hard_labels=hard,
                    config=config,
                    maxiter=maxiter,
                    n_scan=n_scan,
                )
                errs[learn] = opt.error
            ratio = errs[True] / errs[False]
            case = f"{loss} {label} rho=0.3 alpha={alpha_b:g}"
            rows.append(Row(case, "error_learned_bias", errs[True], "1"))
            rows.append(Row(case, "error_fixed_bias", errs[False], "1"))
            rows.append(Row(case, "bias_fixing", ratio, "1", "learned bias", ratio))
            bias_table.append([loss, label, errs[True], errs[False], ratio])
    print()
    print_table(
        ["loss", "SD", "learned b", "fixed b", "learned / fixed"],
        bias_table,
        title=f"bias fixing under imbalance (rho = 0.3, alpha = {alpha_b:g})",
    )
    if args.json is not None:
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
