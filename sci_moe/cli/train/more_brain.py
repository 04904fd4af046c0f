"""``sci-moe train more-brain``: MoRE-Brain's hierarchical expert-choice encoder on planted fMRI.

The data are planted voxels (:func:`sci_moe.data.planted_fmri.planted_fmri`): real
all-MiniLM-L6-v2 embeddings of the offline newsgroup sentences as the targets, and
several subjects' voxels in planted hierarchical regions (per-subject permutation and
gain, ``--snr``), so the regions each expert should pick are known. The last
``--n-test`` sentences test, the ``--n-val`` before them validate, the rest train, for
every subject. The encoder (:class:`sci_moe.neuro.more_brain.MoREBrainEncoder`) trains on the
engine (:func:`sci_moe.neuro.more_brain.train_encoder`) with validation retrieval every
``--eval-every`` steps; the best weights are tested.

Writes ``OUT/model.pt`` (the encoder's config and weights, CPU tensors),
``OUT/results.json`` (test top-1/top-5 retrieval per subject, the ridge baseline's, and
the adjusted Rand index and NMI of every level's voxel -> expert map against the planted
regions) and the engine's files. With ``--device cuda`` the encoder trains, validates and
is tested on the GPU (the voxels stay on the CPU and go there batch by batch; the ridge
baseline fits on the CPU).

Examples
--------
.. code-block:: console

    $ sci-moe train more-brain --out runs/more_brain
    $ sci-moe train more-brain --out runs/flat --experts 16
    $ sci-moe train more-brain --out runs/low_snr --snr 0.1 --steps 4000 --max-hours 1
    $ sci-moe train more-brain --out runs/more_brain_gpu --device cuda
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ..._util import check_int_attr
from ...neuro.more_brain import TrainConfig
from ._common import TrainMethod

__all__ = ["METHOD", "MoREBrainRunConfig", "run"]


@dataclass
class MoREBrainRunConfig(TrainConfig):
    """Options of ``sci-moe train more-brain``: training (the engine's and MoRE-Brain's),
    data and model.

    Parameters
    ----------
    num_voxels : int
        Voxels per subject.
    num_subjects : int
        Subjects trained together.
    snr : float
        Signal-to-noise variance ratio of every voxel.
    max_sentences : int or None
        Use a seeded subset of the corpus's sentences (none: all, about 1500).
    n_val : int
        Validation sentences (before the test ones).
    n_test : int
        Test sentences (the last ones).
    data_seed : int
        Seed of the planted regions, permutations, gains, noise and sentence subset.
    cache : str or None
        The MiniLM embedding cache file (none: the default next to ``$SCI_MOE_CACHE``).
    d_model : int
        Voxel-token size.
    d_hidden : int
        Hidden size of each MLP expert.
    experts : tuple of int
        Experts per level (MoRE-Brain: 2,4,8,16; a single number is a flat MoE).
    capacity_factor : float
        Expert-choice capacity factor.
    noise_std : float
        Router logit noise in training.
    fusion : {"mean", "learned"}
        Average the level embeddings or mix them with learned weights.
    """

    steps: int = 1000
    batch_size: int = 64
    schedule: str = "cosine"
    warmup: float = 0.05
    grad_clip: float | None = 1.0
    eval_every: int = 100
    progress: bool = True
    num_voxels: int = 256
    num_subjects: int = 2
    snr: float = 1.0
    max_sentences: int | None = None
    n_val: int = 150
    n_test: int = 300
    data_seed: int = 0
    cache: str | None = None
    d_model: int = 32
    d_hidden: int = 64
    experts: tuple[int, ...] = (2, 4, 8, 16)
    capacity_factor: float = 1.0
    noise_std: float = 1e-3
    fusion: str = "mean"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, lo in (
            ("num_voxels", 2),
            ("num_subjects", 1),
            ("n_val", 2),
            ("n_test", 2),
            ("d_model", 1),
            ("d_hidden", 1),
        ):
            check_int_attr(self, name, lo)
        if self.max_sentences is not None and (
            isinstance(self.max_sentences, bool)
            or not isinstance(self.max_sentences, int)
            or self.max_sentences < 10
        ):
            raise ValueError(
                f"max_sentences must be an integer >= 10 or none, got {self.max_sentences!r}"
            )
        check_int_attr(self, "data_seed")
        for name in ("snr", "capacity_factor"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise ValueError(f"{name} must be a number > 0, got {v!r}")
        v = self.noise_std
        if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0:
            raise ValueError(f"noise_std must be a number >= 0, got {v!r}")
        self.experts = tuple(self.experts)
        if not self.experts or not all(
            isinstance(e, int) and not isinstance(e, bool) and e >= 1 for e in self.experts
        ):
            raise ValueError(f"experts must be integers >= 1 (one per level), got {self.experts!r}")
        self.encoder_config({"s": self.num_voxels}, 8)  # the encoder's checks

    def encoder_config(self, voxels_per_subject: dict, target_dim: int):
        """The :class:`~sci_moe.neuro.more_brain.MoREBrainConfig` of these options."""
        from ...neuro.more_brain import MoREBrainConfig

        return MoREBrainConfig(
            voxels_per_subject=voxels_per_subject,
            target_dim=target_dim,
            d_model=self.d_model,
            experts=self.experts,
            capacity_factor=self.capacity_factor,
            d_hidden=self.d_hidden,
            noise_std=self.noise_std,
            fusion=self.fusion,
        )


def run(cfg: MoREBrainRunConfig, out: Path, resume: bool) -> dict:
    """Plant the voxels, train the encoder on the engine, test retrieval and regions."""
    import torch

    from ..._util import atomic_torch_save
    from ...data.planted_fmri import planted_fmri
    from ...neuro.more_brain import (
        MoREBrainEncoder,
        RidgeDecoder,
        assignment_scores,
        predict,
        retrieval_accuracy,
        train_encoder,
        voxel_assignments,
    )
    from ...train import current_context, seed_everything

    _, d = planted_fmri(
        num_voxels=cfg.num_voxels,
        num_subjects=cfg.num_subjects,
        snr=cfg.snr,
        max_sentences=cfg.max_sentences,
        seed=cfg.data_seed,
        cache=cfg.cache,
    )
    m = len(d.targets)
    n_train = m - cfg.n_val - cfg.n_test
    if n_train < 2:
        raise ValueError(
            f"n_val + n_test = {cfg.n_val + cfg.n_test} leave {n_train} of the {m} sentences "
            "to train on; lower --n-val/--n-test or raise --max-sentences"
        )
    y = torch.tensor(d.targets)
    parts = {
        "train": slice(0, n_train),
        "val": slice(n_train, n_train + cfg.n_val),
        "test": slice(n_train + cfg.n_val, m),
    }
    split = {
        k: {s: (torch.tensor(d.voxels[s])[sl], y[sl]) for s in d.subjects}
        for k, sl in parts.items()
    }
    seed_everything(cfg.seed)
    model = MoREBrainEncoder(
        cfg.encoder_config({s: cfg.num_voxels for s in d.subjects}, y.shape[1])
    )
    trained = train_encoder(
        model, split["train"], cfg, validation=split["val"], out_dir=out, resume=resume
    )
    res = trained.result
    results: dict = {
        "train": res.to_dict(),
        "data": {
            k: {"sentences": sl.stop - sl.start, "subjects": len(d.subjects)}
            for k, sl in parts.items()
        },
        "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }
    if not res.finished or not current_context().is_main:
        return results
    atomic_torch_save(
        out / "model.pt",
        {
            "format": "sci-moe-more-brain/1",
            "config": asdict(model.config),
            "model": {k: v.cpu() for k, v in model.state_dict().items()},
        },
    )
    test = {}
    for s, (x, t) in split["test"].items():
        acc = retrieval_accuracy(predict(model, x, s), t)
        xr, tr = split["train"][s]
        ridge = RidgeDecoder(seed=cfg.data_seed).fit(xr.numpy(), tr.numpy())
        base = retrieval_accuracy(ridge.predict(x.numpy()), t)
        test[s] = {
            "top1": acc[1],
            "top5": acc[5],
            "ridge_top1": base[1],
            "ridge_top5": base[5],
            "chance_top1": 1 / t.shape[0],
        }
    results["test"] = test
    first = d.subjects[0]
    x = split["test"][first][0]
    levels = {}
    for level, assigned in enumerate(voxel_assignments(model, x, first)):
        e = cfg.experts[level]
        # the planted level with the same number of regions, if there is one
        if e in d.branching:
            truth = d.roi[first][d.branching.index(e)]
            levels[f"level{level}_{e}_experts"] = assignment_scores(assigned, truth, seed=0)
    results["regions"] = {"subject": first, **levels}
    return results


METHOD = TrainMethod(
    name="more-brain",
    help="MoRE-Brain hierarchical expert-choice fMRI decoding",
    config=lambda: MoREBrainRunConfig,
    run=run,
    outputs=("model.pt",),
    description=(
        "Train MoRE-Brain's stage-1 encoder (hierarchical expert-choice MoE from voxels to "
        "frozen MiniLM sentence embeddings, Wei et al. 2025) on planted multi-subject fMRI "
        "whose regions are known; tests retrieval against a ridge decoder and the experts' "
        "voxel maps against the planted regions."
    ),
)
