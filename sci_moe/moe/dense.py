"""The dense baseline of a top-k MoE layer: one SwiGLU of the same active size, plus the router."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_int
from .layer import SharedExperts

__all__ = ["DenseSwiGLU"]


class DenseSwiGLU(nn.Module):
    """Dense SwiGLU of hidden size ``top_k * d_hidden`` plus a top-k MoE's router work.

    The compute-matched dense baseline of an :class:`~sci_moe.moe.MoE` with ``num_experts``
    SwiGLU experts of hidden size ``d_hidden`` and ``top_k`` experts per token: every token
    goes through one SwiGLU (:class:`~sci_moe.moe.SharedExperts`, the same fused GLU as the
    MoE's experts) with the MoE's active FFN FLOPs, and the router's work is done too
    (float32 logits, softmax, top-k), its probability mass scaling the output so that the
    router trains:

    .. math:: y = m(x)\\, W^{down} \\big(\\mathrm{silu}(W^{gate} x) \\odot W^{up} x\\big),
        \\qquad m(x) = \\sum_{e \\in \\mathrm{top}_k} \\mathrm{softmax}(W^{r} x)_e

    The speed baseline of the MoE layer benchmark (``benchmarks/moe_layer``).

    Parameters
    ----------
    d_model : int
        Input and output size ``d``.
    d_hidden : int
        Hidden size of one expert of the matched MoE (the SwiGLU's is ``top_k * d_hidden``).
    num_experts : int
        Experts of the matched MoE (the router's outputs).
    top_k : int
        Experts per token of the matched MoE, ``1 <= top_k <= num_experts``.

    Attributes
    ----------
    router : torch.nn.Linear
        ``d_model -> num_experts``, no bias.
    ffn : SharedExperts
        The SwiGLU, ``d_model -> top_k * d_hidden -> d_model``.

    Examples
    --------
    >>> layer = DenseSwiGLU(d_model=16, d_hidden=32, num_experts=8, top_k=2)
    >>> layer(torch.randn(5, 16)).shape
    torch.Size([5, 16])
    >>> layer.ffn.mlp.d_hidden
    64
    """

    def __init__(self, d_model: int, d_hidden: int, num_experts: int, top_k: int) -> None:
        super().__init__()
        for name, value in (
            ("d_model", d_model),
            ("d_hidden", d_hidden),
            ("num_experts", num_experts),
            ("top_k", top_k),
        ):
            if check_int(name, value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if top_k > num_experts:
            raise ValueError(f"top_k ({top_k}) must be <= num_experts ({num_experts})")
        self.top_k = top_k
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.ffn = SharedExperts(d_model, top_k * d_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` of shape ``(..., d_model)`` -> ``(..., d_model)``, in ``x``'s dtype."""
        probs = F.linear(x.float(), self.router.weight.float()).softmax(-1)
        mass = probs.topk(self.top_k, dim=-1).values.sum(-1, keepdim=True)
        return self.ffn(x) * mass.to(x.dtype)
