"""Training API for SPiCE and its baselines: splits, early stopping, test MAE at best validation.

:func:`fit` trains any :class:`~sci_moe.molecules.spice.model.EnsembleRegressor` on lists of
:class:`~sci_moe.molecules.graph.EnsembleGraph` with the MARCEL protocol: a
molecule-level 70/10/20 split (:func:`split_indices`), early stopping on the validation
MAE, and the test MAE of the weights with the best validation MAE. The loop is the
training engine's (:class:`sci_moe.train.Trainer`): verified atomic checkpoints with
exact resume, a wall-time budget, the thread count, the device (``config.device``: the
model, every batch and the evaluation sets go there) and data parallelism under
``torchrun``.

Pitfalls of the public SPiCE code avoided here (``papers/molecules.md`` §2): the LR
schedule is a function of the optimiser step that is *applied* every step (the public
code passes the loss as the epoch to ``LambdaLR.step`` and trains at ~0.2x the base LR
throughout); upcycling copies the dense expert into all experts in place once, and the
optimiser keeps training them; router noise is off in evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np
import torch

from ..._util import atomic_save_json, atomic_write_bytes, load_verified
from ...train import (
    ShuffledBatches,
    StepInfo,
    Trainer,
    all_reduce_sum,
    current_context,
    run_device,
)
from ..graph import EnsembleGraph, collate_ensembles
from .model import EnsembleRegressor
from .train_config import TrainConfig

__all__ = [
    "RESULTS_NAME",
    "TrainConfig",
    "evaluate",
    "fit",
    "load_checkpoint",
    "load_model",
    "save_model",
    "split_indices",
]

RESULTS_NAME = "results.json"


def split_indices(
    n: int, seed: int = 123, fractions: Sequence[float] = (0.7, 0.1, 0.2)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Molecule-level train/validation/test split (MARCEL protocol).

    The permutation of ``sklearn.utils.shuffle(range(n), random_state=seed)`` (as in
    MARCEL; computed with ``numpy.random.RandomState(seed).shuffle``, which is what it
    runs), then the first ``int(f_train n)`` molecules train, the next ``int(f_val n)``
    validate, the rest test.

    Returns
    -------
    train, val, test : numpy.ndarray of int
    """
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(
            f"fractions must be three non-negative numbers summing to 1, got {fractions}"
        )
    n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
    if n_train < 2 or n_val < 1 or n - n_train - n_val < 1:
        raise ValueError(f"{n} molecules are too few for the split {tuple(fractions)}")
    idx = np.arange(n)
    np.random.RandomState(seed).shuffle(idx)
    return idx[:n_train], idx[n_train : n_train + n_val], idx[n_train + n_val :]


def _batches(graphs: Sequence[EnsembleGraph], size: int, order=None, device=None):
    order = range(len(graphs)) if order is None else order
    order = list(order)
    for s in range(0, len(order), size):
        batch = collate_ensembles([graphs[i] for i in order[s : s + size]])
        yield batch if device is None or device.type == "cpu" else batch.to(device)


