"""``sci-moe train cogamid``: class-incremental segmentation with Gaussian-mixture replay.

CoGaMiD (or the fine-tuning and single-prototype baselines, ``--method``) on the
procedural multimodal scenes of :mod:`sci_moe.vision.cogamid.data`: step 0 learns the base
classes, every later step one new increment with feature distillation and replayed
pseudo-features of the old classes. Every step is one engine run in ``OUT/task_<t>/``
(checkpoint, ``metrics.jsonl``); ``--resume`` restores the finished steps (refitting the
memory from their weights) and continues the interrupted one exactly.
``OUT/results.json`` holds every step's mIoU (all seen, old, new and base classes);
``OUT/model.pt`` the final weights and the class memory (CPU tensors). With
``--device cuda`` the network (and the frozen previous one) trains and is scored on the
GPU; the scenes and the class memory (its fits and replay draws) stay on the CPU.

Examples
--------
.. code-block:: console

    $ sci-moe train cogamid --out runs/gmm --method gmm --n-components 3
    $ sci-moe train cogamid --out runs/proto --method prototype --scene image_size=32
    $ sci-moe train cogamid --out runs/gmm --method gmm --n-components 3 --resume
    $ sci-moe train cogamid --out runs/gmm-gpu --method gmm --device cuda
"""

from __future__ import annotations

from pathlib import Path

from ._common import TrainMethod

__all__ = ["METHOD", "MODEL_FORMAT", "MODEL_NAME", "run"]

MODEL_NAME = "model.pt"
#: ``format`` of ``model.pt``.
MODEL_FORMAT = "sci_moe.vision.cogamid/1"


def _config():
    from ...vision.cogamid import IncrementalConfig

    return IncrementalConfig


#: Steps of a protocol whose files ``--overwrite`` removes (a run has one per increment).
_MAX_STEPS = 64


def _outputs() -> tuple[str, ...]:
    files = ("checkpoint.pt", "checkpoint_prev.pt", "metrics.jsonl")
    return tuple(f"task_{t}/{name}" for t in range(_MAX_STEPS) for name in files)


def run(cfg, out: Path, resume: bool) -> dict:
    """Run every step of the protocol in ``out``; write ``model.pt`` when done."""
    from ..._util import atomic_torch_save
    from ...train import current_context
    from ...vision.cogamid import run_incremental

    res = run_incremental(cfg, out, resume)
    results = {"train": res["train"], "steps": res["steps"]}
    if res["train"]["finished"] and current_context().is_main:
        memory = res["memory"]
        atomic_torch_save(
            out / MODEL_NAME,
            {
                "format": MODEL_FORMAT,
                "config": cfg.to_dict(),
                "state_dict": {k: v.cpu() for k, v in res["model"].state_dict().items()},
                "memory": memory.state_dict() if memory is not None else {},
            },
        )
        for t, m in enumerate(res["steps"]):
            print(
                f"step {t}: mIoU all {m['miou_all']:.4f}, old {m['miou_old']:.4f}, "
                f"new {m['miou_new']:.4f}"
            )
    return results


METHOD = TrainMethod(
    name="cogamid",
    help="CoGaMiD Gaussian-mixture replay, class-incremental segmentation",
    config=_config,
    run=run,
    outputs=(MODEL_NAME, *_outputs()),
    description=(
        "Class-incremental semantic segmentation on procedural multimodal scenes: CoGaMiD "
        "replays pseudo-features sampled from per-class Gaussian mixtures (--method gmm); "
        "the baselines fine-tune (finetune) or replay one prototype per class (prototype)."
    ),
)
