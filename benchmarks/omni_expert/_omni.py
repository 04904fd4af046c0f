"""Shared by the Omni-Expert scripts (run.py, full.py): the masks of every system on one
utterance and the measured inference time of each model."""

from __future__ import annotations

import time

import numpy as np
import torch

from sci_moe._util import module_device, to_device
from sci_moe.speech.omni import frame_tensors, oracle_probs

__all__ = ["masks", "time_forward"]


def masks(models, frames, norm, net):
    """The mask of every system on one utterance's ``frames`` and the classifier's frame
    accuracy. ``models`` is ``(pi, moe, oe, classifier, ablation)`` (``ablation``: name ->
    OE variant, may be empty); masks ``(T, F)`` float64 numpy arrays, ``^p`` predicted and
    ``^k`` oracle phoneme posteriors. The models run on their device (the frames are moved
    there)."""
    pi, moe, oe, clf, ablation = models
    T = to_device(frame_tensors(frames, norm, net.context), module_device(pi))
    with torch.no_grad():
        p = clf.probs(T.features)
        k = oracle_probs(T.labels)
        out = {
            "reverberant": np.ones_like(frames.irm),
            "PI": pi(T.features),
            "MoE^p": moe(T.features, p),
            "MoE^k": moe(T.features, k),
            "OE^p": oe(T.features, p, "folded"),
            "OE^p-mixture": oe(T.features, p, "mixture"),
            "OE^k": oe(T.features, k, "folded"),
            "IRM": frames.irm,
        }
        for name, m in ablation.items():
            out[f"OE^p[{name}]"] = m(T.features, p, "folded")
        acc = float((p.argmax(1) == T.labels).double().mean())
    return {
        k: np.asarray(v.cpu() if torch.is_tensor(v) else v, dtype=np.float64)
        for k, v in out.items()
    }, acc


def time_forward(models, frames, norm, net, repeats=5) -> dict[str, float]:
    """Median ms per 1000 frames of each model's forward (classifier included for ^p), on
    the models' device (a CUDA device is synchronised around each timed call)."""
    pi, moe, oe, clf, _ = models
    device = module_device(pi)
    T = to_device(frame_tensors(frames, norm, net.context), device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    x = T.features
    k = oracle_probs(T.labels)
    fns = {
        "PI": lambda: pi(x),
        "MoE^k": lambda: moe(x, k),
        "MoE^p": lambda: moe(x, clf.probs(x)),
        "OE^k": lambda: oe(x, k, "folded"),
        "OE^p": lambda: oe(x, clf.probs(x), "folded"),
        "OE^p-mixture": lambda: oe(x, clf.probs(x), "mixture"),
    }
    out = {}
    with torch.no_grad():
        for name, f in fns.items():
            f()
            ts = []
            for _ in range(repeats):
                sync()
                t0 = time.perf_counter()
                f()
                sync()
                ts.append(time.perf_counter() - t0)
            out[name] = 1000.0 * float(np.median(ts)) / len(x) * 1000.0
    return out
