"""``sci-moe train spice``: train SPiCE (or a baseline) on a conformer-ensemble data set.

The data set is one built by :mod:`sci_moe.data.molecule_set` (a directory holding
``molecule_set.npz``). Options come from a YAML/JSON config file with the sections
``model`` (``name`` plus :class:`~sci_moe.molecules.spice.SPiCEConfig` or
:class:`~sci_moe.molecules.spice.BaselineConfig` fields), ``train``
(:class:`~sci_moe.molecules.spice.TrainConfig` fields: the training engine's, counted in
epochs) and ``data`` (``path``, ``targets``, ``heavy_only``, ``split_seed``); flags given
on the command line override the file. The resolved config is written to
``OUT/config.yaml``; the run (on :class:`sci_moe.train.Trainer`) writes
``OUT/checkpoint.pt`` (every epoch, verified and atomic; ``--resume`` continues it
exactly, from ``checkpoint_prev.pt`` when the newest is damaged), ``OUT/metrics.jsonl``,
``OUT/results.json`` (test MAE at the best validation epoch) and
``OUT/model.safetensors`` (best weights). ``--max-hours`` pauses a long run with a
checkpoint (continue it with ``--resume``; ``--max-hours``, ``--threads`` and
``--device`` may change between the pieces); a diverged run (NaN loss) exits with code 1
and keeps its last good checkpoint. ``--device cuda`` (or ``device: cuda`` in the
``train`` section) trains on a GPU: the model, the batches and the validation and test
sets go there; where torch sees no GPU it is refused (exit code 2) before anything is
written.

Examples
--------
.. code-block:: console

    $ sci-moe data molecules --out data/mols
    $ sci-moe train spice --data data/mols --out runs/spice --epochs 100 --seed 0
    $ sci-moe train spice --config spice.yaml --out runs/spice --max-hours 2
    $ sci-moe train spice --config spice.yaml --out runs/spice --max-hours 2 --resume
    $ sci-moe train spice --data data/mols --out runs/gnn --model gnn2d
    $ sci-moe train spice --data data/mols --out runs/spice_gpu --device cuda
    $ torchrun --standalone --nproc_per_node 2 -m sci_moe.cli.main \
          train spice --data data/mols --out runs/spice_ddp --batch-size 16

Under ``torchrun`` (``WORLD_SIZE > 1`` in the environment) the run is data-parallel
through the engine (:func:`sci_moe.train.init_distributed`): gloo on CPU or NCCL when
CUDA is available (chosen automatically), each global batch of ``--batch-size``
molecules split over the processes and the gradients averaged, and only rank 0 takes the
lock and writes ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from .._errors import flag_error
from ._common import _check_out

__all__ = ["add_spice_parser", "resolve_config", "run_spice"]

# What a run writes to --out (an existing one is refused without --resume/--overwrite).
_OUTPUTS = (
    "config.yaml",
    "checkpoint.pt",
    "checkpoint_prev.pt",
    "metrics.jsonl",
    "results.json",
    "model.safetensors",
)
# flag name -> (section, key)
_MODEL_FLAGS = (
    "hidden",
    "num_layers",
    "num_experts",
    "top_k",
    "cutoff_nm",
    "max_neighbors",
    "readout",
    "noise_std",
    "z_loss_coef",
    "load_balance_coef",
)
_TRAIN_FLAGS = (
    "epochs",
    "batch_size",
    "lr",
    "weight_decay",
    "schedule",
    "warmup_epochs",
    "patience",
    "upcycle_epochs",
    "seed",
    "max_hours",
    "threads",
    "device",
)


def add_spice_parser(tsub) -> argparse.ArgumentParser:
    """Add the ``spice`` subcommand to the subparsers of ``sci-moe train``."""
    p = tsub.add_parser(
        "spice",
        help="SPiCE or a baseline on conformer ensembles",
        description=(
            "Train SPiCE (equivariant geometric MoE over conformer ensembles) or a "
            "baseline with a molecule-level 70/10/20 split, early stopping on the "
            "validation MAE and the test MAE at the best validation epoch."
        ),
    )
    p.add_argument("--config", type=Path, help="YAML/JSON file with model/train/data sections")
    p.add_argument("--data", type=Path, help="molecule-set directory (molecule_set.npz)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument(
        "--model",
        help=(
            "spice (default), spice_dense, single_conformer, random_conformer, "
            "mean_ensemble, deepsets, attention_ensemble, boltzmann_ensemble, gnn2d_3d, gnn2d"
        ),
    )
    p.add_argument("--targets", help="comma-separated target names (default: all)")
    p.add_argument(
        "--heavy-only", action=argparse.BooleanOptionalAction, default=None, help="drop hydrogens"
    )
    p.add_argument("--split-seed", type=int, help="seed of the 70/10/20 split (default 123)")
    p.add_argument("--hidden", type=int, help="channels F")
    p.add_argument("--num-layers", type=int, help="SPiCE / backbone blocks")
    p.add_argument("--num-experts", type=int, help="experts per geometric MoE path")
    p.add_argument("--top-k", type=int, help="experts per token")
    p.add_argument("--cutoff-nm", type=float, help="radius-graph cutoff in nm")
    p.add_argument("--max-neighbors", type=int, help="neighbours per atom at most")
    p.add_argument("--readout", help="mean, boltzmann or learned (SPiCE)")
    p.add_argument("--noise-std", type=float, help="router logit noise (training only)")
    p.add_argument("--z-loss-coef", type=float, help="router z-loss weight")
    p.add_argument("--load-balance-coef", type=float, help="load-balance loss weight")
    p.add_argument("--epochs", type=int, help="maximum epochs")
    p.add_argument("--batch-size", type=int, help="molecules per step")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--weight-decay", type=float, help="AdamW weight decay")
    p.add_argument("--schedule", help="cosine, linear or constant")
    p.add_argument("--warmup-epochs", type=float, help="linear warm-up epochs")
    p.add_argument("--patience", type=int, help="early-stopping patience (epochs; 0 = off)")
    p.add_argument(
        "--upcycle-epochs",
        type=int,
        help="train one dense expert this many epochs, then copy it into every expert",
    )
    p.add_argument("--seed", type=int, help="training seed (data order, router noise)")
    p.add_argument(
        "--max-hours",
        type=float,
        help="wall-time budget: checkpoint and stop after it (continue with --resume)",
    )
    p.add_argument("--threads", type=int, help="CPU threads of torch (default 1; 0: every core)")
    p.add_argument(
        "--device",
        help=(
            "where the model trains: cpu, cuda or cuda:N (train.device; default: the CPU, "
            "under torchrun with NCCL each process's GPU)"
        ),
    )
    p.add_argument("--resume", action="store_true", help="continue OUT/checkpoint.pt")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in OUT (checkpoint, results, model) instead of refusing",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_spice)
    return p


def _read_config(path: Path | None) -> dict:
    if path is None:
        return {}
    if not path.exists():
        raise ValueError(f"config file {path} does not exist")
    text = path.read_text()
    if path.suffix == ".json":
        cfg = json.loads(text)
    else:
        import yaml

        cfg = yaml.safe_load(text) or {}
    if not isinstance(cfg, dict):
        raise ValueError(f"{path} must hold a mapping with model/train/data sections")
    unknown = set(cfg) - {"model", "train", "data"}
    if unknown:
        raise ValueError(f"{path}: unknown sections {sorted(unknown)}; use model, train, data")
    bad = [k for k, v in cfg.items() if v is not None and not isinstance(v, dict)]
    if bad:
        raise ValueError(
            f"{path}: section {bad[0]!r} must be a mapping of options, got "
            f"{type(cfg[bad[0]]).__name__}"
        )
    return {k: dict(v or {}) for k, v in cfg.items()}


def resolve_config(args: argparse.Namespace) -> dict:
    """Merge the config file and the flags into ``{"model", "train", "data"}`` dicts."""
    from ..._util import resolve_device
    from ...molecules.spice import MODEL_NAMES, BaselineConfig, SPiCEConfig, TrainConfig

    cfg = _read_config(args.config)
    model = cfg.get("model", {})
    train = cfg.get("train", {})
    data = cfg.get("data", {})
    for name in _MODEL_FLAGS:
        if getattr(args, name) is not None:
            model[name] = getattr(args, name)
    for name in _TRAIN_FLAGS:
        if getattr(args, name) is not None:
            train[name] = getattr(args, name)
    if args.model is not None:
        model["name"] = args.model
    model.setdefault("name", "spice")
    if model["name"] not in MODEL_NAMES:
        raise ValueError(f"unknown model {model['name']!r}; choose one of {MODEL_NAMES}")
    if args.data is not None:
        data["path"] = str(args.data)
    if args.targets is not None:
        data["targets"] = [t.strip() for t in args.targets.split(",") if t.strip()]
    if args.heavy_only is not None:
        data["heavy_only"] = args.heavy_only
    if args.split_seed is not None:
        data["split_seed"] = args.split_seed
    if args.no_progress:
        train["progress"] = False
    if train.get("device") is not None:
        # first: a device this machine lacks is refused before anything else is checked,
        # loaded or written
        resolve_device(train["device"], what="--device")
    if "path" not in data:
        raise ValueError("no data set: give --data DIR or data.path in the config file")
    data.setdefault("targets", None)
    data.setdefault("heavy_only", False)
    data.setdefault("split_seed", 123)
    unknown_data = set(data) - {"path", "targets", "heavy_only", "split_seed"}
    if unknown_data:
        raise ValueError(f"unknown data options {sorted(unknown_data)}")
    valid = {f.name for f in fields(SPiCEConfig)} | {f.name for f in fields(BaselineConfig)}
    bad = set(model) - valid - {"name"}
    if bad:
        raise ValueError(f"unknown model options {sorted(bad)}")
    bad = set(train) - {f.name for f in fields(TrainConfig)}
    if bad:
        raise ValueError(f"unknown train options {sorted(bad)}")
    try:
        TrainConfig(**train)  # validate early, before loading data
    except ValueError as err:
        raise flag_error(err, "train", _TRAIN_FLAGS) from None
    if train.get("upcycle_epochs", 0) > 0:
        if model["name"] != "spice":
            raise ValueError("--upcycle-epochs needs --model spice (a model with MoE layers)")
        model["upcycle"] = True  # start from one dense expert, copy it after N epochs
    return {"model": model, "train": train, "data": data}


def run_spice(args: argparse.Namespace) -> int:
    """Run ``sci-moe train spice``; returns the exit code."""
    from ..._util import lock_directory
    from ...train import init_distributed

    cfg = resolve_config(args)
    out: Path = args.out
    ctx = init_distributed()  # no-op without torchrun
    if not ctx.is_main:
        _wait_for_main(ctx)
        return _run_locked(args, cfg, out, ctx)
    try:
        _check_out(out, args.resume, args.overwrite, [out / n for n in _OUTPUTS])
        # One writer per --out (the message names the holder); dropped when this process ends.
        lock = lock_directory(
            out, command=f"sci-moe train spice --out {out}" + (" --resume" if args.resume else "")
        )
    except (ValueError, OSError) as err:
        _wait_for_main(ctx, str(err) or type(err).__name__)
        raise
    try:
        return _run_locked(args, cfg, out, ctx)
    finally:
        lock.release()


def _wait_for_main(ctx, error: str | None = None) -> None:
    """Rank 0 tells the other ranks whether it could take ``--out`` (no-op alone)."""
    if not ctx.enabled:
        return
    import torch.distributed as dist

    box = [error]
    dist.broadcast_object_list(box, src=0)
    if box[0] is not None and not ctx.is_main:
        raise ValueError(f"rank 0 refused to start: {box[0]}")


def _settings(cfg: dict, resumable) -> dict:
    """``cfg`` without the train options a resumed run may change."""
    train = {k: v for k, v in (cfg.get("train") or {}).items() if k not in resumable}
    return {**cfg, "train": train}


def _run_locked(args: argparse.Namespace, cfg: dict, out: Path, ctx) -> int:
    import yaml

    from ..._util import atomic_write_text
    from ...data.molecule_set import MoleculeSet
    from ...molecules import ATOM_FEATURE_DIM, BOND_FEATURE_DIM
    from ...molecules.spice import TrainConfig, build_model, fit, save_model
    from ...train import RESUMABLE_CHANGES, TrainingDiverged, seed_everything

    saved = out / "config.yaml"
    data = cfg["data"]
    try:
        if args.resume and saved.exists():
            previous = yaml.safe_load(saved.read_text()) or {}
            if _settings(previous, RESUMABLE_CHANGES) != _settings(cfg, RESUMABLE_CHANGES):
                raise ValueError(
                    f"--resume with a different config than {saved}; use the same options "
                    "(only --max-hours, --threads, --device and --no-progress may change) or "
                    "a new --out"
                )
        ms = MoleculeSet.load(data["path"])  # bad input surfaces before any file is touched
    except (ValueError, OSError) as err:
        if ctx.is_main:
            _wait_for_main(ctx, str(err) or type(err).__name__)
        raise
    if ctx.is_main:
        _wait_for_main(ctx)  # --out is ours: the other ranks may start
        if args.overwrite:
            for name in _OUTPUTS:
                (out / name).unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(saved, yaml.safe_dump(cfg, sort_keys=True))

    targets = data["targets"] or list(ms.target_names)
    graphs = ms.graphs(heavy_only=bool(data["heavy_only"]), targets=targets)
    tr, va, te = ms.split(seed=int(data["split_seed"]))
    model_opts = {k: v for k, v in cfg["model"].items() if k != "name"}
    model_opts.update(n_targets=len(targets), atom_dim=ATOM_FEATURE_DIM, bond_dim=BOND_FEATURE_DIM)
    tcfg = TrainConfig(**cfg["train"])
    seed_everything(tcfg.seed)
    try:
        model = build_model(cfg["model"]["name"], **model_opts)
    except ValueError as err:
        raise flag_error(err, "model", _MODEL_FLAGS) from None
    say = print if ctx.is_main else (lambda *a, **k: None)
    procs = f"; {ctx.world_size} processes ({ctx.backend})" if ctx.enabled else ""
    say(
        f"{cfg['model']['name']}: {model.num_parameters():,} parameters; "
        f"{len(tr)}/{len(va)}/{len(te)} molecules (train/val/test); targets {targets}{procs}",
        flush=True,
    )
    try:
        res = fit(
            model,
            [graphs[i] for i in tr],
            [graphs[i] for i in va],
            [graphs[i] for i in te],
            tcfg,
            out_dir=out,
            resume=args.resume,
            target_names=targets,
        )
    except TrainingDiverged as err:
        if ctx.is_main:
            print(f"sci-moe train spice: error: {err}", file=sys.stderr)
        return 1
    if not ctx.is_main:
        return 0
    if res["reason"] == "budget":
        say(
            f"paused at epoch {res['epochs_run']} of {tcfg.epochs} (step {res['step']}; the "
            f"--max-hours budget); continue with: sci-moe train spice --out {out} --resume "
            "(plus your other options)"
        )
    save_model(model.cpu(), out / "model.safetensors")
    say(f"best epoch {res['best_epoch']} of {res['epochs_run']}; test MAE at best validation:")
    for name, v in res["test_mae"].items():
        say(f"  {name:16s} {v:.4g}")
    say(f"results: {out / 'results.json'}")
    return 0
