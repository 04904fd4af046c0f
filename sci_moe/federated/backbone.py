"""The last BERT encoder layer, evaluated exactly at the first token, with LoRA on Q and V.

A frozen BERT-style encoder (e.g. all-MiniLM-L6-v2) below the adapted layer does not
change during federated fine-tuning, so its output (the input ``H`` of the last layer) is
computed once per example. Only the first (``[CLS]``) token's output is classified, so the
last layer needs its query and the rest of the block for that one token, while keys and
values cover all tokens:

.. math::
    q = W_q h_0 + \\Delta_q(h_0), \\quad K = H W_k^\\top, \\quad
    V = H W_v^\\top + \\Delta_v(H), \\quad
    a = \\mathrm{LN}(W_o\\,\\mathrm{MHA}(q, K, V) + h_0), \\quad
    z = \\mathrm{LN}(W_2\\, \\mathrm{act}(W_1 a) + a)

where :math:`\\Delta` are the routed LoRA updates (:class:`LoRAMixtureLinear`). This is
the exact post-LayerNorm BERT layer (dropout off) at token 0; ``K`` and :math:`H W_v^\\top`
are frozen and precomputed by :meth:`CLSAdaptedLayer.prepare`.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from .lora import LoRAMixtureLinear

__all__ = ["CLSAdaptedLayer"]


def _check_bert_layer(layer: nn.Module) -> None:
    try:
        att = layer.attention
        for name in ("query", "key", "value"):
            if not isinstance(getattr(att.self, name), nn.Linear):
                raise AttributeError(name)
        att.output.dense, att.output.LayerNorm  # noqa: B018
        layer.intermediate.dense, layer.intermediate.intermediate_act_fn  # noqa: B018
        layer.output.dense, layer.output.LayerNorm  # noqa: B018
    except AttributeError as err:
        raise TypeError(
            "layer must be a BERT encoder layer (transformers' BertLayer: attention.self."
            "query/key/value, attention.output, intermediate, output); got "
            f"{type(layer).__name__} without {err}"
        ) from None


class CLSAdaptedLayer(nn.Module):
    """A frozen BERT layer with routed LoRA experts on Q and V, output at token 0.

    Parameters
    ----------
    layer : nn.Module
        A ``transformers`` ``BertLayer`` (deep-copied; its weights are frozen).
    num_attention_heads : int
    num_experts : int
        LoRA experts per adapted projection (1 = plain LoRA).
    rank : int
    alpha : float
    router_init_std : float

    Examples
    --------
    Inputs are ``(H, mask)``: ``H`` of shape ``(N, L, d)`` (the output of the layer below),
    ``mask`` of shape ``(N, L)`` (1 for real tokens); :meth:`prepare` turns them into the
    cached tensors :meth:`forward` takes.
    """

    def __init__(
        self,
        layer: nn.Module,
        num_attention_heads: int,
        num_experts: int = 1,
        rank: int = 4,
        alpha: float = 8.0,
        router_init_std: float = 0.02,
    ) -> None:
        super().__init__()
        _check_bert_layer(layer)
        layer = copy.deepcopy(layer)
        for p in layer.parameters():
            p.requires_grad_(False)
        att = layer.attention
        d = att.self.query.in_features
        if d % num_attention_heads:
            raise ValueError(f"hidden size {d} is not divisible by {num_attention_heads} heads")
        self.d_model, self.num_heads = d, num_attention_heads
        kw = dict(num_experts=num_experts, rank=rank, alpha=alpha, router_init_std=router_init_std)
        self.query = LoRAMixtureLinear(att.self.query, **kw)
        self.value = LoRAMixtureLinear(att.self.value, **kw)
        self.key = att.self.key
        self.attn_out, self.attn_norm = att.output.dense, att.output.LayerNorm
        self.ffn_in, self.act = layer.intermediate.dense, layer.intermediate.intermediate_act_fn
        self.ffn_out, self.ffn_norm = layer.output.dense, layer.output.LayerNorm

    @property
    def adapted(self) -> dict[str, LoRAMixtureLinear]:
        """The LoRA-adapted projections by name (``"query"``, ``"value"``)."""
        return {"query": self.query, "value": self.value}

    @torch.no_grad()
    def prepare(
        self, hidden: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Precompute the frozen parts.

        Parameters
        ----------
        hidden : Tensor, shape (N, L, d)
            Input of the layer (output of the frozen layers below).
        mask : Tensor, shape (N, L)
            1 (or True) for real tokens, 0 for padding.

        Returns
        -------
        hidden, keys, values_base, mask : Tensors of shapes (N, L, d), (N, L, d), (N, L, d),
        (N, L) (mask as bool)
        """
        if hidden.dim() != 3 or hidden.shape[-1] != self.d_model:
            raise ValueError(f"hidden must be (N, L, {self.d_model}), got {tuple(hidden.shape)}")
        if mask.shape != hidden.shape[:2]:
            raise ValueError(f"mask must be {tuple(hidden.shape[:2])}, got {tuple(mask.shape)}")
        vb = self.value.bank.base_layer
        return hidden, self.key(hidden), vb(hidden), mask.bool()

    def forward(
        self,
        hidden: torch.Tensor,
        keys: torch.Tensor,
        values_base: torch.Tensor,
        mask: torch.Tensor,
        own: int = 0,
    ) -> torch.Tensor:
        """Output of the layer at token 0, shape ``(N, d)`` (inputs from :meth:`prepare`)."""
        N, L, d = hidden.shape
        nh, hd = self.num_heads, d // self.num_heads
        h0 = hidden[:, 0]
        q = self.query(h0, own)  # (N, d)
        dv = self._value_update(hidden, mask, own)
        v = values_base + dv
        qh = q.view(N, nh, 1, hd)
        kh = keys.view(N, L, nh, hd).transpose(1, 2)
        vh = v.view(N, L, nh, hd).transpose(1, 2)
        scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(hd)  # (N, nh, 1, L)
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        ctx = (torch.softmax(scores, -1) @ vh).reshape(N, d)
        a = self.attn_norm(self.attn_out(ctx) + h0)
        return self.ffn_norm(self.ffn_out(self.act(self.ffn_in(a))) + a)

    def _value_update(self, hidden, mask, own):
        """Routed LoRA update of V on the real tokens only (zero on padding)."""
        layer = self.value
        flat, keep = hidden.reshape(-1, self.d_model), mask.reshape(-1)
        delta = layer.update(flat[keep], own)
        out = hidden.new_zeros(flat.shape[0], delta.shape[-1])
        out = out.index_put((keep.nonzero().squeeze(1),), delta)
        return out.view(*hidden.shape[:2], -1)
