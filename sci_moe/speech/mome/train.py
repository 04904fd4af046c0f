r"""Matryoshka training over every rate combination in one step, evaluation at one rate.

The MoME objective (Cappellazzo et al. 2025, Eq. for ``L``) averages the recognition
loss over the ``G L`` rate combinations of one batch and adds the Switch balance term
of every MoME layer:

.. math::

    \mathcal L = \frac{1}{|C|} \sum_{c \in C} \Big( \mathcal L_{CTC}(Y \mid Z^{c})
                 + \lambda \, \overline{L_{bal}}(c) \Big), \qquad \lambda = 0.01,

with ``Z^c`` the tokens compressed at combination ``c`` and ``\overline{L_{bal}}`` the
mean over layers of :func:`~sci_moe.moe.load_balancing_loss` (1 when balanced). Here
the recognition loss is CTC over characters instead of the LLM's cross-entropy. Only
the projectors, the adapters, the layer norm and the CTC head train; the backbone is
frozen.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from sci_moe._util import progress_bar
from sci_moe.moe import pairwise_js_divergence

from .dataset import SpeechSet
from .matryoshka import rate_label
from .model import SpeechRecognizer
from .text import char_error_rate, ctc_greedy_decode, word_error_rate

__all__ = [
    "TrainConfig",
    "evaluate",
    "routing_consistency",
    "train_recognizer",
]


@dataclass
class TrainConfig:
    """Options of :func:`train_recognizer`.

    Parameters
    ----------
    steps, batch_size : int
    lr : float
        AdamW learning rate.
    balance_coef : float
        ``lambda`` of the balance term (0.01 in the paper).
    train_rates : dict of str to tuple of int, optional
        Rates to train on (default: every rate of the model). The single-rate baseline
        passes only the lowest compression.
    snr_db : tuple
        SNRs (dB, ``None`` = clean) drawn uniformly per batch: noise augmentation.
    video_dropout : float
        Probability of a zeroed video frame in training batches.
    grad_clip : float
        Gradient-norm clip.
    seed : int
        Batch order, noise and dropout (the model's initialisation is the caller's).
    """

    steps: int = 300
    batch_size: int = 8
    lr: float = 2e-3
    balance_coef: float = 0.01
    train_rates: dict | None = None
    snr_db: tuple = (None,)
    video_dropout: float = 0.3
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.balance_coef < 0:
            raise ValueError(f"balance_coef must be >= 0, got {self.balance_coef}")
        self.snr_db = tuple(self.snr_db)
        if not self.snr_db:
            raise ValueError("snr_db is empty: use (None,) for clean training")


def _combinations(model: SpeechRecognizer, rates: dict | None) -> list[dict]:
    known = model.config.compression.rates
    rates = known if rates is None else rates
    for m, rs in rates.items():
        bad = [r for r in rs if m not in known or r not in known[m]]
        if bad:
            raise ValueError(f"train rates {bad} of {m!r} are not among the model's {known.get(m)}")
    mods = list(rates)
    return [dict(zip(mods, c, strict=True)) for c in itertools.product(*rates.values())]


def _multiple(model: SpeechRecognizer) -> dict:
    c = model.config.compression
    return {m: c.multiple(m) for m in c.modalities}


def train_recognizer(
    model: SpeechRecognizer, data: SpeechSet, config: TrainConfig, progress: bool = True
) -> list[dict]:
    """Train the trainable parts of ``model`` on ``data``'s training split.

    Parameters
    ----------
    model : SpeechRecognizer
    data : SpeechSet
    config : TrainConfig
    progress : bool

    Returns
    -------
    list of dict
        Per step: ``step``, ``loss`` (the objective), ``ctc`` (mean CTC), ``balance``.
    """
    combos = _combinations(model, config.train_rates)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=config.lr, total_steps=config.steps, pct_start=0.1
    )
    rng = np.random.default_rng(config.seed)
    train_idx = data.splits["train"]
    if len(train_idx) == 0:
        raise ValueError("the training split is empty: build the data set with more phrases")
    multiple = _multiple(model)
    history = []
    model.train()
    bar = progress_bar(range(config.steps), disable=not progress, desc="training", unit="step")
    for step in bar:
        idx = rng.choice(train_idx, size=min(config.batch_size, len(train_idx)), replace=False)
        snr = config.snr_db[int(rng.integers(len(config.snr_db)))]
        batch = data.batch(idx, snr, rng, multiple, config.video_dropout)
        ctc_sum = bal_sum = 0.0
        opt.zero_grad(set_to_none=True)
        for combo in combos:
            out = model(batch.streams, combo)
            ctc = model.ctc_loss(out, batch.targets, batch.target_lengths)
            loss = (ctc + config.balance_coef * out.aux_loss) / len(combos)
            loss.backward()  # one combination at a time: same gradient, less memory
            ctc_sum += float(ctc.detach())
            bal_sum += float(out.aux_loss.detach())
        torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
        sched.step()
        n = len(combos)
        rec = {
            "step": step,
            "ctc": ctc_sum / n,
            "balance": bal_sum / n,
            "loss": (ctc_sum + config.balance_coef * bal_sum) / n,
        }
        history.append(rec)
        if progress and hasattr(bar, "set_postfix"):
            bar.set_postfix(ctc=f"{rec['ctc']:.3f}")
    model.eval()
    return history


@torch.no_grad()
def evaluate(
    model: SpeechRecognizer,
    data: SpeechSet,
    rates: dict,
    split: str = "test",
    snr_db: float | None = None,
    video_dropout: float = 0.0,
    seed: int = 0,
    batch_size: int = 16,
) -> dict:
    """CER and WER of greedy CTC transcripts at one rate combination.

    Parameters
    ----------
    model : SpeechRecognizer
    data : SpeechSet
    rates : dict of str to int
        E.g. ``{"audio": 16}`` (ASR), ``{"video": 1}`` (VSR), both (AVSR).
    split : {"train", "val", "test"}
    snr_db : float or None
        Test noise (dB); ``None`` is clean.
    video_dropout : float
    seed : int
        Noise/dropout source (the same seed gives the same noisy test set).
    batch_size : int

    Returns
    -------
    dict
        ``cer``, ``wer`` (fractions), ``hyps``, ``refs``.
    """
    if split not in data.splits:
        raise ValueError(f"split must be one of {list(data.splits)}, got {split!r}")
    idx = data.splits[split]
    if len(idx) == 0:
        raise ValueError(f"the {split!r} split is empty")
    model.eval()
    rng = np.random.default_rng(seed)
    multiple = _multiple(model)
    hyps, refs = [], []
    for start in range(0, len(idx), batch_size):
        batch = data.batch(idx[start : start + batch_size], snr_db, rng, multiple, video_dropout)
        out = model(batch.streams, rates)
        hyps += ctc_greedy_decode(out.log_probs, out.lengths)
        refs += batch.texts
    return {
        "cer": char_error_rate(hyps, refs),
        "wer": word_error_rate(hyps, refs),
        "hyps": hyps,
        "refs": refs,
    }


@torch.no_grad()
def routing_consistency(
    model: SpeechRecognizer,
    data: SpeechSet,
    combos: list,
    split: str = "test",
    num_shuffles: int = 200,
    seed: int = 0,
) -> dict:
    r"""Cross-rate routing consistency of a MoME model, against a shuffled-router control.

    For every MoME layer ``l`` the expert-usage histogram ``u_l^c`` of the ``split``
    tokens at each rate combination ``c`` is recorded; the consistency is the mean
    pairwise Jensen-Shannon divergence (:func:`~sci_moe.moe.pairwise_js_divergence`)
    between the combinations' histograms, averaged over layers (0 = the same experts at
    every rate). The **control** applies an independent random permutation of the expert
    ids to each combination's histogram (a router whose expert labels are unrelated
    across rates, with the same per-rate load profile) and averages its JS over
    ``num_shuffles`` draws.

    Parameters
    ----------
    model : SpeechRecognizer
        With ``adapter="mome"``.
    data : SpeechSet
    combos : list of dict
        Rate combinations to compare (at least two).
    split : str
    num_shuffles : int
    seed : int

    Returns
    -------
    dict
        ``js`` and ``js_shuffled`` (mean over layers, nats), ``js_per_layer``,
        ``js_shuffled_per_layer`` (lists), ``usage`` (per layer: label -> list).
    """
    if model.config.adapter != "mome":
        raise ValueError("routing consistency needs a model with adapter='mome'")
    if len(combos) < 2:
        raise ValueError("give at least two rate combinations to compare")
    pa = model.adapters
    pa.reset_usage()
    pa.record(True)
    try:
        for combo in combos:
            evaluate(model, data, combo, split, seed=seed)
    finally:
        pa.record(False)
    gen = torch.Generator().manual_seed(seed)
    labels = [rate_label(c) for c in combos]
    js, js_ctl, usage = [], [], []
    for layer in pa.usage():
        p = torch.stack([layer[lab] for lab in labels])
        usage.append({lab: layer[lab].tolist() for lab in labels})
        js.append(float(pairwise_js_divergence(p)))
        E = p.shape[1]
        draws = []
        for _ in range(num_shuffles):
            perm = torch.stack([torch.randperm(E, generator=gen) for _ in labels])
            draws.append(float(pairwise_js_divergence(torch.gather(p, 1, perm))))
        js_ctl.append(float(np.mean(draws)))
    pa.reset_usage()
    return {
        "js": float(np.mean(js)),
        "js_shuffled": float(np.mean(js_ctl)),
        "js_per_layer": js,
        "js_shuffled_per_layer": js_ctl,
        "usage": usage,
    }