@torch.no_grad()
def evaluate(
    model: EnsembleRegressor, graphs: Sequence[EnsembleGraph], batch_size: int = 16
) -> dict:
    """Mean absolute error per target (target units) and the predictions, in eval mode.

    Returns
    -------
    dict
        ``mae`` (list of T floats, NaN targets skipped), ``pred`` and ``y`` (numpy arrays
        ``(M, T)``), ``conf_weight`` (list of per-molecule arrays of the readout weights,
        or ``None``), ``expert_load`` (per MoE layer and path: fraction of assignments
        per expert over the whole set; empty without MoE).
    """
    was = model.training
    model.eval()
    preds, ys, weights = [], [], []
    load: list[dict] | None = None
    device = next(iter(model.buffers())).device
    try:
        for batch in _batches(graphs, batch_size, device=device):
            out = model(batch)
            preds.append(out.pred.cpu())
            ys.append(batch.y.to(out.pred.dtype).cpu())
            if out.conf_weight is not None:
                w = out.conf_weight.cpu()
                counts = batch.confs_per_mol.tolist()
                weights += [x.numpy() for x in torch.split(w, counts)]
            if out.moe:
                counts_l = []
                for info in out.moe:
                    counts_l.append(
                        {
                            "scalar": info.scalar_routing.load.double().cpu(),
                            "vector": info.vector_routing.load.double().cpu(),
                        }
                    )
                if load is None:
                    load = counts_l
                else:
                    for a, b in zip(load, counts_l, strict=True):
                        a["scalar"] += b["scalar"]
                        a["vector"] += b["vector"]
    finally:
        model.train(was)
    pred = torch.cat(preds).numpy()
    y = torch.cat(ys).numpy()
    ok = np.isfinite(y)
    err = np.where(ok, np.abs(pred - np.where(ok, y, 0.0)), 0.0)
    mae = (err.sum(0) / np.maximum(ok.sum(0), 1)).tolist()
    expert_load = [
        {k: (v / v.sum().clamp_min(1)).tolist() for k, v in layer.items()} for layer in load or []
    ]
    return {
        "mae": mae,
        "pred": pred,
        "y": y,
        "conf_weight": weights or None,
        "expert_load": expert_load,
    }


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint of :func:`fit` after checking its checksum (CPU tensors).

    It is the engine's (:class:`sci_moe.train.Trainer`): ``step``, ``model`` and
    ``optimizer`` (state dicts), ``best`` (``metric``, ``step``, ``bad_evals``, ``state``:
    the best weights), ``evals`` (one row per epoch), ``rng``, ``config`` (the resolved
    :class:`TrainConfig`), ``meta`` (``model`` config, ``n_train``, ``targets``),
    ``stateful`` and ``train_time_s``.

    Raises
    ------
    sci_moe._util.CheckpointError
        A missing, damaged or unreadable file (a ``ValueError``).
    """
    return load_verified(path, what="SPiCE training checkpoint")


def save_model(model: EnsembleRegressor, path: str | Path, **metadata: str) -> None:
    """Write weights + config as ``safetensors`` (atomically).

    The metadata key ``"sci_moe"`` holds ``{"kind": "molecule-model", "class": ...,
    "config": {...}}`` as JSON; extra string ``metadata`` is stored beside it.
    Read it back with :func:`load_model`.
    """
    from safetensors.torch import save as to_safetensors_bytes

    info = {"kind": "molecule-model", **_config_dict(model)}
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    atomic_write_bytes(
        path, to_safetensors_bytes(state, metadata={"sci_moe": json.dumps(info), **metadata})
    )


def load_model(path: str | Path) -> EnsembleRegressor:
    """Rebuild a model written by :func:`save_model` (eval mode)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    from .baselines import GNN2D, BaselineConfig, ConformerBaseline
    from .model import SPiCE, SPiCEConfig

    path = Path(path)
    if not path.exists():
        raise ValueError(f"no model file at {path}")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if "sci_moe" not in meta:
        raise ValueError(f"{path} was not written by sci_moe.molecules.spice.save_model")
    info = json.loads(meta["sci_moe"])
    if info.get("kind") != "molecule-model":
        raise ValueError(f"{path} holds a {info.get('kind')!r}, not a molecule model")
    cls_name = info.pop("class")
    info.pop("kind")
    classes = {
        "SPiCE": (SPiCE, SPiCEConfig),
        "ConformerBaseline": (ConformerBaseline, BaselineConfig),
        "GNN2D": (GNN2D, BaselineConfig),
    }
    if cls_name not in classes:
        raise ValueError(f"{path}: unknown model class {cls_name!r}")
    cls, cfg_cls = classes[cls_name]
    model = cls(cfg_cls(**info))
    model.load_state_dict(load_file(str(path)))
    return model.eval()


def _config_dict(model) -> dict:
    cfg = getattr(model, "config", None)
    d = asdict(cfg) if is_dataclass(cfg) else {}
    return {"class": type(model).__name__, **d}


def _target_names(names, n_targets):
    if names is None:
        return [f"target_{i}" for i in range(n_targets)]
    names = list(names)
    if len(names) != n_targets:
        raise ValueError(f"target_names has {len(names)} names for {n_targets} targets")
    return names


