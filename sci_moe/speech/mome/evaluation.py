"""Evaluation of a trained recogniser: CER and WER at one rate combination, and the
cross-rate routing consistency of its MoME adapters against a shuffled-router control.
"""

from __future__ import annotations

import numpy as np
import torch

from sci_moe._util import module_device, to_device
from sci_moe.stats import pairwise_js_divergence

from .dataset import SpeechSet
from .matryoshka import rate_label
from .model import SpeechRecognizer
from .text import char_error_rate, ctc_greedy_decode, word_error_rate

__all__ = ["evaluate", "routing_consistency"]


def _multiple(model: SpeechRecognizer) -> dict:
    c = model.config
    return {m: c.frame_multiple(m) for m in c.compression.modalities}


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
    device = module_device(model)
    for start in range(0, len(idx), batch_size):
        batch = data.batch(idx[start : start + batch_size], snr_db, rng, multiple, video_dropout)
        batch = to_device(batch, device)  # built on the CPU, run where the model is
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
    pairwise Jensen-Shannon divergence (:func:`~sci_moe.stats.pairwise_js_divergence`)
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
