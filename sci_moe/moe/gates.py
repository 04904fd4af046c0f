"""Score functions of router logits, and dense gates over an allowed-expert mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["GATE_SCORES", "gate_scores", "masked_dense_gate"]

#: Score functions of :func:`gate_scores`, :func:`masked_dense_gate` and
#: :class:`~sci_moe.moe.RouterConfig` (``score=``).
GATE_SCORES = ("softmax", "sigmoid", "norm_softplus")


def _check_score(score: str) -> None:
    if score not in GATE_SCORES:
        raise ValueError(f"score must be one of {GATE_SCORES}, got {score!r}")


def gate_scores(logits: torch.Tensor, score: str = "softmax", eps: float = 1e-9) -> torch.Tensor:
    """Router scores ``s`` of the logits ``z`` over the last (expert) axis.

    .. math::

        s_e = \\frac{e^{z_e}}{\\sum_f e^{z_f}} \\;(\\text{softmax}),\\quad
        s_e = \\sigma(z_e) \\;(\\text{sigmoid}),\\quad
        s_e = \\frac{\\operatorname{softplus}(z_e)}{\\sum_f \\operatorname{softplus}(z_f)
              + \\epsilon} \\;(\\text{norm\\_softplus})

    The normalised softplus is the gate of MoSES (Pan et al., NeurIPS 2025): like softmax
    it sums to (almost) one, but it grows linearly, not exponentially, in large logits.

    Parameters
    ----------
    logits : Tensor, shape (..., E)
    score : {"softmax", "sigmoid", "norm_softplus"}
    eps : float
        Added to the norm_softplus denominator (keeps it finite when every softplus
        underflows); unused by the other scores.

    Returns
    -------
    Tensor, shape (..., E)
        Same dtype as ``logits``.

    Examples
    --------
    >>> gate_scores(torch.zeros(1, 4), "norm_softplus").tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """
    _check_score(score)
    if score == "softmax":
        return logits.softmax(-1)
    if score == "sigmoid":
        return logits.sigmoid()
    sp = F.softplus(logits)
    return sp / (sp.sum(-1, keepdim=True) + eps)


def masked_dense_gate(
    logits: torch.Tensor,
    score: str = "sigmoid",
    mask: torch.Tensor | None = None,
    scaling: float = 1.0,
    eps: float = 1e-9,
) -> torch.Tensor:
    """Dense gate weights over the allowed experts, the mask applied before normalising.

    With :math:`m_e \\in \\{0, 1\\}` the mask and :math:`z` the logits,

    .. math::

        \\alpha_e = c\\,\\frac{m_e e^{z_e}}{\\sum_f m_f e^{z_f}} \\;(\\text{softmax}),\\quad
        \\alpha_e = c\\, m_e\\, \\sigma(z_e) \\;(\\text{sigmoid}),\\quad
        \\alpha_e = c\\,\\frac{m_e \\operatorname{softplus}(z_e)}
                          {\\sum_f m_f \\operatorname{softplus}(z_f) + \\epsilon}
        \\;(\\text{norm\\_softplus})

    where :math:`c` is ``scaling``. Masked experts get exactly 0 (and no gradient). With
    ``mask=None`` this is ``scaling * gate_scores(logits, score, eps)``.

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
        Same dtype as ``logits``; a dense routing is
        ``Routing.from_assignments(arange(E).expand(T, E), alpha, E)``.

    Examples
    --------
    >>> mask = torch.tensor([True, False, True])
    >>> masked_dense_gate(torch.zeros(2, 3), "softmax", mask)[0].tolist()
    [0.5, 0.0, 0.5]
    """
    _check_score(score)
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