class _EpochStats:
    """Training loss and auxiliary loss summed over the current epoch (checkpointed).

    ``loss_sum``/``n`` are over the global batches (the engine's loss is already the mean
    over every process); ``aux_sum``/``aux_n`` over this process's share, summed over the
    processes when the epoch ends.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loss_sum, self.n, self.aux_sum, self.aux_n, self.lr = 0.0, 0, 0.0, 0, 0.0

    def state_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("loss_sum", "n", "aux_sum", "aux_n", "lr")}

    def load_state_dict(self, state: dict) -> None:
        for k, v in state.items():
            setattr(self, k, v)


def fit(
    model: EnsembleRegressor,
    train: Sequence[EnsembleGraph],
    val: Sequence[EnsembleGraph],
    test: Sequence[EnsembleGraph] | None = None,
    config: TrainConfig | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    target_names: Sequence[str] | None = None,
    stop_after: int | None = None,
) -> dict:
    """Train ``model`` on the engine with early stopping on the validation MAE.

    The run is :class:`sci_moe.train.Trainer`'s: ``config.epochs`` passes over
    ``train`` in mini-batches reshuffled every epoch
    (:class:`~sci_moe.train.ShuffledBatches`), one evaluation of the validation set per
    epoch, the weights of the best validation score kept, and the engine's checkpoints,
    budget (``max_hours``), threads, device and data parallelism. With
    ``config.device="cuda"`` the model, the training batches and the evaluation batches
    live on the GPU; the target normalisation is fitted on the CPU and copied there.

    Parameters
    ----------
    model : EnsembleRegressor
        SPiCE or a baseline (:func:`~sci_moe.molecules.spice.baselines.build_model`). Its
        target normalisation is fitted on ``train`` (a resumed run loads it).
    train, val : sequence of EnsembleGraph
        Training and validation molecules (targets in ``y``).
    test : sequence of EnsembleGraph, optional
        Evaluated once, with the best-validation weights.
    config : TrainConfig
    out_dir : path, optional
        Where the engine's ``checkpoint.pt`` (written every epoch) and ``metrics.jsonl``
        go, and ``results.json``.
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` (or ``checkpoint_prev.pt`` when that is
        damaged) when it exists: bit-identical to an uninterrupted run on the same machine
        and thread count.
    target_names : sequence of str, optional
        Names of the targets in the results.
    stop_after : int, optional
        Return after this many epochs of *this call* (a deliberate interruption, e.g.
        to test resuming); the results then describe the state so far.

    Notes
    -----
    Model selection uses the mean over targets of the validation MAE divided by the
    training standard deviation of the target (``val_score``). Upcycling
    (``upcycle_epochs``) is a hook after the last dense step. Under ``torchrun``
    (:func:`sci_moe.train.init_distributed`) each global batch of ``batch_size``
    molecules is split over the processes, the gradients are averaged by the engine,
    every rank evaluates the full validation and test sets, and only rank 0 writes.

    Returns
    -------
    dict
        JSON-serialisable: ``model`` (class and config), ``train_config`` (the resolved
        engine config), ``n_params``, ``n_train``/``n_val``/``n_test``, ``epochs_run``
        (completed epochs), ``step``, ``best_epoch``, ``stopped_early``, ``finished``,
        ``reason`` (the engine's), ``targets``, ``val_mae`` and ``test_mae`` (dicts
        target -> MAE of the best-validation weights; test ``None`` without ``test``),
        ``test_expert_load``, ``train_time_s`` (optimisation wall time, evaluation
        excluded), ``history`` (per epoch ``epoch``, ``lr``, ``train_loss``,
        ``aux_loss``, ``val_mae``, ``val_score``). A finished run leaves the best weights
        in ``model``; an interrupted one the weights to continue from.
    """
    cfg = config if config is not None else TrainConfig()
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(cfg).__name__}")
    if not isinstance(model, EnsembleRegressor):
        raise TypeError(f"model must be an EnsembleRegressor, got {type(model).__name__}")
    if len(train) < 2 or len(val) < 1:
        raise ValueError("need at least two training and one validation molecule")
    if resume and out_dir is None:
        raise ValueError("resume=True needs out_dir (where the checkpoint is)")
    if stop_after is not None and stop_after < 1:
        raise ValueError(f"stop_after must be >= 1 epoch, got {stop_after}")
    names = _target_names(target_names, model.n_targets)
    upcycling = bool(getattr(model, "is_dense", False)) and getattr(model.config, "use_moe", False)
    if cfg.upcycle_epochs and not upcycling:
        raise ValueError(
            "upcycle_epochs > 0 needs a SPiCE built with upcycle=True (it starts dense)"
        )
    ctx = current_context()
    device = run_device(cfg.device, ctx)  # the engine's rule
    model.to(device)
    # computed on the CPU (the same numbers on every device), copied into the buffers
    model.set_target_stats(torch.stack([g.y for g in train]))  # a resumed run loads its own

    def collate(idx: list[int]):
        batch = collate_ensembles([train[i] for i in idx])
        return batch if device.type == "cpu" else batch.to(device)

    data = ShuffledBatches(len(train), cfg.batch_size, collate, seed=cfg.seed)
    bpe = data.batches_per_epoch
    cfg = cfg.for_batches(bpe)
    stats = _EpochStats()

    def loss_fn(m, batch):
        loss, out = m.loss(batch)
        return loss, {"aux_loss": float(out.aux_loss.detach())}

    def record(info: StepInfo) -> None:
        n = len(data.indices(info.step - 1))
        local = len(data.indices(info.step - 1, ctx.rank, ctx.world_size))
        stats.loss_sum += info.metrics["loss"] * n
        stats.n += n
        stats.aux_sum += info.metrics["aux_loss"] * local
        stats.aux_n += local
        stats.lr = float(info.optimizer.param_groups[0]["lr"])

    def validate(m) -> dict:
        val_mae = evaluate(m, val, cfg.eval_batch_size)["mae"]
        # model selection on the mean of per-target MAEs scaled by the target std
        score = float(np.mean(np.asarray(val_mae) / m.target_std.cpu().numpy()))
        aux_sum, aux_n = all_reduce_sum([stats.aux_sum, stats.aux_n], ctx)
        row = {
            "val_score": score,
            "val_mae": val_mae,
            "epoch": trainer.step // bpe,
            "lr": stats.lr,
            "train_loss": stats.loss_sum / max(stats.n, 1),
            "aux_loss": aux_sum / max(aux_n, 1),
        }
        stats.reset()
        return row

    hooks = [record]
    dense_steps = cfg.upcycle_epochs * bpe
    if upcycling and cfg.upcycle_epochs == 0:
        model.upcycle_()  # routed from the first step
    elif upcycling:

        def upcycle(info: StepInfo) -> None:
            if info.step == dense_steps and model.is_dense:
                model.upcycle_(info.optimizer)  # expert 0 and its AdamW moments

        hooks.append(upcycle)

    meta = {"model": _config_dict(model), "n_train": len(train), "targets": names}
    trainer = Trainer(
        model,
        loss_fn,
        data,
        cfg,
        evaluate=validate,
        out_dir=out_dir,
        hooks=hooks,
        stateful={"epoch_stats": stats},
        meta=meta,
        name=type(model).__name__,
        # early stopping counts only the epochs after the upcycling
        patience_after=dense_steps if upcycling else 0,
    )
    res = trainer.fit(resume=resume, stop_after=None if stop_after is None else stop_after * bpe)

    last_state = None
    if not res.finished and trainer.best_state is not None:
        last_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(trainer.best_state)
    val_ev = evaluate(model, val, cfg.eval_batch_size)
    test_ev = evaluate(model, test, cfg.eval_batch_size) if test else None
    if last_state is not None:
        model.load_state_dict(last_state)  # interrupted: keep the state to continue from
    history = {k: [e[k] for e in res.evals] for k in _HISTORY}
    results = {
        "model": _config_dict(model),
        "train_config": cfg.to_dict(),
        "n_params": model.num_parameters(),
        "n_train": len(train),
        "n_val": len(val),
        "n_test": len(test) if test else 0,
        "epochs_run": res.step // bpe,
        "step": res.step,
        "best_epoch": None if res.best_step is None else res.best_step // bpe,
        "stopped_early": res.reason == "early_stop",
        "finished": res.finished,
        "reason": res.reason,
        "targets": names,
        "val_mae": dict(zip(names, val_ev["mae"], strict=True)),
        "test_mae": dict(zip(names, test_ev["mae"], strict=True)) if test_ev else None,
        "test_expert_load": test_ev["expert_load"] if test_ev else [],
        "train_time_s": res.train_time_s,
        "history": history,
    }
    if out_dir is not None and ctx.is_main:
        atomic_save_json(Path(out_dir) / RESULTS_NAME, results, indent=1)
    return results


_HISTORY = ("epoch", "lr", "train_loss", "aux_loss", "val_mae", "val_score")
