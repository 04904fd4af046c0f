"""Naive references for the sparse layer decompositions (MxD, transcoders).

Loops over tokens and their ``k`` active units, builds each MxD expert matrix
``W_n = D diag(c_n)`` explicitly and ranks units with Python's ``sorted``; it shares only
the parameters with the layer under test, never its code.
"""

from __future__ import annotations

import torch

from ..language.mxd import MixtureOfDecoders, SkipTranscoder, Transcoder

__all__ = ["reference_decomposition_forward"]


def _top_k(scores: torch.Tensor, k: int) -> list[int]:
    """Ids of the ``k`` largest entries of ``ReLU(scores)`` (ties: lowest id first)."""
    relu = [max(float(s), 0.0) for s in scores.detach()]
    return sorted(range(len(relu)), key=lambda n: (-relu[n], n))[:k]


def reference_decomposition_forward(
    layer: MixtureOfDecoders | Transcoder, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token-by-token forward of a :class:`~sci_moe.language.mxd.MixtureOfDecoders` or transcoder.

    MxD: ``y_t = sum_{n in TopK} a_tn (D diag(c_n))^T z_t + b`` with
    ``z_t = phi(E^T x_t + b_e)`` and ``a_t = ReLU(G^T x_t + b_g)``, one explicit
    ``H x d_out`` matrix per selected expert. Transcoders:
    ``y_t = sum_{l in TopK} h_tl W_dec[l] + b_dec (+ W_skip^T x_t)``.

    Parameters
    ----------
    layer : MixtureOfDecoders, Transcoder or SkipTranscoder
    x : Tensor, shape (T, d_in)

    Returns
    -------
    y : Tensor, shape (T, d_out)
    values : Tensor, shape (T, k)
        Active coefficients in decreasing order.
    indices : Tensor, shape (T, k), int64
        Their units (among equal values, e.g. zeros, the lowest id first; the fast
        path may order ties differently, with the same output).
    """
    if not isinstance(layer, (MixtureOfDecoders, Transcoder)):
        raise TypeError(
            f"need a MixtureOfDecoders, Transcoder or SkipTranscoder, got {type(layer).__name__}"
        )
    if x.dim() != 2 or x.shape[1] != layer.d_in:
        raise ValueError(f"x must have shape (T, {layer.d_in}), got {tuple(x.shape)}")
    k = layer.top_k
    ys, vals, idxs = [], [], []
    for t in range(x.shape[0]):
        xt = x[t]
        if isinstance(layer, MixtureOfDecoders):
            z = layer.activation(layer.encoder.weight @ xt + layer.encoder.bias)
            pre = layer.gate.weight @ xt + layer.gate.bias
            chosen = _top_k(pre, k)
            a = [torch.relu(pre[n]) for n in chosen]
            y = layer.bias.clone()
            for n, a_n in zip(chosen, a, strict=True):
                w_n = layer.D @ torch.diag(layer.C[n])  # (H, d_out)
                y = y + a_n * (w_n.t() @ z)
        else:
            pre = xt @ layer.W_enc + layer.b_enc
            chosen = _top_k(pre, k)
            a = [torch.relu(pre[n]) for n in chosen]
            y = layer.b_dec.clone()
            for n, a_n in zip(chosen, a, strict=True):
                y = y + a_n * layer.W_dec[n]
            if isinstance(layer, SkipTranscoder):
                y = y + layer.W_skip.t() @ xt
        ys.append(y)
        vals.append(torch.stack(a))
        idxs.append(torch.tensor(chosen, dtype=torch.long))
    return torch.stack(ys), torch.stack(vals), torch.stack(idxs)
