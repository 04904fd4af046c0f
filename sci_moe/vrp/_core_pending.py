"""General gating pieces the MoE core lacks (to move into :mod:`sci_moe.moe`).

:func:`masked_dense_gate` turns router logits into dense gate weights with an
allowed-expert mask and one of three score functions, including the normalised
softplus of MoSES (Pan et al., NeurIPS 2025). The core's dense :class:`~sci_moe.moe.Router`
has softmax and sigmoid scores but no mask applied *before* normalisation and no
normalised softplus.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["GATE_SCORES", "masked_dense_gate"]

#: Score functions of :func:`masked_dense_gate`.
GATE_SCORES = ("softmax", "sigmoid", "norm_softplus")


def masked_dense_gate(
    logits: torch.Tensor,
    score: str = "sigmoid",
    mask: torch.Tensor | None = None,
    scaling: float = 1.0,
    eps: float = 1e-9,
) -> torch.Tensor:
    """Dense gate weights over the allowed experts.

    With :math:`m_e \\in \\{0, 1\\}` the mask and :math:`z` the logits,

    .. math::

        \\alpha_e = c\\,\\frac{m_e e^{z_e}}{\\sum_f m_f e^{z_f}} \\;(\\text{softmax}),\\quad
        \\alpha_e = c\\, m_e\\, \\sigma(z_e) \\;(\\text{sigmoid}),\\quad
        \\alpha_e = c\\,\\frac{m_e \\operatorname{softplus}(z_e)}
                          {\\sum_f m_f \\operatorname{softplus}(z_f) + \\epsilon}
        \\;(\\text{norm\\_softplus})

    where :math:`c` is ``scaling``. Masked experts get exactly 0 (and no gradient).

    Parameters
    ----------
    logits : Tensor, shape (T, E)
    score : {"softmax", "sigmoid", "norm_softplus"}
    mask : Tensor, shape (T, E) or (E,), bool, optional
        Allowed experts; every row needs at least one ``True``. ``None`` allows all.
    scaling : float
        The factor :math:`c`.
    eps : float
        Added to the norm_softplus denominator.

    Returns
    -------
    Tensor, shape (T, E)
    """
    if score not in GATE_SCORES:
        raise ValueError(f"score must be one of {GATE_SCORES}, got {score!r}")
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (T, E), got {tuple(logits.shape)}")
    if mask is None:
        mask = torch.ones_like(logits, dtype=torch.bool)
    mask = mask.expand_as(logits)
    if not bool(mask.any(dim=-1).all()):
        raise ValueError("every row of mask must allow at least one expert")
    if score == "softmax":
        w = logits.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    elif score == "sigmoid":
        w = torch.where(mask, logits.sigmoid(), torch.zeros_like(logits))
    else:
        sp = torch.where(mask, F.softplus(logits), torch.zeros_like(logits))
        w = sp / (sp.sum(dim=-1, keepdim=True) + eps)
    return w * scaling if scaling != 1.0 else w
