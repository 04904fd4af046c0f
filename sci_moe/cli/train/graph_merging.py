"""``sci-moe train graph-merging``: AnyGraph-style graph experts and expert merging.

Generates a multi-domain link-prediction collection (SBM, latent-geometry,
Barabási-Albert and Watts-Strogatz graphs with held-out edges, plus unseen graphs),
pre-trains the expert bank with competence routing (``OUT/pretrain/``), fine-tunes the
merged experts of the chosen ``--strategy`` (``OUT/finetune/``; merge_tuned, kdem, ppem)
and scores top-1, ensemble, plain merge and the strategy: ``OUT/results.json`` holds the
mean AUC, Recall@20 and NDCG@20 zero-shot on the unseen test graphs and on the held-out
edges of the training graphs; ``OUT/model.pt`` the pre-trained and fine-tuned weights.
The validation metric (``val_auc``) is the zero-shot AUC on separate unseen graphs.
With ``--device cuda`` the experts (pre-trained, fine-tuned and merged) train and are
evaluated on the GPU; the graphs are generated, encoded and scored on the CPU, and
``model.pt`` holds CPU tensors.

Examples
--------
.. code-block:: console

    $ sci-moe train graph-merging --out runs/merge --strategy kdem --steps 600
    $ sci-moe train graph-merging --out runs/merge --strategy kdem --steps 600 --resume
    $ sci-moe train graph-merging --out runs/merge-gpu --strategy kdem --device cuda
"""

from __future__ import annotations

from pathlib import Path

from ._common import TrainMethod

__all__ = ["METHOD", "MODEL_FORMAT", "MODEL_NAME", "run"]

MODEL_NAME = "model.pt"
#: ``format`` of ``model.pt``.
MODEL_FORMAT = "sci_moe.graphs.graph_merging/1"
_PHASE_FILES = tuple(
    f"{phase}/{name}"
    for phase in ("pretrain", "finetune")
    for name in ("checkpoint.pt", "checkpoint_prev.pt", "metrics.jsonl")
)


def _config():
    from ...graphs.merging import GraphMergingConfig

    return GraphMergingConfig


def run(cfg, out: Path, resume: bool) -> dict:
    """Pre-train, fine-tune and score in ``out``; write ``model.pt`` when done."""
    from dataclasses import asdict

    from ..._util import atomic_torch_save
    from ...graphs.merging import run_graph_merging
    from ...train import current_context

    res = run_graph_merging(cfg, out, resume)
    results = {k: res[k] for k in ("train", "zero_shot", "held_out_edges") if k in res}
    if res["train"]["finished"] and current_context().is_main:
        tuned = res["tuned"]
        atomic_torch_save(
            out / MODEL_NAME,
            {
                "format": MODEL_FORMAT,
                "config": asdict(res["pretrained"].config),
                "strategy": cfg.strategy,
                "top_k": cfg.top_k,
                "pretrained": _cpu_state(res["pretrained"]),
                "tuned": _cpu_state(tuned) if tuned is not None else None,
            },
        )
        shown_as = {"zero_shot": "unseen test graphs", "held_out_edges": "held-out edges"}
        for key, what in shown_as.items():
            if key in results:
                shown = ", ".join(f"{s} {m['auc']:.3f}" for s, m in results[key].items())
                print(f"AUC on the {what}: {shown}")
    return results


def _cpu_state(model) -> dict:
    """``model.state_dict()`` with CPU tensors (a GPU run's file loads anywhere)."""
    return {k: v.cpu() for k, v in model.state_dict().items()}


METHOD = TrainMethod(
    name="graph-merging",
    help="AnyGraph-style graph experts and expert merging",
    config=_config,
    run=run,
    outputs=(MODEL_NAME, *_PHASE_FILES),
    description=(
        "Pre-train an AnyGraph-style bank of graph experts with competence routing on "
        "generated link-prediction graphs, fine-tune the merged top-k experts (--strategy "
        "merge_tuned, kdem or ppem) and score top-1, ensemble, plain merge and the "
        "strategy zero-shot on unseen graphs and on held-out edges."
    ),
)
