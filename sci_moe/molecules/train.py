"""Training API for SPiCE and its baselines: splits, schedule, checkpoints, early stopping.

:func:`fit` trains any :class:`~sci_moe.molecules.model.EnsembleRegressor` on lists of
:class:`~sci_moe.molecules.graph.EnsembleGraph` with the MARCEL protocol: a
molecule-level 70/10/20 split (:func:`split_indices`), early stopping on the validation
MAE, and the test MAE of the weights with the best validation MAE. Checkpoints are
written atomically (temporary file + ``os.replace``) and hold everything that changes
during training (weights, optimiser, data-order generator, global RNG, best weights,
history), so a run that is stopped and resumed ends with bit-identical weights.

Pitfalls of the public SPiCE code avoided here (``papers/molecules.md`` §2): the LR
schedule is a function of the optimiser step that is *applied* every step (the public
code passes the loss as the epoch to ``LambdaLR.step`` and trains at ~0.2x the base LR
throughout); upcycling copies the dense expert into all experts in place once, and the
optimiser keeps training them; router noise is off in evaluation.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np
import torch

from .._util import atomic_save_json, atomic_torch_save, atomic_write_bytes, progress_bar
from .distributed import all_reduce_sum, current_context, local_order, wrap_loss
from .graph import EnsembleGraph, collate_ensembles
from .model import EnsembleRegressor
from .train_config import TrainConfig

__all__ = [
    "CHECKPOINT_NAME",
    "RESULTS_NAME",
    "TrainConfig",
    "evaluate",
    "fit",
    "load_checkpoint",
    "load_model",
    "save_model",
    "split_indices",
]

CHECKPOINT_NAME = "checkpoint.pt"
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
    """Load a checkpoint of :func:`fit` (``weights_only=True``, CPU tensors).

    Keys: ``model``, ``optimizer``, ``best_model`` (state dicts), ``epoch``, ``step``,
    ``best_epoch``, ``best_val``, ``bad_epochs``, ``rng``, ``data_rng`` (generator
    states), ``history``, ``model_config``, ``train_config`` (dicts), ``train_time_s``.
    """
    return torch.load(Path(path), map_location="cpu", weights_only=True)


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
        raise ValueError(f"{path} was not written by sci_moe.molecules.save_model")
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


def _optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr)


@torch.no_grad()
def _upcycle(model, optimizer: torch.optim.Optimizer) -> None:
    """Copy expert 0 into every expert, and its AdamW moments too."""
    model.upcycle_(optimizer)


def _target_names(names, n_targets):
    if names is None:
        return [f"target_{i}" for i in range(n_targets)]
    names = list(names)
    if len(names) != n_targets:
        raise ValueError(f"target_names has {len(names)} names for {n_targets} targets")
    return names


def fit(
    model: EnsembleRegressor,
    train: Sequence[EnsembleGraph],
    val: Sequence[EnsembleGraph],
    test: Sequence[EnsembleGraph] | None = None,
    config: TrainConfig | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    target_names: Sequence[str] | None = None,
    callback: Callable[[int, EnsembleRegressor, dict], None] | None = None,
    stop_after: int | None = None,
) -> dict:
    """Train ``model`` with early stopping on the validation MAE.

    Parameters
    ----------
    model : EnsembleRegressor
        SPiCE or a baseline (:func:`~sci_moe.molecules.baselines.build_model`). Its
        target normalisation is fitted on ``train`` (unless resuming).
    train, val : sequence of EnsembleGraph
        Training and validation molecules (targets in ``y``).
    test : sequence of EnsembleGraph, optional
        Evaluated once, with the best-validation weights.
    config : TrainConfig
    out_dir : path, optional
        Where ``checkpoint.pt`` and ``results.json`` are written.
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` when it exists (bit-identical to an
        uninterrupted run on the same machine and thread count).
    target_names : sequence of str, optional
        Names of the targets in the results.
    callback : callable, optional
        ``callback(epoch, model, history)`` after every epoch.
    stop_after : int, optional
        Return after this many epochs of *this call* (a deliberate interruption, e.g.
        to test resuming); the results then describe the state so far.

    Notes
    -----
    Under ``torchrun`` (a process group started by
    :func:`~sci_moe.molecules.distributed.init_distributed`) the model is wrapped in
    DistributedDataParallel, every global batch of ``config.batch_size`` molecules is
    split over the ranks (:func:`~sci_moe.molecules.distributed.local_order`), and only
    rank 0 writes the checkpoint and the results; every rank evaluates the full
    validation and test sets (same numbers on every rank).

    Returns
    -------
    dict
        JSON-serialisable: ``model`` (class and config), ``train_config``,
        ``n_params``, ``epochs_run``, ``best_epoch``, ``stopped_early``,
        ``val_mae`` and ``test_mae`` (dicts target -> MAE at the best epoch; test
        ``None`` without ``test``), ``train_time_s`` (optimisation wall time, evaluation
        excluded), ``history`` (per epoch ``epoch``, ``lr``, ``train_loss``,
        ``aux_loss``, ``val_mae``), ``test_expert_load``. The best model weights are
        loaded into ``model`` on return.
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
    names = _target_names(target_names, model.n_targets)
    upcycling = bool(getattr(model, "is_dense", False)) and getattr(model.config, "use_moe", False)
    if cfg.upcycle_epochs and not upcycling:
        raise ValueError(
            "upcycle_epochs > 0 needs a SPiCE built with upcycle=True (it starts dense)"
        )
    out = Path(out_dir) if out_dir is not None else None
    ckpt = out / CHECKPOINT_NAME if out is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    ctx = current_context()
    model.to(ctx.device)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    optimizer = _optimizer(model, cfg)
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    history = {"epoch": [], "lr": [], "train_loss": [], "aux_loss": [], "val_mae": []}
    epoch, step, best_epoch, best_val, bad, train_time = 0, 0, -1, math.inf, 0, 0.0
    best_state = None
    if resume and ckpt.exists():
        ck = load_checkpoint(ckpt)
        if ck["model_config"] != _config_dict(model):
            raise ValueError(
                f"checkpoint {ckpt} was written for a different model: {ck['model_config']}"
            )
        model.load_state_dict(ck["model"])
        optimizer = _optimizer(model, cfg)
        optimizer.load_state_dict(ck["optimizer"])
        gen.set_state(ck["data_rng"])
        torch.set_rng_state(ck["rng"])
        epoch, step = int(ck["epoch"]), int(ck["step"])
        best_epoch, best_val, bad = (
            int(ck["best_epoch"]),
            float(ck["best_val"]),
            int(ck["bad_epochs"]),
        )
        best_state, history = ck["best_model"], ck["history"]
        train_time = float(ck["train_time_s"])
    else:
        model.set_target_stats(torch.stack([g.y for g in train]))

    def save() -> None:
        if ckpt is None or not ctx.is_main:
            return
        atomic_torch_save(
            ckpt,
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "best_model": best_state,
                "epoch": epoch,
                "step": step,
                "best_epoch": best_epoch,
                "best_val": best_val,
                "bad_epochs": bad,
                "rng": torch.get_rng_state(),
                "data_rng": gen.get_state(),
                "history": history,
                "model_config": _config_dict(model),
                "train_config": asdict(cfg),
                "train_time_s": train_time,
            },
        )

    def stopping() -> bool:
        return cfg.patience > 0 and bad >= cfg.patience

    show = cfg.progress and ctx.is_main
    loss_fn = wrap_loss(model, ctx)
    bar = progress_bar(total=cfg.epochs, initial=epoch, desc="fit", disable=not show, leave=False)
    ran = 0
    try:
        while epoch < cfg.epochs and not stopping():
            if stop_after is not None and ran >= stop_after:
                break
            if upcycling and epoch == cfg.upcycle_epochs and model.is_dense:
                _upcycle(model, optimizer)
            model.train()
            t0 = time.perf_counter()
            order = torch.randperm(len(train), generator=gen).tolist()
            order, local_bs = local_order(order, cfg.batch_size, ctx)
            tot, tot_aux, n = 0.0, 0.0, 0
            for batch in _batches(train, local_bs, order, ctx.device):
                lr = cfg.lr_at(step, steps_per_epoch)
                for g in optimizer.param_groups:
                    g["lr"] = lr
                loss, aux = loss_fn(batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                optimizer.step()
                step += 1
                tot += float(loss.detach()) * batch.num_mols
                tot_aux += float(aux) * batch.num_mols
                n += batch.num_mols
            tot, tot_aux, n = all_reduce_sum([tot, tot_aux, n], ctx)
            train_time += time.perf_counter() - t0
            ev = evaluate(model, val, cfg.eval_batch_size)
            val_mae = ev["mae"]
            # model selection on the mean of per-target MAEs scaled by the target std
            score = float(np.mean(np.asarray(val_mae) / model.target_std.cpu().numpy()))
            epoch += 1
            ran += 1
            history["epoch"].append(epoch)
            history["lr"].append(lr)
            history["train_loss"].append(tot / n)
            history["aux_loss"].append(tot_aux / n)
            history["val_mae"].append(val_mae)
            counting = not (upcycling and epoch <= cfg.upcycle_epochs)
            if score < best_val or best_state is None:
                best_val, best_epoch, bad = score, epoch, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            elif counting:
                bad += 1
            bar.update(1)
            bar.set_postfix(
                loss=f"{tot / n:.3f}", val=f"{score:.3f}", lr=f"{lr:.1e}", refresh=False
            )
            if epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs or stopping():
                save()
            if callback is not None:
                callback(epoch, model, history)
    finally:
        bar.close()
    save()

    last_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if best_state is not None:
        model.load_state_dict(best_state)
    val_ev = evaluate(model, val, cfg.eval_batch_size)
    test_ev = evaluate(model, test, cfg.eval_batch_size) if test else None
    finished = stop_after is None or epoch >= cfg.epochs or stopping()
    if not finished:
        model.load_state_dict(last_state)  # interrupted: keep training state in the model
    results = {
        "model": _config_dict(model),
        "train_config": asdict(cfg),
        "n_params": model.num_parameters(),
        "n_train": len(train),
        "n_val": len(val),
        "n_test": len(test) if test else 0,
        "epochs_run": epoch,
        "best_epoch": best_epoch,
        "stopped_early": stopping(),
        "finished": finished,
        "targets": names,
        "val_mae": dict(zip(names, val_ev["mae"], strict=True)),
        "test_mae": dict(zip(names, test_ev["mae"], strict=True)) if test_ev else None,
        "test_expert_load": test_ev["expert_load"] if test_ev else [],
        "train_time_s": train_time,
        "history": history,
    }
    if out is not None and ctx.is_main:
        atomic_save_json(out / RESULTS_NAME, results, indent=1)
    return results
