"""``sci-moe train lm``: the byte-level MoE language model on the shared engine.

Trains :class:`sci_moe.language.MoETransformerLM` on the Wikipedia excerpt and news
articles shipped in gensim's wheel (or ``--text-file``) with
:func:`sci_moe.language.run_training`. Every option of the model is a flag: the mixer of
each block (``--layers``: attention, Mamba or Routing Mamba), Default MoE
(``--default-moe``), the specialisation losses (``--orthogonality-coef``,
``--variance-coef``), auxiliary-loss-free balancing (``--selection-bias`` with
``--bias-balancing``) and fine-tuning from a checkpoint (``--init-from``).

Writes ``OUT/model.pt`` (single-process weights and the model config, checksummed;
:func:`sci_moe.language.load_checkpoint` reads it), ``OUT/results.json`` (final
validation loss, perplexity, bits per byte and routing diagnostics) and the engine's
files (``checkpoint.pt``, ``metrics.jsonl``).

Examples
--------
.. code-block:: console

    $ sci-moe train lm --out runs/lm --steps 2000 --max-hours 1
    $ sci-moe train lm --out runs/lm --steps 2000 --max-hours 1 --resume
    $ sci-moe train lm --out runs/rom --layers rr --no-positions --d-state 8
    $ sci-moe train lm --out runs/ft --init-from runs/lm/model.pt \\
          --orthogonality-coef 0.01 --variance-coef 0.01 --steps 200
    $ torchrun --standalone --nproc_per_node 2 -m sci_moe.cli.main \\
          train lm --out runs/ep --expert-parallel
"""

from __future__ import annotations

import math
from pathlib import Path

from ._common import TrainMethod

__all__ = ["METHOD", "run"]


def _config():
    from ...language import LMConfig

    return LMConfig


def run(cfg, out: Path, resume: bool) -> dict:
    """Train with ``cfg`` (:class:`~sci_moe.language.LMConfig`) into ``out``."""
    from ...language import load_corpus, run_training, save_model, text_corpus
    from ...train import current_context

    if cfg.text_file is not None:
        path = Path(cfg.text_file)
        if not path.is_file():
            raise ValueError(f"text_file {path} does not exist")
        corpus = text_corpus(path.read_text(encoding="utf-8"), cfg.val_fraction, path.name)
    else:
        corpus = load_corpus(cfg.val_fraction)
    model_cfg = cfg.model_config()
    lm = run_training(model_cfg, cfg, out, resume, init_from=cfg.init_from, corpus=corpus)
    weights = lm.full_state_dict()  # a collective under expert parallelism
    if not current_context().is_main:
        return {}
    hist = lm.history
    save_model(out / "model.pt", model_cfg, weights, lm.result.step, hist)
    results = {"train": lm.result.to_dict()}
    if hist["val_loss"]:
        loss = hist["val_loss"][-1]
        results["val"] = {
            "step": hist["step"][-1],
            "loss": loss,
            "ppl": hist["val_ppl"][-1],
            "bits_per_byte": loss / math.log(2),
            "layers": hist["diagnostics"][-1],
        }
    results["data"] = {"train_bytes": corpus.train.numel(), "val_bytes": corpus.val.numel()}
    return results


METHOD = TrainMethod(
    name="lm",
    help="MoE language model: Routing Mamba, Default MoE, specialisation losses",
    config=_config,
    run=run,
    outputs=("model.pt",),
    description=__doc__.split("\n\n")[1].replace("\n", " "),
)
