"""``sci-moe train mvcge``: MvCGE multi-view collaborative graph experts (or a baseline).

Semi-supervised node classification on a multi-view graph: a user's graph (``--data``, an
``.npz`` or a folder, see :func:`sci_moe.graphs.load_multiview_graph`) or, by default, a
generated multi-view contextual SBM (``--setting complementary``: view v makes class v a
community; ``consistent``: every view has the same communities) whose Bayes-optimal
accuracy is reported beside the model's. Every step is one full-batch epoch; the
validation cross-entropy (every 2 epochs) picks the weights kept and stops the run after
100 evaluations without a new best (``--monitor val_accuracy --mode max``: the validation
accuracy). The defaults are ``benchmarks/mvcge/run.py``'s MvCGE: per-node graph-aware
routing, L_le on the full softmax, concatenated views. ``OUT/results.json`` holds the
test accuracy and macro-F1 (and the Bayes accuracy of the SBM), ``OUT/model.pt`` the
weights (CPU tensors) and the model's options. With ``--device cuda`` the model trains
and is scored on the GPU (the graph is built on the CPU and moved there once).

Examples
--------
.. code-block:: console

    $ sci-moe train mvcge --out runs/mvcge --steps 200
    $ sci-moe train mvcge --out runs/late --model late_fusion --setting consistent \\
          --contrast 0.4,0.4,0.4
    $ sci-moe train mvcge --out runs/mine --data my_graph/ --steps 300
    $ sci-moe train mvcge --out runs/mvcge-gpu --device cuda
"""

from __future__ import annotations

from pathlib import Path

from ._common import TrainMethod

__all__ = ["METHOD", "MODEL_FORMAT", "MODEL_NAME", "run"]

MODEL_NAME = "model.pt"
#: ``format`` of ``model.pt``.
MODEL_FORMAT = "sci_moe.graphs.node_classifier/1"


def _config():
    from ...graphs.mvcge import MvCGETrainConfig

    return MvCGETrainConfig


def run(cfg, out: Path, resume: bool) -> dict:
    """Train and score the model of ``cfg`` in ``out``; write ``model.pt`` when done."""
    from ..._util import atomic_torch_save
    from ...graphs.mvcge import run_mvcge
    from ...train import current_context

    res = run_mvcge(cfg, out, resume)
    r = res["result"]
    results = {
        "train": r.train,
        "best_epoch": r.best_epoch,
        "val_accuracy": r.val_accuracy,
        "test_accuracy": r.test_accuracy,
        "test_macro_f1": r.test_macro_f1,
    }
    if "bayes_accuracy" in res:
        results["bayes_accuracy"] = res["bayes_accuracy"]
    if r.train["finished"] and current_context().is_main:
        g = res["graph"]
        atomic_torch_save(
            out / MODEL_NAME,
            {
                "format": MODEL_FORMAT,
                "model": cfg.model,
                "config": cfg.to_dict(),
                "graph": {"nodes": g.num_nodes, "views": g.num_views, "features": g.num_features},
                "state_dict": {k: v.cpu() for k, v in res["model"].state_dict().items()},
            },
        )
        bayes = results.get("bayes_accuracy")
        print(
            f"{cfg.model}: test accuracy {r.test_accuracy:.4f}, macro-F1 {r.test_macro_f1:.4f}"
            + (f" (Bayes-optimal {bayes:.4f})" if bayes is not None else "")
        )
    return results


METHOD = TrainMethod(
    name="mvcge",
    help="MvCGE multi-view collaborative graph experts",
    config=_config,
    run=run,
    outputs=(MODEL_NAME,),
    description=(
        "Train MvCGE (graph experts shared by the views of a multi-view graph, routed per "
        "view, with load-equilibrium and graph-discrepancy losses) or a baseline GCN on "
        "semi-supervised node classification; by default on a generated multi-view "
        "contextual SBM with its Bayes-optimal accuracy."
    ),
)
