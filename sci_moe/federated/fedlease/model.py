"""FedLEASE's client model: a frozen BERT layer with routed LoRA experts, one head per expert.

* :class:`LoRAMixtureLinear`: a frozen linear layer plus ``M`` LoRA experts routed by the
  slot-expanded adaptive top-``M`` router around the client's *own* expert (the routed layer).
* :class:`CLSAdaptedLayer`: the last BERT encoder layer, evaluated exactly at the first
  token, with :class:`LoRAMixtureLinear` on its query and value.
* :class:`FedLoRAClassifier` (built by :class:`ModelSpec`): the adapted layer and a
  stacked bank of ``M`` linear heads.

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

Parameters that travel between clients and server are grouped per expert: the expert
``e``'s LoRA slices of every adapted projection plus its classification head
(:meth:`FedLoRAClassifier.expert_state`), and each projection's router
(:meth:`FedLoRAClassifier.router_state`). Everything else is frozen and stays on the client.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from sci_moe._util import check_int, check_int_attr
from sci_moe.moe import (
    LinearExperts,
    LoRAExperts,
    RoutedModule,
    Router,
    Routing,
    dispatch,
    stacked_names,
)

__all__ = ["CLSAdaptedLayer", "FedLoRAClassifier", "LoRAMixtureLinear", "ModelSpec"]


class LoRAMixtureLinear(RoutedModule):
    """``y = W0 x + b0 + sum_e w_e(x) (alpha / r) B_e A_e x`` with FedLEASE routing.

    FedLEASE's routed layer: a :class:`~sci_moe.moe.RoutedModule` whose experts are
    :class:`~sci_moe.moe.LoRAExperts` on a frozen projection (its base term ``W0 x + b0``)
    and whose :class:`~sci_moe.moe.Router` (``mode="slot_top_m"``) picks the experts of
    each token around the client's *own* expert: ``2M - 1`` slot scores ``G x``, softmax,
    top-``M`` slots, the weights of one expert's slots summed (the own expert is always
    used; the paper's weights are not renormalised). Call it as ``layer(x, own=o)``. With
    one expert the layer is plain LoRA (the one slot has weight exactly 1).

    ``top_k=k`` replaces the adaptive selection by the fixed top-``k`` of the paper's
    ablation: a plain token-choice router (``M`` scores ``G x``, softmax, the ``min(k, M)``
    best experts, weights renormalised to sum to one); the own expert is then not
    guaranteed (``own`` is ignored).

    Parameters
    ----------
    base_layer : nn.Linear
        Frozen pretrained projection (e.g. an attention query or value).
    num_experts : int
        ``M >= 1``.
    rank : int
        LoRA rank ``r``.
    alpha : float
        LoRA scale numerator (scale ``alpha / r``).
    router_init_std : float
        Initial standard deviation of the router ``G``.
    top_k : int, optional
        Fixed top-``k`` selection instead of the adaptive slot-expanded top-``M`` (None).

    Attributes
    ----------
    experts : LoRAExperts
        ``lora_a`` of shape ``(M, r, d_in)``, ``lora_b`` of shape ``(M, d_out, r)``; the
        frozen projection is ``experts.base_layer``.
    router : sci_moe.moe.Router
        ``mode="slot_top_m"``, ``normalize=False``; ``weight`` of shape ``(2M - 1, d_in)``
        (with ``top_k``: ``mode="topk"``, ``normalize=True``, ``weight`` ``(M, d_in)``).
    last_routing : Routing or None
        The routing of the last call (for usage statistics).
    """

    def __init__(
        self,
        base_layer: nn.Linear,
        num_experts: int = 1,
        rank: int = 4,
        alpha: float = 8.0,
        router_init_std: float = 0.02,
        top_k: int | None = None,
    ) -> None:
        super().__init__()
        self.d_model = base_layer.in_features
        self.experts = LoRAExperts(base_layer, num_experts, rank, alpha)
        if top_k is None:
            mode = dict(mode="slot_top_m", normalize=False)
        else:
            top_k = check_int("top_k", top_k)
            if top_k < 1:
                raise ValueError(f"top_k must be >= 1, got {top_k}")
            mode = dict(mode="topk", top_k=min(top_k, num_experts), normalize=True)
        self.top_k = top_k
        self.router = Router(
            d_model=base_layer.in_features,
            num_experts=num_experts,
            init_std=router_init_std,
            **mode,
        )
        self.last_routing: Routing | None = None

    def route(self, x: torch.Tensor, *, own: int | torch.Tensor = 0) -> Routing:
        """Slot-expanded top-``M`` routing of the ``(T, d_in)`` rows around ``own`` (the
        fixed top-``k`` routing with ``top_k``, ``own`` unused)."""
        routing = self.router(x) if self.top_k is not None else self.router(x, own=own)
        self.last_routing = routing
        return routing

    def update(self, x: torch.Tensor, own: int | torch.Tensor = 0) -> torch.Tensor:
        """Only the routed low-rank term ``sum_e w_e (alpha / r) B_e A_e x`` of ``(T, d_in)``
        rows, for callers that computed the frozen ``W0 x + b0`` once beforehand."""
        return dispatch(x, self.route(x, own=own), self.experts, include_base=False)


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
    top_k : int, optional
        Fixed top-``k`` routing instead of the adaptive top-``M`` (:class:`LoRAMixtureLinear`).

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
        top_k: int | None = None,
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
        kw = dict(
            num_experts=num_experts,
            rank=rank,
            alpha=alpha,
            router_init_std=router_init_std,
            top_k=top_k,
        )
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
        vb = self.value.experts.base_layer
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
        q = self.query(h0, own=own)  # (N, d)
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


@dataclass
class ModelSpec:
    """How every client builds its model (the frozen layer and the LoRA shapes).

    Parameters
    ----------
    layer : nn.Module
        Frozen ``transformers`` ``BertLayer`` that gets LoRA on Q and V (the last layer of
        the encoder; the layers below it are precomputed into the inputs).
    num_attention_heads : int
    num_classes : int
        Size of the (shared) label space ``K``.
    rank : int
        LoRA rank ``r``.
    alpha : float
        LoRA scale numerator (scale ``alpha / r``).
    router_init_std : float
        Initial standard deviation of the routers.
    top_k : int, optional
        ``None``: FedLEASE's adaptive slot-expanded top-``M`` routing; ``k``: the fixed
        top-``k`` routing of the paper's ablation (:class:`LoRAMixtureLinear`).
    """

    layer: nn.Module
    num_attention_heads: int
    num_classes: int
    rank: int = 4
    alpha: float = 8.0
    router_init_std: float = 0.02
    top_k: int | None = None

    def __post_init__(self) -> None:
        for name in ("num_attention_heads", "num_classes", "rank"):
            check_int_attr(self, name, 1)
        if self.top_k is not None:
            check_int_attr(self, "top_k", 1)
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha!r}")

    def build(self, num_experts: int = 1, seed: int = 0) -> FedLoRAClassifier:
        """A model with ``num_experts`` experts, initialised from ``seed``."""
        return FedLoRAClassifier(self, num_experts, seed)


class FedLoRAClassifier(nn.Module):
    """Classifier ``softmax(W_o z + b_o)`` on the adapted layer's token-0 output ``z``.

    ``o`` is the client's own expert: the head of its cluster. The LoRA update of each
    adapted projection is routed over all ``M`` experts (:class:`LoRAMixtureLinear`); the
    ``M`` heads are one stacked :class:`~sci_moe.moe.LinearExperts` bank, so an expert is
    index ``e`` of every bank in :attr:`expert_banks` (the core's stacked-bank convention,
    :func:`~sci_moe.moe.stacked_names`).

    Parameters
    ----------
    spec : ModelSpec
    num_experts : int
        ``M``.
    seed : int
        Seeds LoRA ``A`` (Kaiming uniform), the routers and the heads (``B = 0``).

    Attributes
    ----------
    encoder : CLSAdaptedLayer
    head : LinearExperts
        ``weight`` of shape ``(M, K, d)`` (initialised ``N(0, 1/d)``), ``bias`` ``(M, K)``
        (zeros).
    """

    def __init__(self, spec: ModelSpec, num_experts: int = 1, seed: int = 0) -> None:
        super().__init__()
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            self.encoder = CLSAdaptedLayer(
                spec.layer,
                spec.num_attention_heads,
                num_experts,
                spec.rank,
                spec.alpha,
                spec.router_init_std,
                spec.top_k,
            )
            d = self.encoder.d_model
            with torch.device("meta"):  # no default init: it would draw from the generator
                head = LinearExperts(num_experts, d, spec.num_classes, bias=True)
            self.head = head.to_empty(device=torch.get_default_device())
            nn.init.normal_(self.head.weight, std=d**-0.5)
            nn.init.zeros_(self.head.bias)
        finally:
            torch.random.set_rng_state(state)
        self.num_experts = num_experts

    def prepare(self, hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Frozen precomputation of the inputs (see :meth:`CLSAdaptedLayer.prepare`)."""
        return self.encoder.prepare(hidden, mask)

    def forward(self, *inputs: torch.Tensor, own: int = 0) -> torch.Tensor:
        """Logits of shape ``(N, K)`` from prepared inputs."""
        z = self.encoder(*inputs, own=own)
        return self.head.forward_expert(own, z)

    # -- parameter groups that travel ------------------------------------------------
    @property
    def expert_banks(self) -> dict[str, nn.Module]:
        """The stacked banks by name: each adapted projection's LoRA bank, then the heads."""
        banks = {name: lin.experts for name, lin in self.encoder.adapted.items()}
        banks["head"] = self.head
        return banks

    def expert_state(self, e: int) -> dict[str, torch.Tensor]:
        """Expert ``e``'s LoRA slices (``{name}.lora_a`` ``(r, d_in)``, ``{name}.lora_b``
        ``(d_out, r)``) and head (``head.weight`` ``(K, d)``, ``head.bias`` ``(K,)``), cloned."""
        return {
            f"{prefix}.{name}": getattr(bank, name)[e].detach().clone()
            for prefix, bank in self.expert_banks.items()
            for name in stacked_names(bank)
        }

    @torch.no_grad()
    def load_expert_state(self, e: int, state: dict[str, torch.Tensor]) -> None:
        """Set expert ``e`` from a dict shaped like :meth:`expert_state`."""
        for prefix, bank in self.expert_banks.items():
            for name in stacked_names(bank):
                getattr(bank, name)[e].copy_(state[f"{prefix}.{name}"])

    def router_state(self) -> dict[str, torch.Tensor]:
        """Router ``G`` of each adapted projection, shape ``(2M - 1, d_in)``, cloned."""
        return {
            name: lin.router.weight.detach().clone() for name, lin in self.encoder.adapted.items()
        }

    @torch.no_grad()
    def load_router_state(self, state: dict[str, torch.Tensor]) -> None:
        """Set the routers from a dict shaped like :meth:`router_state`."""
        for name, lin in self.encoder.adapted.items():
            lin.router.weight.copy_(state[name])

    def trainable_parameters(self, own: int, train_router: bool) -> list[nn.Parameter]:
        """Parameters to optimise: the experts (gradients of experts other than ``own``
        are masked to 0, so they stay frozen under Adam or SGD) and optionally the routers."""
        banks = self.expert_banks
        head = banks.pop("head")
        experts = [getattr(head, n) for n in stacked_names(head)]
        for bank in banks.values():
            experts += [getattr(bank, n) for n in stacked_names(bank)]
        routers = [lin.router.weight for lin in self.encoder.adapted.values()]
        if self.num_experts > 1:
            keep = torch.zeros(self.num_experts)
            keep[own] = 1.0
            for p in experts:
                shape = (-1,) + (1,) * (p.dim() - 1)
                p.register_hook(lambda g, k=keep, s=shape: g * k.to(g).view(s))
        return experts + (routers if train_router and self.num_experts > 1 else [])

    def experts_used(self) -> dict[str, float]:
        """Mean number of distinct experts per token in the last forward, per projection."""
        out = {}
        for name, lin in self.encoder.adapted.items():
            r = lin.last_routing
            out[name] = float(r.kept.sum(1).float().mean()) if r is not None else float("nan")
        return out
