"""Training until flat for ``run.py``: the flatness rule, training cycles and their curves.

A model trains in *cycles* of a fixed number of steps (each a fresh warm-up + cosine
schedule from the previous cycle's weights, its batches drawn with the seed ``seed + 100 c``
in cycle ``c``, so cycle 0 is the plain run) until its concatenated validation curve is flat
(:func:`sci_moe.train.is_flat`: the best value of the last 20 % of the steps is < 1 %
better, relative, than the best before; at least five evaluations) or the cap of cycles is
spent. The curve is judged only from cycle ``min_cycles`` on (the plan's 2): the end of
one annealed warm-up + cosine schedule always looks flat, however much a restart would
still gain (``fingerprints_v2.json``, judged from cycle 1: the byte classifier stopped
after exactly one cycle on all 5 seeds, while its LMs ran 4-5). The byte classifier is
judged on its validation accuracy, the propagation LMs on their validation loss (the log of
the perplexity the curves store), as the other LM benchmarks of ``benchmarks/`` judge
theirs. The cycles themselves are
:func:`sci_moe.train.until_flat`'s; the byte classifier's are
:func:`sci_moe.language.provenance.fit_until_flat` (what ``sci-moe provenance train --model
byte --until-flat`` runs). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace
from pathlib import Path

from _common import until_flat

from sci_moe.language.provenance import fit_until_flat
from sci_moe.train import is_flat

__all__ = [
    "FLAT_RULE",
    "fit_byte_classifier",
    "flat",
    "lm_flat",
    "train_lm",
]

FLAT_RULE = (
    "trained in cycles (byte classifier: byte_steps steps, at most byte_cycles; fine-tuned "
    "MiniLM: minilm_finetune_steps steps, at most minilm_finetune_cycles; propagation "
    "LMs: lm_steps steps, at most lm_cycles; each a fresh warm-up + cosine schedule from the "
    "previous cycle's weights, batch seed + 100 per cycle) until the concatenated validation "
    "curve, judged after every cycle from cycle min_cycles on (one annealed cycle always ends "
    "flat-looking), is flat: the best value of the last 20 % of the steps is < 1 % better "
    "(relative) than the best value up to 80 % of the steps (sci_moe.train.is_flat, at least five "
    "evaluations); the classifiers on their validation accuracy (held-out training "
    "documents, higher is better), the LMs on their validation loss (ln of the stored "
    "perplexity, lower is better); a run that reaches the cap unflat has converged false"
)


def flat(curve, higher_is_better: bool = True) -> bool:
    """Whether a validation curve ``[[step, value], ...]`` is flat by :func:`is_flat`'s
    defaults (< 1 % better over the last 20 % of the steps, five evaluations at least)."""
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, mode="max" if higher_is_better else "min")


def lm_flat(curve) -> bool:
    """An LM's perplexity curve ``[[step, ppl], ...]`` is flat on its loss (``ln ppl``)."""
    return flat([[s, math.log(v)] for s, v in curve], higher_is_better=False)


def fit_byte_classifier(
    clf, texts, labels, names, val, eval_every: int, max_cycles: int, min_cycles: int = 1
):
    """Fit ``clf`` (a :class:`~sci_moe.language.provenance.ByteTransformerClassifier` or
    :class:`~sci_moe.language.provenance.EncoderFinetuneClassifier`) in
    cycles of ``clf.config.steps`` until its validation accuracy on ``val`` is flat, judged
    from cycle ``min_cycles`` on (1 to ``max_cycles``):
    :func:`sci_moe.language.provenance.fit_until_flat` (the same rule as :func:`flat`).
    Returns ``(clf, curve, cycles, converged)``."""
    return fit_until_flat(
        clf,
        texts,
        labels,
        names,
        val=val,
        eval_every=eval_every,
        max_cycles=max_cycles,
        min_cycles=min_cycles,
    )


def train_lm(docs, lm_cfg, tcfg, tokenizer, max_cycles: int, val_docs=None, min_cycles: int = 1):
    """:func:`~sci_moe.language.provenance.train_lm_on_texts` in cycles of ``tcfg.steps``
    until the validation loss is flat, judged from cycle ``min_cycles`` on (1 to
    ``max_cycles``; validated on ``val_docs`` when given, else on the last tenth of the
    token stream). Returns ``(model, curve [[step, ppl], ...], cycles, converged)``."""
    from sci_moe.language import save_model
    from sci_moe.language.provenance import train_lm_on_texts

    held = {}
    with tempfile.TemporaryDirectory() as tmp:

        def cycle(c: int, cycle_seed: int):
            init = None
            if c:
                init = save_model(Path(tmp) / "previous.pt", lm_cfg, held["lm"].state_dict())
            held["lm"], hist = train_lm_on_texts(
                docs,
                lm_cfg,
                replace(tcfg, seed=cycle_seed),
                tokenizer=tokenizer,
                init_from=init,
                val_documents=val_docs,
            )
            return [[int(s), float(p)] for s, p in zip(hist["step"], hist["val_ppl"], strict=True)]

        curve, n, conv = until_flat(
            cycle, lm_flat, max_cycles, tcfg.seed, tcfg.steps, min_cycles=min_cycles
        )
    return held["lm"], curve, n, conv
