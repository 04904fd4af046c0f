"""FAME function-on-function regression: forced oscillator (exact truth) and El Nino SST.

Part 1, **forced oscillator** (:func:`sci_moe.functional.make_oscillator_data`):
``y'' + 2 zeta omega0 y' + omega0^2 (1 + x2/2) y = x1`` on ``[0, 10]`` (zeta 0.3,
omega0 1.5), exact responses by scipy ``solve_ivp`` (DOP853, rtol 1e-9) on 50 output
points; each input function observed at a random 30-70 % of a 100-point grid. For every
training-set size ``N`` and seed (training data seed ``100 + seed``, test data seed
10000, model seed ``seed``): FAME with ``K = 1, 3, 5`` expert vector fields, the B-spline
functional linear model (FLM), a grid MLP and a GRU on the observations are trained once,
then evaluated on the same test functions re-observed at 30 %, 50 %, 70 % and 100 % of
the grid. Metric: relative L2 error ``||Y_hat - Y|| / ||Y||`` averaged over test curves,
mean (and sd) over seeds; training time in seconds. FAME ``K > 1`` rows carry the ratio
``error(K = 1) / error(K)``; FAME ``K = 1`` rows ``error(best baseline) / error`` (> 1:
FAME better).

Part 2, **El Nino** (:func:`sci_moe.data.elnino.elnino_next_year`): predict next year's
monthly Nino 1+2 SST curve from this year's; chronological split (input years 1950-1994
train, 1995-2009 test); test inputs fully observed and 50 % observed. Extra baselines:
climatology (training mean curve) and persistence (next year = this year, full inputs).

FAME settings (``--quick`` / full): encoder hidden 8 / 16, expert width 8 / 16, attention
and decoder width 8 / 16, quadrature 9 / 17 nodes, rk4 with one step per node interval,
natural cubic spline paths, Adam 1e-2 with cosine decay, batch 20 / 32, 15 / 60 steps
(oscillator) and 40 / 150 steps (El Nino). Sizes ``N``: 60 / (100, 200) (``K = 5`` only at
the smallest ``N`` in the full run), test curves 40 / 60.

Run: ``python benchmarks/fame.py [--quick] [--json PATH] [--seed 0] [--plots DIR]
[--threads N]`` (``--seed`` offsets the three seeds). Needs ``sci-moe[functional]``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from _common import OtherLoad, Row, base_parser, finish, machine_info, print_table, setup

from sci_moe.data.elnino import ELNINO_DOMAIN, ELNINO_MONTHS, elnino_next_year
from sci_moe.functional import (
    FunctionalLinearModel,
    FunctionOnFunctionRegressor,
    GridMLP,
    ObservationGRU,
    make_oscillator_data,
    relative_l2,
    subsample,
)

BENCHMARK = "fame"
DENSITIES = (0.3, 0.5, 0.7, 1.0)
BASELINES = ("FLM", "GridMLP", "GRU")


def fame_kwargs(quick: bool) -> dict:
    w = 8 if quick else 16
    return dict(
        hidden=w,
        expert_hidden=w,
        attention_dim=w,
        decoder_hidden=w,
        num_quadrature=9 if quick else 17,
        lr=1e-2,
        batch_size=20 if quick else 32,
        progress=False,
    )


def make_models(quick: bool, seed: int, Ks, steps: int, domain=None) -> dict:
    models = {
        f"FAME K={K}": FunctionOnFunctionRegressor(
            num_experts=K, steps=steps, seed=seed, domain=domain, **fame_kwargs(quick)
        )
        for K in Ks
    }
    models["FLM"] = FunctionalLinearModel(seed=seed, domain=domain)
    models["GridMLP"] = GridMLP(steps=300 if quick else 1000, seed=seed, domain=domain)
    models["GRU"] = ObservationGRU(steps=40 if quick else 150, seed=seed, domain=domain)
    return models


def run_oscillator(quick: bool, seed0: int) -> dict:
    sizes = (60,) if quick else (100, 200)
    n_test = 40 if quick else 60
    steps = 15 if quick else 60
    test = make_oscillator_data(n_test, seed=10_000)
    err, fit_s, entropy = {}, {}, {}
    for N in sizes:
        Ks = (1, 3, 5) if (quick or N == sizes[0]) else (1, 3)
        for s in range(3):
            seed = seed0 + s
            train = make_oscillator_data(N, seed=100 + seed)
            rng = np.random.default_rng(seed)
            views = {f: subsample(test.functions, test.grid, f, rng) for f in DENSITIES}
            for name, model in make_models(quick, seed, Ks, steps).items():
                torch.manual_seed(seed)
                model.fit(train.inputs, train.output_pairs())
                fit_s.setdefault((N, name), []).append(model.fit_seconds)
                for f, inputs in views.items():
                    pred = model.predict(inputs, test.output_times)
                    err.setdefault((N, f, name), []).append(relative_l2(pred, test.outputs))
                if name.startswith("FAME") and not name.endswith("K=1"):
                    pi = model.mixture_weights(views[0.5])
                    h = -(pi * np.log(np.clip(pi, 1e-12, None))).sum(-1).mean()
                    entropy.setdefault((N, name), []).append(float(h))
                print(
                    f"  N={N} seed={seed} {name:10s} fit {model.fit_seconds:6.1f} s  "
                    f"rel L2 @50% {err[(N, 0.5, name)][-1]:.3f}",
                    flush=True,
                )
    return {"sizes": sizes, "err": err, "fit_s": fit_s, "entropy": entropy, "steps": steps}


def _best_baseline(err: dict, key_prefix: tuple) -> tuple[str, float]:
    vals = {b: float(np.mean(err[(*key_prefix, b)])) for b in BASELINES}
    best = min(vals, key=vals.get)
    return best, vals[best]


def report_oscillator(res: dict, rows: list[Row]) -> None:
    err = res["err"]
    for N in res["sizes"]:
        names = sorted({k[2] for k in err if k[0] == N}, key=lambda n: (not n[0] == "F", n))
        names = [n for n in names if n.startswith("FAME")] + list(BASELINES)
        table = []
        for name in names:
            cells = [name]
            for f in DENSITIES:
                e = err[(N, f, name)]
                mean, sd = float(np.mean(e)), float(np.std(e))
                cells.append(f"{mean:.3f} ± {sd:.3f}")
                vs, ratio = None, None
                if name == "FAME K=1":
                    vs, base = _best_baseline(err, (N, f))
                    ratio = base / mean
                elif name.startswith("FAME"):
                    vs = "FAME K=1"
                    ratio = float(np.mean(err[(N, f, vs)])) / mean
                case = f"oscillator N={N} observed={f:.0%} {name}"
                rows.append(Row(case, "relative_l2", mean, "", vs, ratio))
                rows.append(Row(case, "relative_l2_sd", sd, ""))
            fit = float(np.mean(res["fit_s"][(N, name)]))
            cells.append(f"{fit:.1f}")
            rows.append(Row(f"oscillator N={N} {name}", "fit_seconds", fit, "s"))
            if (N, name) in res["entropy"]:
                h = float(np.mean(res["entropy"][(N, name)]))
                rows.append(Row(f"oscillator N={N} {name}", "mixture_entropy", h, "nats"))
            table.append(cells)
        heads = ["model", *(f"rel L2 @{f:.0%}" for f in DENSITIES), "fit s"]
        print_table(heads, table, title=f"forced oscillator, N = {N} (mean ± sd over 3 seeds)")
        print()


def run_elnino(quick: bool, seed0: int) -> dict:
    steps = 40 if quick else 150
    X, Y, years, targets = elnino_next_year()
    Xh, *_ = elnino_next_year(observed=0.5, seed=seed0)
    train = years <= 1994
    tr = np.flatnonzero(train)
    te = np.flatnonzero(~train)
    Xtr, Ytr = [X[i] for i in tr], [Y[i] for i in tr]
    views = {"full": [X[i] for i in te], "50%": [Xh[i] for i in te]}
    truth = targets[te]
    err, fit_s = {}, {}
    clim = np.mean([Y[i][1] for i in tr], axis=0)
    err[("full", "climatology")] = [relative_l2(np.tile(clim, (len(te), 1)), truth)]
    persist = np.array([X[i][0][1] for i in te])
    err[("full", "persistence")] = [relative_l2(persist, truth)]
    for s in range(3):
        seed = seed0 + s
        for name, model in make_models(quick, seed, (1, 3, 5), steps, ELNINO_DOMAIN).items():
            torch.manual_seed(seed)
            model.fit(Xtr, Ytr)
            fit_s.setdefault(name, []).append(model.fit_seconds)
            for v, inputs in views.items():
                pred = model.predict(inputs, ELNINO_MONTHS)
                err.setdefault((v, name), []).append(relative_l2(pred, truth))
        print(f"  El Nino seed={seed} done", flush=True)
    return {"err": err, "fit_s": fit_s, "steps": steps, "n_train": len(tr), "n_test": len(te)}


def report_elnino(res: dict, rows: list[Row]) -> None:
    err = res["err"]
    names = [n for n in sorted({k[1] for k in err}) if n.startswith("FAME")] + list(BASELINES)
    table = []
    for name in names:
        cells = [name]
        for v in ("full", "50%"):
            e = err[(v, name)]
            mean, sd = float(np.mean(e)), float(np.std(e))
            cells.append(f"{mean:.4f} ± {sd:.4f}")
            vs, ratio = None, None
            if name.startswith("FAME"):
                vals = {b: float(np.mean(err[(v, b)])) for b in BASELINES}
                vs = min(vals, key=vals.get)
                ratio = vals[vs] / mean
            case = f"elnino inputs={v} {name}"
            rows.append(Row(case, "relative_l2", mean, "", vs, ratio))
            rows.append(Row(case, "relative_l2_sd", sd, ""))
        fit = float(np.mean(res["fit_s"][name]))
        rows.append(Row(f"elnino {name}", "fit_seconds", fit, "s"))
        table.append([*cells, f"{fit:.1f}"])
    for name in ("climatology", "persistence"):
        e = float(err[("full", name)][0])
        rows.append(Row(f"elnino inputs=full {name}", "relative_l2", e, ""))
        table.append([name, f"{e:.4f}", "-", "-"])
    print_table(
        ["model", "rel L2 full", "rel L2 50%", "fit s"],
        table,
        title="El Nino next-year SST curve (test 1995-2009 -> 1996-2010)",
    )


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    err = res["err"]
    N = res["sizes"][0]
    names = sorted({k[2] for k in err if k[0] == N})
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name in names:
        m = [np.mean(err[(N, f, name)]) for f in DENSITIES]
        s = [np.std(err[(N, f, name)]) for f in DENSITIES]
        axes[0].errorbar(DENSITIES, m, yerr=s, marker="o", capsize=3, label=name)
    axes[0].set(
        xlabel="observed fraction of the test inputs",
        ylabel="relative L2 error",
        title=f"forced oscillator, N = {N}",
    )
    axes[0].legend(fontsize=8)
    for name in names:
        sizes = [n for n in res["sizes"] if (n, 0.5, name) in err]
        axes[1].plot(sizes, [np.mean(err[(n, 0.5, name)]) for n in sizes], marker="o", label=name)
    axes[1].set(
        xlabel="training curves N",
        ylabel="relative L2 error (50 % observed)",
        xscale="log",
        title="error vs training-set size",
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0])
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    args = parser.parse_args(argv)
    setup(args)
    kw = fame_kwargs(args.quick)
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=[args.seed + s for s in range(3)],
        solver="torchcde cdeint, torchdiffeq rk4, step 1/(Q-1) of the scaled domain",
        fame={k: v for k, v in kw.items() if k != "progress"},
        densities=list(DENSITIES),
    )
    print(
        f"fame: torch {machine['torch']}, {machine['cpu']}, {torch.get_num_threads()} "
        f"threads, seeds {machine['seeds']}, git {machine['git']}"
    )
    other = OtherLoad()
    rows: list[Row] = []
    t0 = time.perf_counter()
    osc = run_oscillator(args.quick, args.seed)
    machine["oscillator_steps"] = osc["steps"]
    report_oscillator(osc, rows)
    eln = run_elnino(args.quick, args.seed)
    machine["elnino"] = {k: eln[k] for k in ("steps", "n_train", "n_test")}
    report_elnino(eln, rows)
    if args.plots is not None:
        name = "fame_quick.png" if args.quick else "fame.png"
        plot(osc, args.plots / name)
        print(f"plot in {args.plots / name}")
    return finish(args, BENCHMARK, machine, rows, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
