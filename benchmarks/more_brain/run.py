"""MoRE-Brain stage 1 on nonlinear planted fMRI, trained until flat: decoding, groups, transfer.

Data (:func:`sci_moe.neuro.plant_nonlinear_voxels`, issue 45): targets are real
all-MiniLM-L6-v2 embeddings (384-d) of the ~1500 offline mini-newsgroups sentences
(:func:`sci_moe.data.planted_fmri.sentence_targets`); voxels sit in 4 networks of 4
regions; each network responds to its own target subspace with its own nonlinear family
(exponential rate, cubic, saturating, tuning bump), each region to its own further
subspace with its own parameter of the family; every subject mixes pairs of voxels of a
region, permutes the voxels and scales them by its own gains; unit noise at SNR
``snr``. A linear read-out is not optimal. Split per subject: last 300 sentences test
(retrieval among them, chance top-1 = 1/300), the 150 before them validation, the rest
train.

Contestants (subjects 1-2 trained jointly, validated and tested on subject 1):

* ``ridge``: closed-form ridge (alpha from 13 values in 1e-1..1e5, by held-out cosine);
* ``flat MoE``: one expert-choice level of 16 experts (same front end, experts, loss);
* ``MoRE-Brain``: the 2 -> 4 -> 8 -> 16 expert-choice tree (:class:`MoREBrainEncoder`).

Every learned fit (both MoEs, the linear-data tree, the three transfer fits) trains on the
shared trainer (AdamW, cosine schedule, no warm-up) *until flat*, in cycles
(:func:`_common.until_flat`, :func:`fit_until_flat`): a cycle is ``steps`` steps (transfer:
``ft_steps``) with a validation evaluation every ``eval_every`` (``ft_eval_every``) steps;
cycle ``c`` draws its batches with the seed ``seed + 100 c`` (cycle 0 is the plain
fixed-step run of before, bit for bit) and is a fresh cosine schedule from the previous
cycle's best validation top-1 weights. After each cycle the concatenated validation curve is
judged; the first flat one ends the fit, and at most ``cycles`` cycles run (full plan 4,
``--quick`` 2; ``--max-cycles N`` overrides), a fit that reaches the cap unflat records
``flat`` false. The fit's result is the best validation top-1 weights over all its cycles
(a later cycle replaces them only when strictly better). Recorded per fit: the
concatenated curve, ``cycles``, ``steps`` (all cycles together) and ``flat``. A curve is
*flat* (:func:`sci_moe.train.is_flat`, :data:`FLAT_RULE`) when its best validation top-1
of the last 20 % of its steps beat the best before them by less than ``FLAT_ATOL`` = 0.01
(the resolution of a top-1 over 150 validation sentences, steps of 1/150: one sentence more
is no gain) or by less than 1 % relative (never the looser one below a top-1 of 1). The
stored runs of the fixed-step plan (one cycle) were judged by the same rule written by hand
(the best of the whole curve against the best of its first 80 %, < 0.01); on their stored
curves both give the same flags, so their ``flat`` rows stand.

Measured per seed (data and model seed ``seed + i``): top-1/top-5 retrieval; ARI of the
voxel -> expert assignment (tree level 1 against the 4 networks, tree level 3 and the flat
MoE against the 16 regions) against spectral clustering of the absolute voxel
correlations (training rows) into 4 and 16 clusters; transfer to subject 3 with
``new_rows`` of its training rows: router(+front-end)-only fine-tuning of the trained tree,
full fine-tuning of it, a tree trained from scratch, and ridge on the same rows. And a
diagnosis of the issue-41 result (the tree far below ridge): on that run's *linear*
planted data (:func:`sci_moe.neuro.plant_voxels`, SNR ``linear_snr``, one subject) the
tree trained by the old recipe (``old_steps`` steps, constant learning rate, no
validation) and by this run's, against ridge.

Run: ``python benchmarks/more_brain/run.py [--quick] [--json PATH] [--seed 0] [--seeds 5]
[--max-cycles N] [--plots DIR] [--max-hours H] [--resume]``; ``--max-hours`` stops between
seeds, ``--resume`` continues from ``JSON.state.json`` (which stores the settings: a state
of other settings, such as one of the fixed-step plan, which stored none, is refused); the
JSON is rewritten from the finished seeds after every seed. ``--verdicts-only PATH``
recomputes a stored JSON's verdicts.

Cost (one thread): a seed of the fixed-step plan (one cycle per fit) took ~290 s, ~95 % of
it in the fits; a fit's cost grows with its cycles, so the worst case (every fit at the cap
of 4 cycles) is ~4 x 290 s, about 20 min a seed and ~3.2 h for 10 seeds; fits flat after
one cycle cost what they did.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    print_table,
    refuse,
    resume_state,
    row_value,
    seed_verdict,
    setup,
    state_path,
    until_flat,
    verdict_entry,
    verdicts_only,
    write_json,
    write_json_doc,
)

from sci_moe.data.planted_fmri import sentence_targets
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

BENCHMARK = "more_brain"
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
TRANSFER = ("router-only", "full fine-tuning", "scratch", "ridge")


def settings(quick: bool, max_cycles: int | None = None) -> dict:
    """Sizes of the run (``--quick``: tiny, for CI and checks).

    ``cycles`` is the most training cycles of a fit (full plan 4, quick 2); ``max_cycles``
    (``--max-cycles``) overrides it.
    """
    if max_cycles is not None and max_cycles < 1:
        raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
    cfg = _plan(quick)
    if max_cycles is not None:
        cfg["cycles"] = int(max_cycles)
    return cfg


def _plan(quick: bool) -> dict:
    if quick:
        return {
            "voxels": 64,
            "snr": 4.0,
            "d": 8,
            "batch": 32,
            "steps": 200,
            "eval_every": 20,
            "ft_steps": 80,
            "ft_eval_every": 10,
            "new_rows": [25, 100],
            "lr": 3e-3,
            "old_steps": 100,
            "linear_snr": 0.3,
            "cycles": 2,
        }
    return {
        "voxels": 128,
        "snr": 4.0,
        "d": 16,
        "batch": 64,
        "steps": 2000,
        "eval_every": 100,
        "ft_steps": 500,
        "ft_eval_every": 50,
        "new_rows": [25, 100, 400],
        "lr": 3e-3,
        "old_steps": 300,
        "linear_snr": 0.3,
        "cycles": 4,
    }


def flat(curve: list) -> bool:
    """:data:`FLAT_RULE` on ``[[step, val_top1], ...]``: :func:`sci_moe.train.is_flat`
    (higher is better, the default tail and relative tolerance) with ``atol=FLAT_ATOL``."""
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, mode="max", atol=FLAT_ATOL)


def fit_until_flat(model, train, cfg: dict, seed: int, steps: int, eval_every: int, batch: int):
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
        run = train(_config(cfg, cycle_seed, steps, eval_every, batch))
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


def _config(cfg, seed, steps, eval_every, batch):
    return TrainConfig(
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


def run_seed(seed: int, cfg: dict, targets: np.ndarray, plots: Path | None) -> dict:
    """Every measurement of one seed (data and model seed ``seed``)."""
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
    out["linear"] = _linear_diagnosis(seed, cfg, targets)
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


def _linear_diagnosis(seed: int, cfg: dict, targets: np.ndarray) -> dict:
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
    old = TrainConfig(steps=cfg["old_steps"], batch_size=cfg["batch"], lr=cfg["lr"], seed=seed)
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
    )
    out["MoRE-Brain"] = {**_ret(predict(m, xte, "subj01"), yte), **fit}
    print(
        f"  seed {seed} linear data top-1: "
        + ", ".join(f"{k} {v['top1']:.3f}" for k, v in out.items())
    )
    return out


# ------------------------------------------------------------------------- report


def rows_of(state: dict, cfg: dict, seeds: list[int]) -> tuple[list[Row], dict]:
    """Mean, sd (ddof 1) and per-seed rows of the finished seeds, and the learning curves."""
    rows: list[Row] = []
    table = []

    def add(case, metric, values, unit="fraction", vs=None, base=None):
        m, sd = float(np.mean(values)), float(np.std(values, ddof=1))
        ratio = None if base is None or base == 0 else m / base
        rows.append(Row(case, metric, m, unit, vs, ratio))
        rows.append(Row(case, f"{metric}_sd", sd, unit))
        rows.extend(
            Row(case, f"{metric} seed {s}", float(v), unit)
            for s, v in zip(seeds, values, strict=True)
        )
        table.append([case, metric, m, sd, vs or "-", ratio])

    runs = [state[str(s)] for s in seeds]
    curves: dict = {}
    for metric in ("top1", "top5"):
        base = float(np.mean([r["ridge"][metric] for r in runs]))
        for case in ("ridge", "flat MoE", "MoRE-Brain"):
            vals = [r[case][metric] for r in runs]
            vs = None if case == "ridge" else "ridge"
            add(case, metric, vals, vs=vs, base=None if vs is None else base)

    def fit_rows(case, fits):
        """``flat``, ``cycles`` and ``steps`` rows of one learned fit (``fits``: per seed)."""
        add(case, "flat", [float(f["flat"]) for f in fits], "fraction")
        add(case, "cycles", [f["cycles"] for f in fits], "cycles")
        add(case, "steps", [f["steps"] for f in fits], "steps")
        curves[case] = {str(s): f["curve"] for s, f in zip(seeds, fits, strict=True)}

    for case in ("flat MoE", "MoRE-Brain"):
        fit_rows(case, [r[case] for r in runs])
    add("ridge", "alpha", [r["ridge"]["alpha"] for r in runs], "")
    for metric in ("top1", "top5"):
        base = float(np.mean([r["linear"]["ridge"][metric] for r in runs]))
        for case in ("ridge", "old recipe", "MoRE-Brain"):
            vals = [r["linear"][case][metric] for r in runs]
            vs = None if case == "ridge" else "linear ridge"
            add(f"linear {case}", metric, vals, vs=vs, base=None if vs is None else base)
    fit_rows("linear MoRE-Brain", [r["linear"]["MoRE-Brain"] for r in runs])
    for case in runs[0]["groups"]:
        for metric in ("ari", "nmi"):
            add(case, metric, [r["groups"][case][metric] for r in runs], "score")
    for n in cfg["new_rows"]:
        for metric in ("top1", "top5"):
            base = float(np.mean([r[f"new {n}"]["scratch"][metric] for r in runs]))
            for case in TRANSFER:
                vals = [r[f"new {n}"][case][metric] for r in runs]
                vs = None if case == "scratch" else "scratch"
                add(f"new subject {n} rows {case}", metric, vals, vs=vs, base=base)
        for case in TRANSFER[:3]:
            fit_rows(f"new subject {n} rows {case}", [r[f"new {n}"][case] for r in runs])
    print_table(
        ["case", "metric", "mean", "sd", "vs", "ratio"],
        [t for t in table if t[1] in ("top1", "top5", "ari")],
        title=f"MoRE-Brain nonlinear planted fMRI ({len(seeds)} seeds)",
    )
    return rows, curves


def verdicts(doc: dict) -> list[dict]:
    """The abstract's claims, by rules applied to the per-seed rows (paired t-tests).

    * the tree decodes better than ridge (top-1, subject 1's test sentences);
    * the tree decodes better than the flat MoE (top-1);
    * the tree's voxel -> expert assignments recover the planted networks (level 1) and
      regions (level 3) better than spectral clustering of the voxel correlations (ARI);
    * router-only transfer to a new subject beats the stronger (in the means) of full
      fine-tuning and training from scratch on the same rows (top-5), per amount.

    ``converged`` is true when every learned fit of the comparison was flat
    (:data:`FLAT_RULE`) in every seed; ridge and spectral clustering are closed form.
    """
    out = []

    def conv(*cases):
        return all(row_value(doc, c, "flat") == 1.0 for c in cases)

    out.append(
        seed_verdict(
            "the hierarchical MoE decodes better than ridge",
            doc,
            metric="top1",
            ours="MoRE-Brain",
            baseline="ridge",
            higher_is_better=True,
            converged=conv("MoRE-Brain"),
        )
    )
    out.append(
        seed_verdict(
            "the expert tree decodes better than a flat MoE",
            doc,
            metric="top1",
            ours="MoRE-Brain",
            baseline="flat MoE",
            higher_is_better=True,
            converged=conv("MoRE-Brain", "flat MoE"),
        )
    )
    for level, what in (("networks", "4 networks (tree level 1)"), ("regions", "16 regions")):
        out.append(
            seed_verdict(
                f"expert routing recovers the planted voxel groups: {what}",
                doc,
                metric="ari",
                ours=f"{level} MoRE-Brain",
                baseline=f"{level} spectral",
                higher_is_better=True,
                converged=conv("MoRE-Brain"),
                note="baseline: spectral clustering of the absolute voxel correlations",
            )
        )
    amounts = sorted(
        {int(r["case"].split()[2]) for r in doc["rows"] if r["case"].startswith("new subject ")}
    )
    for n in amounts:
        pre = f"new subject {n} rows "
        base = max(("full fine-tuning", "scratch"), key=lambda b: row_value(doc, pre + b, "top5"))
        out.append(
            seed_verdict(
                f"router-only fine-tuning transfers to a new subject ({n} training rows)",
                doc,
                metric="top5",
                ours=pre + "router-only",
                baseline=pre + base,
                higher_is_better=True,
                converged=conv("MoRE-Brain", pre + "router-only", pre + base),
                note=f"baseline: {base}, the stronger of full fine-tuning and scratch in the means",
            )
        )
    return [verdict_entry(**v) for v in out]


def _plot_assign(assign, roi, perm, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = np.argsort(perm)  # subject columns in reference (planted) order
    fig, axes = plt.subplots(2, 1, figsize=(8, 2.4))
    for a, r, ax, name in zip(assign, roi, axes, ("networks", "regions"), strict=True):
        ax.imshow(
            np.stack([r[order], a[order]]), aspect="auto", cmap="tab20", interpolation="nearest"
        )
        ax.set_yticks([0, 1], ["planted", "learned"])
        ax.set_xticks([])
        ax.set_title(f"{name}: {int(r.max()) + 1} planted groups", fontsize=8)
    axes[-1].set_xlabel("voxel (planted order)")
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / "more_brain_assignments.png", dpi=110)
    plt.close(fig)


def plot(doc: dict, folder: Path) -> None:
    """Learning curves and the transfer panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = doc["curves"]
    new = [c for c in curves if c.startswith("new subject ")]
    amounts = sorted({int(c.split()[2]) for c in new})
    fig, axes = plt.subplots(1, 2 + len(amounts), figsize=(3.2 * (2 + len(amounts)), 3))
    colors = {"flat MoE": "C0", "MoRE-Brain": "C1", "router-only": "C2"}
    colors.update({"full fine-tuning": "C3", "scratch": "C4", "linear MoRE-Brain": "C1"})
    for ax, cases in ((axes[0], ("flat MoE", "MoRE-Brain")), (axes[1], ("linear MoRE-Brain",))):
        for case in cases:
            for i, c in enumerate(curves[case].values()):
                s, v = zip(*c, strict=True)
                ax.plot(s, v, color=colors[case], alpha=0.7, label=case if i == 0 else None)
        for old in (100, 300):  # the step counts of the issue-41 quick and default runs
            ax.axvline(old, color="grey", ls=":", lw=1)
        ax.set(xlabel="step", ylabel="validation top-1 (among 150)")
        ax.legend(fontsize=7)
    axes[0].set_title("nonlinear data, subjects 1-2", fontsize=9)
    axes[1].set_title("linear data (diagnosis), subject 1", fontsize=9)
    for ax, n in zip(axes[2:], amounts, strict=True):
        for case in TRANSFER[:3]:
            for i, c in enumerate(curves[f"new subject {n} rows {case}"].values()):
                s, v = zip(*c, strict=True)
                ax.plot(s, v, color=colors[case], alpha=0.7, label=case if i == 0 else None)
        ax.set(title=f"new subject, {n} rows", xlabel="step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / "more_brain_curves.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4.5, 3))
    for case in TRANSFER:
        m = [row_value(doc, f"new subject {n} rows {case}", "top5") for n in amounts]
        sd = [row_value(doc, f"new subject {n} rows {case}", "top5_sd") for n in amounts]
        ax.errorbar(amounts, m, yerr=sd, marker="o", capsize=3, label=case)
    ax.set(xscale="log", xlabel="new-subject training rows", ylabel="test top-5")
    ax.set_xticks(amounts, [str(n) for n in amounts])
    ax.minorticks_off()
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "more_brain_transfer.png", dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    ap.add_argument("--plots", type=Path, default=None, metavar="DIR")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument(
        "--max-cycles",
        type=int,
        default=None,
        metavar="N",
        help="the most training cycles of a fit (default: the plan's, 4; --quick 2)",
    )
    piece_arguments(ap)
    args = ap.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    if args.max_cycles is not None and args.max_cycles < 1:
        ap.error(f"--max-cycles must be >= 1, got {args.max_cycles}")
    cfg = settings(args.quick, args.max_cycles)
    state = resume_state(args)
    if state:  # a new run (empty state) passes
        try:
            check_resume_settings(
                state.get("settings"),
                cfg,
                state_path(args.json),
                before="the fixed-step plan (one training cycle per fit), not this run's "
                "training until flat",
            )
        except ValueError as err:
            refuse(str(err))
    state["settings"] = cfg
    setup(args)
    deadline = piece_deadline(args)
    load = OtherLoad()
    t0 = time.perf_counter()
    _, targets = sentence_targets()
    seeds = [args.seed + i for i in range(args.seeds)]
    for i, seed in enumerate(seeds):
        if str(seed) in state:
            continue
        if time.perf_counter() > deadline:
            print("--max-hours spent: stopping between seeds (continue with --resume)")
            break
        ts = time.perf_counter()
        plots = args.plots if i == 0 else None
        state[str(seed)] = run_seed(seed, cfg, targets, plots)
        state[str(seed)]["seed_seconds"] = time.perf_counter() - ts
        print(f"seed {seed}: {state[str(seed)]['seed_seconds']:.0f} s")
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_json_doc(state_path(args.json), state)
    done = [s for s in seeds if str(s) in state]
    print(f"piece: {time.perf_counter() - t0:.0f} s; finished seeds {done}")
    if args.json is None or len(done) < 2:
        return 0
    rows, curves = rows_of(state, cfg, done)
    info = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=done,
        complete=len(done) == len(seeds),
        params=cfg,
        flat_rule=FLAT_RULE,
        seed_seconds_total=float(sum(state[str(s)]["seed_seconds"] for s in done)),
        contention_last_piece=load.report(),
    )
    write_json(args.json, BENCHMARK, info, rows)
    doc = json.loads(args.json.read_text())
    doc["curves"] = curves
    doc["verdicts"] = verdicts(doc)
    write_json_doc(args.json, doc)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  p={v['p_value']}  {v['claim']}")
    if args.plots is not None:
        plot(doc, args.plots)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
