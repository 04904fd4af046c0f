"""The fits of ``run.py``: the tasks' data, one model's fit, the resumable loop over fits.

:func:`load_task` builds a task's data and test views (observation times dropped),
:func:`fit_unit` trains one model (FAME until flat, the FLM, the GRU until flat) and
scores it (:func:`error`), :func:`run` fits every unit not yet in the state;
:func:`flat` is the flatness rule (:data:`FLAT`). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _common import (
    state_path,
    write_json_doc,
)

from sci_moe.data.elnino import ELNINO_DOMAIN, ELNINO_MONTHS, elnino_next_year
from sci_moe.functional.fame import (
    FAMETrainConfig,
    FunctionalLinearModel,
    FunctionOnFunctionRegressor,
    ObservationGRU,
    make_ode_data,
    relative_l2,
    subsample,
)
from sci_moe.train import is_flat

__all__ = [
    "DROPS",
    "FLAT",
    "METRIC",
    "TASKS",
    "error",
    "fit_unit",
    "flat",
    "load_task",
    "run",
    "unit_names",
]


TASKS = ("regime", "linear", "elnino")
DROPS = (0, 25, 50, 75)
METRIC = {"linear": "relative_l2", "regime": "relative_l2", "elnino": "anomaly_rel_l2"}
FLAT = 0.01  # converged: < 1 % better over the last 20 % of the steps run


def flat(curve: list) -> bool:
    """Whether the best validation error of ``curve`` (``[[step, error], ...]``) improved
    by < :data:`FLAT` over the last 20 % of the steps (:func:`sci_moe.train.is_flat`, at
    least five evaluations, the house rule)."""
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, tol=FLAT)


# --------------------------------------------------------------------------- data


def load_task(task: str, seed: int, cfg: dict) -> dict:
    """Training, validation and test data; test inputs with each fraction dropped."""
    rng = np.random.default_rng(1000 + seed)
    if task == "elnino":
        X, Y, years, targets = elnino_next_year()
        idx = {
            "train": np.flatnonzero(years <= 1989),
            "val": np.flatnonzero((years >= 1990) & (years <= 1994)),
            "test": np.flatnonzero(years >= 1995),
        }
        views = {0: [X[i] for i in idx["test"]]}
        for d in DROPS[1:]:
            Xd, *_ = elnino_next_year(observed=1 - d / 100, seed=seed)
            views[d] = [Xd[i] for i in idx["test"]]
        clim = np.mean([Y[i][1] for i in idx["train"]], axis=0)
        return dict(
            train=([X[i] for i in idx["train"]], [Y[i] for i in idx["train"]]),
            val=([X[i] for i in idx["val"]], [Y[i] for i in idx["val"]]),
            views=views,
            truth=targets[idx["test"]],
            times=ELNINO_MONTHS,
            domain=ELNINO_DOMAIN,
            clim=clim,
            persistence=np.array([X[i][0][1] for i in idx["test"]]),
        )
    tr = make_ode_data(task, cfg["n_train"], seed=100 + seed)
    va = make_ode_data(task, cfg["n_val"], seed=200 + seed)
    te = make_ode_data(task, cfg["n_test"], seed=10_000)
    views = {d: subsample(te.functions, te.grid, 1 - d / 100, rng) for d in DROPS}
    return dict(
        train=(tr.inputs, tr.output_pairs()),
        val=(va.inputs, va.output_pairs()),
        views=views,
        truth=te.outputs,
        times=te.output_times,
        domain=(0.0, float(te.output_times[-1])),
        regimes=np.array([f[0].offset > 0 for f in te.functions]),
    )


def error(task: str, pred: np.ndarray, data: dict) -> float:
    if task == "elnino":
        num = np.linalg.norm(pred - data["truth"], axis=-1)
        return float(np.mean(num / np.linalg.norm(data["truth"] - data["clim"], axis=-1)))
    return relative_l2(pred, data["truth"])


# ------------------------------------------------------------------------- models


def fit_unit(task: str, name: str, seed: int, data: dict, cfg: dict, device: str = "cpu") -> dict:
    """Train one model on one task and seed (the neural ones on ``device``); its test
    errors per drop and its curve."""
    X, Y = data["train"]
    t0 = time.perf_counter()
    out: dict = {}
    if name.startswith("FAME"):
        K = int(name.split("=")[1])
        model = FunctionOnFunctionRegressor(
            num_experts=K,
            domain=data["domain"],
            train=FAMETrainConfig(
                seed=seed,
                progress=False,
                steps=cfg["steps"][task],
                flat_min_steps=cfg["min_steps"][task],
                device=device,
                **cfg["train"],
            ),
            **cfg["fame"],
        )
        model.fit(X, Y, validation=data["val"])
        if K > 1 and "regimes" in data:
            pi = model.mixture_weights(data["views"][0])[:, 0]  # (N, K)
            out["entropy"] = float(-(pi * np.log(np.clip(pi, 1e-12, None))).sum(-1).mean())
            top = pi.argmax(-1)
            agree = [
                np.mean(
                    top[data["regimes"] == r] == np.bincount(top[data["regimes"] == r]).argmax()
                )
                for r in (True, False)
            ]
            out["regime_purity"] = float(np.mean(agree))
    elif name == "FLM":
        model = FunctionalLinearModel(seed=seed, domain=data["domain"]).fit(X, Y)
    elif name == "GRU":
        torch.manual_seed(seed)
        model = ObservationGRU(
            steps=cfg["gru_steps"],
            seed=seed,
            domain=data["domain"],
            eval_every=cfg["train"]["eval_every"],
            stop_when_flat=FLAT,
            flat_min_steps=cfg["gru_min_steps"],
            device=device,
        )
        model.fit(X, Y, validation=data["val"])
    if model.result is not None and model.result.evals:  # FAME, GRU: trained until flat
        curve = [[e["step"], e["val_rel_l2"]] for e in model.result.evals]
        out.update(
            curve=curve, steps=model.result.step, flat=flat(curve), reason=model.result.reason
        )
    out["fit_seconds"] = time.perf_counter() - t0
    out["error"] = {
        str(d): error(task, model.predict(inp, data["times"]), data)
        for d, inp in data["views"].items()
    }
    return out


def unit_names(task: str, cfg: dict) -> list[str]:
    return [f"FAME K={k}" for k in cfg["experts"][task]] + ["FLM", "GRU"]


def run(args, cfg: dict, state: dict, deadline: float) -> bool:
    """Fit every unit not in ``state`` (task by task, seed by seed, in the order of
    :data:`TASKS`: the nonlinear task first); False when stopped early."""
    for task in TASKS:
        for s in range(cfg["seeds"]):
            seed = args.seed + s
            data = None
            for name in unit_names(task, cfg):
                key = f"{task}|{name}|{seed}"
                if key in state:
                    continue
                if time.perf_counter() > deadline:
                    return False
                data = data or load_task(task, seed, cfg)
                state[key] = fit_unit(task, name, seed, data, cfg, args.device)
                u = state[key]
                print(
                    f"  {task:6s} seed {seed} {name:9s} {u['fit_seconds']:6.1f} s "
                    f"steps {u.get('steps', '-')} flat {u.get('flat', '-')} "
                    f"({u.get('reason', '-')}) "
                    f"error {u['error']['0']:.4f}",
                    flush=True,
                )
                if args.json is not None:
                    write_json_doc(state_path(args.json), state)
            if task == "elnino" and f"elnino|climatology|{seed}" not in state:
                data = data or load_task(task, seed, cfg)
                for base in ("climatology", "persistence"):
                    pred = (
                        np.tile(data["clim"], (len(data["truth"]), 1))
                        if base == "climatology"
                        else data["persistence"]
                    )
                    state[f"elnino|{base}|{seed}"] = {"error": {"0": error(task, pred, data)}}
    return True
