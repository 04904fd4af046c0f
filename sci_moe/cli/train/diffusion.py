"""``sci-moe train diffusion``: the energy-based diffusion model of alanine dipeptide.

The recipe of the shipped model (:mod:`sci_moe.sampling.diffusion.alanine_recipe`,
``scripts/train_alanine_energy_model.py``): ScoreMD's time mixture of three SE(3)-invariant
MLP energies over diffusion time, trained high t first with the Fokker-Planck regulariser
on the small-t expert (``--variant both``; ``moe`` without FP, ``plain``/``fp`` one network),
on the coarse-grained backbone beads (``--atoms backbone``; or ``heavy``) of an OpenMM
reference trajectory of alanine dipeptide (amber99sbildn + OBC, 300 K;
:func:`sci_moe.data.alanine_reference.generate_reference`). ``--data FILE`` uses such a
file; without it the command simulates ``--frames`` frames into ``OUT/reference.npz``
first (resumable; about ``frames * interval_steps / 10,000`` seconds on one core).

Training runs on the engine (one run per stage, ``OUT/stage1`` ...,
:class:`sci_moe.train.Phases`; exact resume, ``--max-hours`` for the whole command).
Writes ``OUT/model.safetensors`` (:func:`sci_moe.sampling.diffusion.save_energy_model`;
energies in kJ/mol for bead positions in nm at t = 1e-5), which
``sci-moe md run --model OUT/model.safetensors`` simulates, and ``OUT/results.json``
(per-epoch losses of every stage). ``--device cuda`` trains on a GPU (the simulation of
the reference stays on the CPU; the model file is written from CPU tensors); where torch
sees no GPU it is refused (exit code 2) before anything is written.

Examples
--------
.. code-block:: console

    $ sci-moe train diffusion --out runs/aldp
    $ sci-moe train diffusion --out runs/aldp --data ref.npz --epochs 80 --max-hours 2
    $ sci-moe train diffusion --out runs/aldp --data ref.npz --epochs 80 --max-hours 2 --resume
    $ sci-moe train diffusion --out runs/aldp_gpu --data ref.npz --device cuda
    $ sci-moe md run --model runs/aldp/model.safetensors --out runs/aldp_md
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ...train import TrainConfig
from ._common import TrainMethod

__all__ = ["METHOD", "DiffusionRunConfig", "run"]

_STAGE_FILES = tuple(
    f"stage{i}/{name}"
    for i in range(1, 5)
    for name in ("checkpoint.pt", "checkpoint_prev.pt", "metrics.jsonl")
)


def _int(cfg, name: str, lo: int, optional: bool = False) -> None:
    v = getattr(cfg, name)
    if optional and v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(
            f"{name} must be an integer >= {lo}{' or none' if optional else ''}, got {v!r}"
        )


@dataclass
class DiffusionRunConfig(TrainConfig):
    """Options of ``sci-moe train diffusion``: training (the engine's, per stage), recipe
    and data.

    Parameters
    ----------
    steps : int or None
        Set per stage from the epochs and ``batches_per_epoch``; leave it unset.
    lr : float
        Peak learning rate of every stage (the FP fine-tune stage: 0.3 x), cosine decay to
        ``min_lr_ratio * lr``.
    variant : {"both", "moe", "fp", "plain"}
        Time mixture with FP on the small-t expert (the shipped model), without FP, or one
        network with or without FP.
    atoms : {"backbone", "heavy"}
        The 5 backbone beads (the shipped model) or the 10 heavy atoms.
    epochs : int
        All epochs (a time mixture: 10 / 20 / 70 % per expert, high t first).
    batches_per_epoch : int
        Optimiser steps per epoch (the first batches of each epoch's shuffle).
    high_epochs : tuple of int
        Epochs of the two high-t experts (empty: 10 % and 20 % of ``epochs``).
    low_epochs : int or None
        Epochs of the small-t expert (none: the rest).
    fp_epochs : int or None
        Variant ``both``: train the small-t expert ``low_epochs`` with DSM only, then this
        many epochs with the FP term at 0.3 x ``lr``.
    ema_decay : float
        EMA factor of the weights (0: none).
    ema_reset : bool
        Copy the EMA into the weights at every epoch's end (else only at a stage's end).
    clip_value : float or None
        Element-wise gradient clip (ScoreMD's 1e3).
    compile : bool
        ``torch.compile``-d functional steps (worth it for long runs; compiling costs
        CPU-minutes).
    data : str or None
        A reference trajectory (``generate_reference`` output); none: simulate one into
        ``OUT/reference.npz``.
    frames : int
        Frames to simulate without ``data``.
    interval_steps : int
        MD steps (2 fs) between simulated frames.
    max_frames : int or None
        Use only the first frames of the data.
    data_seed : int
        Seed of the simulated reference.
    """

    steps: int | None = None
    lr: float = 1e-3
    min_lr_ratio: float = 0.01
    batch_size: int = 256
    warmup: float = 0.0
    grad_clip: float | None = None
    weight_decay: float = 1e-4
    eval_every: int = 0
    variant: str = "both"
    atoms: str = "backbone"
    epochs: int = 40
    batches_per_epoch: int = 100
    high_epochs: tuple[int, ...] = ()
    low_epochs: int | None = None
    fp_epochs: int | None = None
    ema_decay: float = 0.995
    ema_reset: bool = False
    clip_value: float | None = 1e3
    compile: bool = False
    data: str | None = None
    frames: int = 10000
    interval_steps: int = 250
    max_frames: int | None = None
    data_seed: int = 0

    def __post_init__(self) -> None:
        if self.steps is not None:
            raise ValueError(
                f"steps={self.steps!r}: the steps are set per stage from epochs and "
                "batches_per_epoch; leave --steps unset and set --epochs"
            )
        self.steps = 1  # the engine's checks; each stage sets its own
        try:
            super().__post_init__()
        finally:
            self.steps = None
        from ...sampling.diffusion.alanine_recipe import ALANINE_VARIANTS

        if self.variant not in ALANINE_VARIANTS:
            raise ValueError(f"variant must be one of {ALANINE_VARIANTS}, got {self.variant!r}")
        if self.atoms not in ("backbone", "heavy"):
            raise ValueError(f"atoms must be 'backbone' or 'heavy', got {self.atoms!r}")
        for name, lo in (("epochs", 1), ("batches_per_epoch", 1), ("frames", 2)):
            _int(self, name, lo)
        _int(self, "interval_steps", 1)
        _int(self, "data_seed", 0)
        _int(self, "low_epochs", 0, optional=True)
        _int(self, "fp_epochs", 1, optional=True)
        _int(self, "max_frames", 2, optional=True)
        self.high_epochs = tuple(self.high_epochs)
        if self.high_epochs and (
            len(self.high_epochs) != 2
            or not all(
                isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in self.high_epochs
            )
        ):
            raise ValueError(
                f"high_epochs must be two integers >= 0 (or empty), got {self.high_epochs!r}"
            )
        if self.fp_epochs and self.variant != "both":
            raise ValueError(f"fp_epochs needs variant 'both', got variant {self.variant!r}")
        if not (isinstance(self.ema_decay, int | float) and 0 <= self.ema_decay < 1):
            raise ValueError(f"ema_decay must be a number in [0, 1), got {self.ema_decay!r}")
        self.train_config()  # the diffusion trainer's checks

    def train_config(self):
        """The :class:`sci_moe.sampling.diffusion.TrainConfig` of these options."""
        from ...sampling.diffusion import TrainConfig as DiffusionConfig
        from ...sampling.diffusion.alanine_recipe import alanine_stages

        stages = alanine_stages(
            self.variant,
            self.epochs,
            self.lr,
            self.high_epochs or None,
            self.low_epochs,
            self.fp_epochs,
        )
        stages = [dataclasses.replace(s, min_lr=s.lr * self.min_lr_ratio) for s in stages]
        engine = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(TrainConfig)
            if f.name not in ("steps", "lr", "min_lr_ratio")
        }
        return DiffusionConfig(
            **engine,
            stages=stages,
            ema_decay=self.ema_decay,
            ema_reset=self.ema_reset,
            clip_value=self.clip_value,
            max_batches_per_epoch=self.batches_per_epoch,
            compile=self.compile,
        )


def run(cfg: DiffusionRunConfig, out: Path, resume: bool) -> dict:
    """Simulate or read the reference, train the recipe on the engine, write the model."""
    import time

    import torch

    from ..._util import BOLTZMANN_KJ_PER_MOL_K
    from ...data.alanine_reference import generate_reference, load_reference
    from ...sampling.diffusion import VPSDE, save_energy_model, train
    from ...sampling.diffusion.alanine_recipe import alanine_model
    from ...train import current_context, seed_everything

    t0 = time.perf_counter()
    tcfg = cfg.train_config()
    if cfg.data is not None:
        path = Path(cfg.data)
        if not path.is_file():
            raise ValueError(f"--data {path} does not exist (a generate_reference .npz)")
    else:
        if current_context().enabled:
            raise ValueError(
                "under torchrun give --data FILE: the reference is simulated by one process "
                "(run once without torchrun, or generate_reference, first)"
            )
        path = out / "reference.npz"
        wall = None if cfg.max_hours is None else cfg.max_hours * 3600
        done = generate_reference(
            path,
            cfg.frames,
            cfg.interval_steps,
            seed=cfg.data_seed,
            progress=cfg.progress,
            max_wall_s=wall,
        )
        if done is None:
            return {
                "train": {"reason": "budget", "finished": False, "step": 0, "steps": None},
                "data": {"simulating": str(path), "note": "the reference is not complete yet"},
            }
        if cfg.max_hours is not None:  # the budget holds for the whole command
            left = cfg.max_hours - (time.perf_counter() - t0) / 3600
            tcfg = dataclasses.replace(tcfg, max_hours=max(left, 1e-9))
    ref = load_reference(path, cfg.atoms)
    pos = ref["positions"][: cfg.max_frames].astype("float64")
    pos = pos - pos.mean(1, keepdims=True)
    nf = 1.0 / float(pos.std())
    data = torch.tensor(pos * nf, dtype=torch.float32)
    seed_everything(cfg.seed)
    model = alanine_model(cfg.variant, data.shape[1])
    res = train(model, data, VPSDE(), tcfg, out_dir=out, resume=resume)
    results: dict = {
        "train": res["summary"],
        "data": {"path": str(path), "frames": len(data), "atoms": cfg.atoms, "scale_per_nm": nf},
        "history": res["history"],
    }
    if not res["done"] or not current_context().is_main:
        return results
    last = {}
    for r in res["history"]:
        last[str(r["stage"])] = r["dsm"]
    results["final_dsm_per_stage"] = last
    save_energy_model(
        model,
        out / "model.safetensors",
        sde=VPSDE(),
        kT=BOLTZMANN_KJ_PER_MOL_K * float(ref["temperature_k"]),
        scale=nf,
        t_eval=1e-5,
        masses=ref["masses"],
        atom_names=[str(a) for a in ref["atom_names"]],
        pdb=None,
        atom_indices=[int(i) for i in ref["atom_indices"]],
        extra={
            "system": f"alanine dipeptide, {cfg.atoms} atoms",
            "data": str(path),
            "frames": len(data),
            "variant": cfg.variant,
            "epochs": [s.epochs for s in tcfg.stages],
            "batches_per_epoch": cfg.batches_per_epoch,
            "batch": cfg.batch_size,
            "lr": cfg.lr,
            "seed": cfg.seed,
            "command": "sci-moe train diffusion",
        },
    )
    return results


METHOD = TrainMethod(
    name="diffusion",
    help="energy-based diffusion model with the Fokker-Planck regulariser",
    config=lambda: DiffusionRunConfig,
    run=run,
    outputs=(
        "model.safetensors",
        "reference.npz",
        "reference.npz.ckpt.pt",
        "reference.npz.ckpt_prev.pt",
        *_STAGE_FILES,
    ),
    description=(
        "Train the energy-based diffusion model of alanine dipeptide (ScoreMD's time mixture "
        "of SE(3)-invariant energies with the Fokker-Planck regulariser, Plainer et al. "
        "2025) on an OpenMM reference trajectory (simulated first without --data); the "
        "model file runs in sci-moe md run --model."
    ),
)
