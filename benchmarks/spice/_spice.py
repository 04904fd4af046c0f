"""Shared code of the SPiCE benchmark scripts (``run.py``, ``ablation.py``).

The data set, the split seeds, one training run on the shared trainer
(:func:`sci_moe.molecules.spice.fit`) as a JSON-able record, the cache key of a run, the
paired sign-flip test, the per-target verdict (after ``_common.holm``) and the flatness
rule of a validation curve. Scripts import this module, never each other.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch

from sci_moe.train import is_flat

__all__ = [
    "SPLIT_SEEDS",
    "base_model_options",
    "flat",
    "load_set",
    "plot_curves",
    "run_key",
    "sign_flip_test",
    "train_record",
    "val_change",
    "verdict",
]

SPLIT_SEEDS = (123, 8888, 8889, 4242, 7)


def base_model_options(n_targets: int) -> dict:
    """The model options every SPiCE-benchmark run shares (the grid and the ablation vary the
    rest): the package's atom/bond features, 2 blocks, 16 RBFs to 0.5 nm, 8 experts top-2,
    4 heads, router noise 0.1."""
    from sci_moe.molecules import ATOM_FEATURE_DIM, BOND_FEATURE_DIM

    return dict(
        n_targets=n_targets,
        atom_dim=ATOM_FEATURE_DIM,
        bond_dim=BOND_FEATURE_DIM,
        num_layers=2,
        num_rbf=16,
        cutoff_nm=0.5,
        num_experts=8,
        top_k=2,
        heads=4,
        noise_std=0.1,
    )


def load_set(path: Path):
    """The ``MoleculeSet`` in ``path`` (a 50-molecule set is built there when missing)."""
    from sci_moe.data.molecule_set import MoleculeSet, MoleculeSetConfig, build_molecule_set

    if not (path / "molecule_set.npz").exists():
        print(f"building the 50-molecule set in {path} (a few minutes)", flush=True)
        build_molecule_set(path, MoleculeSetConfig(n_molecules=50))
    return MoleculeSet.load(path)


def run_key(data_sha: str, name: str, extra: dict, seed: int, *options) -> str:
    """File name of one training run in ``--checkpoint``: a hash of everything it depends on."""
    blob = json.dumps([data_sha, name, extra, seed, *options], sort_keys=True, default=str)
    return f"{name}-s{seed}-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def sign_flip_test(d: np.ndarray, n: int = 20000, seed: int = 0) -> float:
    """Two-sided p-value of mean(d) = 0 by random sign flips of the paired differences."""
    d = np.asarray(d, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    rng = np.random.default_rng(seed)
    flips = rng.choice([-1.0, 1.0], size=(n, d.size))
    null = np.abs((flips * d).mean(1))
    return float((1 + np.sum(null >= abs(d.mean()) - 1e-15)) / (n + 1))


def verdict(test: dict, alpha: float = 0.05) -> str:
    """``"better"``, ``"worse"`` (model ``a`` vs ``b`` after Holm) or ``"noise"``."""
    if test["p_holm"] >= alpha:
        return "noise"
    return "better" if test["mean_diff"] < 0 else "worse"


def val_change(curve) -> float:
    """Relative change of a validation score (lower is better) over the last quarter of the
    epochs, ``(c[-1] - c[-1 - q]) / c[-1 - q]`` with ``q = max(1, len(c) // 4)``: the
    benchmark's row "validation score change over the last q epochs"."""
    c = np.asarray(curve, dtype=float)
    if c.size < 2:
        raise ValueError(f"a validation curve needs >= 2 epochs, got {c.size}")
    q = max(1, c.size // 4)
    return float((c[-1] - c[-1 - q]) / c[-1 - q])


def flat(curve) -> bool:
    """The flatness rule of a per-epoch validation score (lower is better):
    :func:`sci_moe.train.is_flat` over epochs ``1..n`` with its defaults -- the best score
    of the last 20 % of the epochs is less than 1 % below the best before them, with at
    least five epochs. (Until the review of issue 43 the rule was point to point,
    :func:`val_change` > -1 % over the last quarter; no stored JSON was judged by it: the
    ablation's ``spice_ablation.json`` was not yet written.)"""
    values = [float(v) for v in curve]
    return is_flat(range(1, len(values) + 1), values, mode="min")


def train_record(ms, graphs, targets, name: str, options: dict, train: dict, s: int) -> dict:
    """Train model ``name`` on split ``s`` of ``ms`` and return its JSON-able record.

    Parameters
    ----------
    ms : MoleculeSet
        Provides the molecule-level 70/10/20 split (``SPLIT_SEEDS[s]``).
    graphs : list of EnsembleGraph
        One per molecule of ``ms`` (same order).
    targets : list of str
        Target names (the columns of ``ms.targets``).
    name : str
        A :data:`sci_moe.molecules.spice.MODEL_NAMES` entry.
    options : dict
        ``build_model`` options (shared sizes and the model's configuration).
    train : dict
        :class:`sci_moe.molecules.spice.TrainConfig` fields except ``seed``.
    s : int
        Split index, also the training seed.

    Returns
    -------
    dict
        ``seed``, ``split_seed``, ``val_mae``/``test_mae`` (per target, best-validation
        weights), ``val_score`` (mean over targets of val MAE / training std),
        ``best_epoch``, ``epochs_run``, ``train_time_s``, ``wall_s`` (s), ``n_params``,
        ``history`` (per epoch ``train_loss`` and ``val_score``), ``test_index`` and
        ``test_pred`` (shape (n_test, T)).
    """
    from sci_moe.molecules.spice import TrainConfig, build_model, evaluate, fit

    tr, va, te = ms.split(seed=SPLIT_SEEDS[s])
    torch.manual_seed(s)
    model = build_model(name, **options)
    t0 = time.perf_counter()
    res = fit(
        model,
        [graphs[i] for i in tr],
        [graphs[i] for i in va],
        [graphs[i] for i in te],
        TrainConfig(seed=s, **train),
        target_names=targets,
    )
    ev = evaluate(model, [graphs[i] for i in te])
    std = model.target_std.cpu().numpy()  # the model stays on the run's device
    val = np.array([res["val_mae"][t] for t in targets])
    return {
        "seed": s,
        "split_seed": SPLIT_SEEDS[s],
        "val_mae": val.tolist(),
        "val_score": float(np.mean(val / std)),
        "test_mae": [res["test_mae"][t] for t in targets],
        "best_epoch": res["best_epoch"],
        "epochs_run": res["epochs_run"],
        "train_time_s": res["train_time_s"],
        "wall_s": time.perf_counter() - t0,
        "n_params": res["n_params"],
        "history": {
            "train_loss": res["history"]["train_loss"],
            "val_score": [float(np.mean(np.asarray(v) / std)) for v in res["history"]["val_mae"]],
        },
        "test_index": te.tolist(),
        "test_pred": ev["pred"].tolist(),
    }


def plot_curves(path: Path, runs: dict, dashed=()) -> None:
    """Validation score per epoch (mean over the splits run so far) of every model.

    ``runs[model][split]`` are :func:`train_record` records; the models in ``dashed``
    (baselines) are drawn dashed. Writes the PNG ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (v, rs) in enumerate(runs.items()):
        curves = [r["history"]["val_score"] for r in rs.values()]
        n = min(len(c) for c in curves)
        mean = np.mean([c[:n] for c in curves], axis=0)
        style = "--" if v in dashed else "-"
        ax.plot(np.arange(1, n + 1), mean, style, color=f"C{i % 10}", label=f"{v} ({len(rs)})")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation MAE / target std (mean over targets)")
    ax.set_title(f"{path.stem}: learning curves (mean over splits)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
