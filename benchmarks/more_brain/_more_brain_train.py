"""The training of ``run.py``: one seed's fits, each trained in cycles until flat.

:func:`run_seed` plants the voxels, fits ridge, flat MoE, MoRE-Brain and its linear form,
and transfers to a new subject; every learned fit goes through
:func:`fit_until_flat` (cycles of a fresh schedule until :func:`flat`, the rule
:data:`FLAT_RULE`). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import copy
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
from _common import (
    until_flat,
)
from _more_brain_plots import _plot_assign

from sci_moe.neuro import plant_nonlinear_voxels, plant_voxels
from sci_moe.neuro.more_brain import (
    MoREBrainEncoder,
    RidgeDecoder,
    TrainConfig,
    assignment_scores,
    finetune_routers,
    predict,
    retrieval_accuracy,
    train_encoder,
    voxel_assignments,
)
from sci_moe.train import is_flat

__all__ = [
    "ALPHAS",
    "FLAT_ATOL",
    "FLAT_RULE",
    "N_TEST",
    "N_VAL",
    "fit_until_flat",
    "flat",
    "run_seed",
]


N_TEST, N_VAL = 300, 150
ALPHAS = tuple(float(a) for a in np.logspace(-1, 5, 13))
#: Absolute tolerance of the flatness rule (``atol`` of :func:`sci_moe.train.is_flat`):
#: a gain of one validation sentence (1 / N_VAL) does not count.
FLAT_ATOL = 0.01
FLAT_RULE = (
    "sci_moe.train.is_flat: best validation top-1 of the last 20 % of the steps beat the best "
    "before them by < 0.01 (atol) or < 1 % (relative); every learned fit trains in cycles "
    "(steps / ft_steps each, a fresh cosine schedule from the previous cycle's best weights, "
    "batch seed + 100 per cycle) until its concatenated curve is flat, at most `cycles`"
)


def flat(curve: list) -> bool:
    """:data:`FLAT_RULE` on ``[[step, val_top1], ...]``: :func:`sci_moe.train.is_flat`
    (higher is better, the default tail and relative tolerance) with ``atol=FLAT_ATOL``."""
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, mode="max", atol=FLAT_ATOL)


def fit_until_flat(
    model,
    train,
    cfg: dict,
    seed: int,
    steps: int,
    eval_every: int,
    batch: int,
    device: str = "cpu",
):
    """Train ``model`` in cycles until its validation top-1 curve is :func:`flat`.

    Parameters
    ----------
    model : torch.nn.Module
        Trained in place; left with the best validation top-1 weights over all cycles.
    train : callable
        ``train(config)`` runs one cycle on ``model`` with the
        :class:`~sci_moe.neuro.more_brain.TrainConfig` ``config`` (validation top-1
        monitored, the cycle's best weights restored) and returns its
        :class:`~sci_moe.neuro.more_brain.EncoderRun`.
    cfg : dict
        The run's settings (:func:`settings`): ``lr`` and ``cycles``, the most cycles.
    seed : int
        The seed of cycle 0; cycle ``c`` uses ``seed + 100 c`` (:func:`_common.until_flat`).
    steps, eval_every, batch : int
        Steps of a cycle, steps between validation evaluations, batch size.
    device : str
        Where the cycles train (``--device``; the config's ``device``).

    Returns
    -------
    dict
        ``curve`` (``[[step, val_top1], ...]``, the cycles' curves on one step axis),
        ``cycles``, ``steps`` (of all cycles), ``flat`` (the joined curve by :func:`flat`)
        and ``fit_seconds``.
    """
    t0 = time.perf_counter()
    best: dict = {"top1": None, "state": None}

    def cycle(c: int, cycle_seed: int) -> list:
        run = train(_config(cfg, cycle_seed, steps, eval_every, batch, device))
        top1 = run.result.best_metric
        if top1 is not None and (best["top1"] is None or top1 > best["top1"]):
            best["top1"] = top1
            best["state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return [[int(e["step"]), float(e["val_top1"])] for e in run.result.evals]

    curve, cycles, converged = until_flat(cycle, flat, cfg["cycles"], seed, steps)
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    model.eval()
    return {
        "curve": curve,
        "cycles": cycles,
        "steps": cycles * steps,
        "flat": converged,
        "fit_seconds": time.perf_counter() - t0,
    }


def _split(x, y):
    x, y = torch.as_tensor(x), torch.as_tensor(y)
    a, b = -N_TEST - N_VAL, -N_TEST
    return (x[:a], y[:a]), (x[a:b], y[a:b]), (x[b:], y[b:])


def _model(subjects, cfg, experts):
    return MoREBrainEncoder(
        voxels_per_subject=dict.fromkeys(subjects, cfg["voxels"]),
        target_dim=384,
        d_model=cfg["d"],
        d_hidden=2 * cfg["d"],
        experts=experts,
    )


def _config(cfg, seed, steps, eval_every, batch, device="cpu"):
    return TrainConfig(
        device=device,
        steps=steps,
        batch_size=batch,
        lr=cfg["lr"],
        schedule="cosine",
        eval_every=eval_every,
        monitor="val_top1",
        seed=seed,
    )


def _ret(pred, y):
    r = retrieval_accuracy(pred, y)
    return {"top1": r[1], "top5": r[5]}


def _spectral(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Spectral clustering of the voxels on their absolute correlations."""
    from sklearn.cluster import SpectralClustering

    aff = np.abs(np.corrcoef(x.T))
    np.fill_diagonal(aff, 0.0)
    sc = SpectralClustering(k, affinity="precomputed", random_state=seed, assign_labels="kmeans")
    return sc.fit_predict(aff)


def run_seed(
    seed: int, cfg: dict, targets: np.ndarray, plots: Path | None, device: str = "cpu"
) -> dict:
    """Every measurement of one seed (data and model seed ``seed``); the encoders train on
    ``device`` (the voxels stay on the CPU, ridge and the clustering fit there)."""
    data = plant_nonlinear_voxels(
        targets,
        num_voxels=cfg["voxels"],
        num_subjects=3,
        snr=cfg["snr"],
        network_dims=8,
        region_dims=4,
        seed=seed,
    )
    s1, s2, s3 = data.subjects
    sp = {s: _split(data.voxels[s], targets) for s in data.subjects}
    (xtr, ytr), (xva, yva), (xte, yte) = sp[s1]
    out: dict = {}
    ridge = RidgeDecoder(alphas=ALPHAS, seed=seed).fit(xtr.numpy(), ytr.numpy())
    out["ridge"] = {**_ret(ridge.predict(xte.numpy()), yte), "alpha": ridge.alpha_}
    train2 = {s: sp[s][0] for s in (s1, s2)}
    models = {}
    for name, experts in (("flat MoE", (16,)), ("MoRE-Brain", (2, 4, 8, 16))):
        torch.manual_seed(seed)
        m = _model((s1, s2), cfg, experts)
        fit = fit_until_flat(
            m,
            partial(train_encoder, m, train2, validation={s1: (xva, yva)}),
            cfg,
            seed,
            cfg["steps"],
            cfg["eval_every"],
            cfg["batch"],
            device,
        )
        out[name] = {**_ret(predict(m, xte, s1), yte), **fit}
        models[name] = m
        print(
            f"  seed {seed} {name}: {out[name]['top1']:.3f} top-1, flat {fit['flat']} "
            f"after {fit['cycles']} cycle(s)"
        )
    print(f"  seed {seed} ridge: {out['ridge']['top1']:.3f} top-1")
    # voxel groups: learned assignments and spectral clustering vs the planted truth
    tree_assign = voxel_assignments(models["MoRE-Brain"], xte, s1)
    flat_assign = voxel_assignments(models["flat MoE"], xte, s1)[0]
    nets, regs = data.roi[s1]
    x_np = xtr.numpy()
    out["groups"] = {
        "networks MoRE-Brain": assignment_scores(tree_assign[1], nets, seed=seed),
        "networks spectral": assignment_scores(_spectral(x_np, 4, seed), nets, seed=seed),
        "regions MoRE-Brain": assignment_scores(tree_assign[3], regs, seed=seed),
        "regions flat MoE": assignment_scores(flat_assign, regs, seed=seed),
        "regions spectral": assignment_scores(_spectral(x_np, 16, seed), regs, seed=seed),
    }
    if plots is not None:
        _plot_assign([tree_assign[1], tree_assign[3]], data.roi[s1], data.permutation[s1], plots)
    out["linear"] = _linear_diagnosis(seed, cfg, targets, device)
    # transfer to subject 3 with few rows
    (xn, yn), (xnv, ynv), (xnt, ynt) = sp[s3]
    for n in cfg["new_rows"]:
        xs, ys = xn[:n], yn[:n]
        ft = (cfg["ft_steps"], cfg["ft_eval_every"], min(cfg["batch"], n))
        res = {}
        m = copy.deepcopy(models["MoRE-Brain"])
        fit = fit_until_flat(
            m,
            partial(finetune_routers, m, s3, xs, ys, validation=(xnv, ynv)),
            cfg,
            seed,
            *ft,
            device,
        )
        res["router-only"] = {**_ret(predict(m, xnt, s3), ynt), **fit}
        m = copy.deepcopy(models["MoRE-Brain"])
        m.add_subject(s3, cfg["voxels"])
        fit = fit_until_flat(
            m,
            partial(train_encoder, m, {s3: (xs, ys)}, validation={s3: (xnv, ynv)}),
            cfg,
            seed,
            *ft,
            device,
        )
        res["full fine-tuning"] = {**_ret(predict(m, xnt, s3), ynt), **fit}
        torch.manual_seed(seed)
        m = _model((s3,), cfg, (2, 4, 8, 16))
        fit = fit_until_flat(
            m,
            partial(train_encoder, m, {s3: (xs, ys)}, validation={s3: (xnv, ynv)}),
            cfg,
            seed,
            *ft,
            device,
        )
        res["scratch"] = {**_ret(predict(m, xnt, s3), ynt), **fit}
        rr = RidgeDecoder(alphas=ALPHAS, seed=seed).fit(xs.numpy(), ys.numpy())
        res["ridge"] = _ret(rr.predict(xnt.numpy()), ynt)
        out[f"new {n}"] = res
        print(
            f"  seed {seed} new subject {n} rows top-5: "
            + ", ".join(f"{k} {v['top5']:.3f}" for k, v in res.items())
        )
    return out


def _linear_diagnosis(seed: int, cfg: dict, targets: np.ndarray, device: str = "cpu") -> dict:
    """Why the issue-41 run lost to ridge: on its linear planted data (one subject), the
    tree trained by the old recipe (``old_steps`` steps, constant learning rate, no
    validation: a fixed recipe, not trained until flat) and by this run's (cycles of
    ``steps``, cosine, until flat, best validation weights; :func:`fit_until_flat`), and
    ridge."""
    lin = plant_voxels(
        targets, num_voxels=cfg["voxels"], num_subjects=1, snr=cfg["linear_snr"], seed=seed
    )
    (xtr, ytr), (xva, yva), (xte, yte) = _split(lin.voxels["subj01"], targets)
    ridge = RidgeDecoder(alphas=ALPHAS, seed=seed).fit(xtr.numpy(), ytr.numpy())
    out = {"ridge": _ret(ridge.predict(xte.numpy()), yte)}
    old = TrainConfig(
        steps=cfg["old_steps"], batch_size=cfg["batch"], lr=cfg["lr"], seed=seed, device=device
    )
    torch.manual_seed(seed)
    m = _model(("subj01",), cfg, (2, 4, 8, 16))
    train_encoder(m, {"subj01": (xtr, ytr)}, old)
    out["old recipe"] = _ret(predict(m, xte, "subj01"), yte)
    torch.manual_seed(seed)
    m = _model(("subj01",), cfg, (2, 4, 8, 16))
    fit = fit_until_flat(
        m,
        partial(train_encoder, m, {"subj01": (xtr, ytr)}, validation={"subj01": (xva, yva)}),
        cfg,
        seed,
        cfg["steps"],
        cfg["eval_every"],
        cfg["batch"],
        device,
    )
    out["MoRE-Brain"] = {**_ret(predict(m, xte, "subj01"), yte), **fit}
    print(
        f"  seed {seed} linear data top-1: "
        + ", ".join(f"{k} {v['top1']:.3f}" for k, v in out.items())
    )
    return out
