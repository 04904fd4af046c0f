"""Expert banks: ``E`` experts with stacked weights and a grouped forward."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from .._util.activations import get_activation
from .chunked import chunked_forward, chunked_path
from .glu import glu_product
from .grouped import grouped_linear
from .routing import DispatchPlan

__all__ = [
    "AdapterExperts",
    "ExpertBank",
    "GLUExperts",
    "LinearExperts",
    "LoRAExperts",
    "MLPExperts",
    "ResidualMLPExperts",
]


def _init_stacked(weight: torch.Tensor, fan_in: int) -> None:
    bound = 1.0 / math.sqrt(fan_in)
    nn.init.uniform_(weight, -bound, bound)


def _take(weight: torch.Tensor | None, e: int) -> torch.Tensor | None:
    """Expert ``e``'s slice of a stacked ``(E, ...)`` weight (``None`` stays ``None``).

    A one-expert stack (:class:`~sci_moe.moe.SharedExperts`) is squeezed, not indexed: the
    backward of ``squeeze`` is a view, indexing's writes a zero-filled full-size gradient
    (2-4 % of a dense SwiGLU's forward + backward on one CPU thread, d 256-512).
    """
    if weight is None:
        return None
    if weight.shape[0] == 1 and e == 0:
        return weight.squeeze(0)
    return weight[e]


class ExpertBank(nn.Module):
    """Base class: ``E`` experts mapping ``d_in -> d_out``.

    Subclasses implement :meth:`forward_sorted` (all experts at once on rows sorted by
    expert: one grouped GEMM per weight, no Python loop over experts) and
    :meth:`forward_expert` (one expert on plain rows: what the naive reference in
    :mod:`sci_moe.testing` loops over). :meth:`base` is an optional ungated term added
    once per token (the frozen base layer of :class:`LoRAExperts`).

    **Registry.** A bank that :class:`~sci_moe.moe.MoE` may build from its options
    declares a kind: ``class MyExperts(ExpertBank, kind="my")``. ``MoEConfig(expert=
    "my")`` then builds it with :meth:`from_config` (override it when the constructor
    differs from ``(num_experts, d_model, d_hidden, activation)``). A field registers
    its bank by defining the class in its own package; the class must be imported
    before the config is made. :meth:`kinds` lists the registered kinds,
    :meth:`by_kind` looks one up. Subclasses without ``kind=`` are not registered (a
    subclass does not inherit its parent's kind).
    """

    num_experts: int
    d_in: int
    d_out: int
    #: The kind this class registered under (``None``: not buildable by kind).
    kind: ClassVar[str | None] = None
    _registry: ClassVar[dict[str, type[ExpertBank]]] = {}
    #: Width of the widest per-row intermediate of :meth:`forward_sorted` for banks whose
    #: per-expert loop (:meth:`expert_functions`) the dispatch's measured size rule may
    #: choose (:func:`sci_moe.moe.dispatch.per_expert_path`); ``None``: never chosen.
    per_expert_width: int | None = None

    def __init_subclass__(cls, kind: str | None = None, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = kind
        if kind is None:
            return
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"an expert bank's kind must be a non-empty str, got {kind!r}")
        known = ExpertBank._registry.get(kind)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise ValueError(
                f"expert kind {kind!r} is taken by {known.__module__}.{known.__qualname__}; "
                "choose another kind"
            )
        ExpertBank._registry[kind] = cls

    @classmethod
    def kinds(cls) -> tuple[str, ...]:
        """The registered expert kinds, in registration order."""
        return tuple(ExpertBank._registry)

    @classmethod
    def by_kind(cls, kind: str) -> type[ExpertBank]:
        """The bank class registered as ``kind``.

        Raises
        ------
        ValueError
            If no bank has that kind (the message lists the known ones).
        """
        try:
            return ExpertBank._registry[kind]
        except (KeyError, TypeError):
            raise ValueError(
                f"expert must be one of {ExpertBank.kinds()} (registered ExpertBank kinds), "
                f"got {kind!r}; a new bank registers with class B(ExpertBank, kind=...)"
            ) from None

    @classmethod
    def from_config(cls, config) -> ExpertBank:
        """Build the bank of an :class:`~sci_moe.moe.MoEConfig` (``expert=`` this kind).

        Default ``cls(num_experts, d_model, d_hidden, activation)``.
        """
        return cls(config.num_experts, config.d_model, config.d_hidden, config.activation)

    def forward_sorted(self, x: torch.Tensor, plan: DispatchPlan) -> torch.Tensor:
        """Apply expert ``e(r)`` to each row ``r``.

        Parameters
        ----------
        x : Tensor, shape (N, d_in)
            Rows sorted by expert as described by ``plan`` (``N = plan.num_kept``).
        plan : DispatchPlan

        Returns
        -------
        Tensor, shape (N, d_out)
        """
        raise NotImplementedError

    def forward_expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Apply expert ``e`` to ``x`` of shape ``(n, d_in)``; returns ``(n, d_out)``."""
        raise NotImplementedError

    def expert_functions(self) -> list:
        """One callable per expert, ``f_e(x)`` of shape ``(n, d_in) -> (n, d_out)``.

        What the per-expert loop of :func:`~sci_moe.moe.dispatch` calls. The default
        wraps :meth:`forward_expert`; banks override it to take their stacked weights
        apart once (``unbind``: one gradient ``stack`` instead of a full-size zero
        tensor per expert).
        """
        return [lambda x, e=e: self.forward_expert(e, x) for e in range(self.num_experts)]

    def base(self, x: torch.Tensor) -> torch.Tensor | None:
        """Ungated term added to the layer output, or ``None`` (the default)."""
        return None

    def grouped_linear(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        plan: DispatchPlan,
        bias: torch.Tensor | None = None,
        *,
        rows_per_token: int = 1,
    ) -> torch.Tensor:
        """Stacked affine maps on expert-sorted rows: the grouped GEMM of the banks.

        Row ``r`` of ``x`` (sorted as ``plan`` says) gets
        ``weight[e(r)] x_r (+ bias[e(r)])``; one grouped GEMM over all experts (the
        fastest path of the device). For :meth:`forward_sorted` of a new bank.

        Parameters
        ----------
        x : Tensor, shape (N * rows_per_token, d_in)
            Sorted rows (``N = plan.num_kept``), each assignment's rows consecutive.
        weight : Tensor, shape (E, d_out, d_in)
        plan : DispatchPlan
        bias : Tensor, shape (E, d_out), optional
        rows_per_token : int
            Rows per assignment (e.g. 3 for the x, y, z rows of a vector feature).

        Returns
        -------
        Tensor, shape (N * rows_per_token, d_out)
        """
        expert = plan.expert[: plan.num_kept]
        if rows_per_token == 1:
            return grouped_linear(x, weight, plan.counts, plan.offsets, bias=bias, expert=expert)
        counts = plan.counts * rows_per_token
        return grouped_linear(
            x,
            weight,
            counts,
            torch.cumsum(counts, 0).to(torch.int32),
            bias=bias,
            expert=expert.repeat_interleave(rows_per_token),
        )

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, d_in={self.d_in}, d_out={self.d_out}"


class LinearExperts(ExpertBank, kind="linear"):
    """``E`` affine maps ``y = W_e x (+ b_e)``.

    Parameters
    ----------
    num_experts, d_in, d_out : int
    bias : bool
        Per-expert bias.
    """

    def __init__(self, num_experts: int, d_in: int, d_out: int, bias: bool = False) -> None:
        super().__init__()
        self.num_experts, self.d_in, self.d_out = num_experts, d_in, d_out
        self.weight = nn.Parameter(torch.empty(num_experts, d_out, d_in))
        _init_stacked(self.weight, d_in)
        self.bias = nn.Parameter(torch.zeros(num_experts, d_out)) if bias else None

    @classmethod
    def from_config(cls, config) -> LinearExperts:
        """``LinearExperts(num_experts, d_model, d_model)`` (no hidden size)."""
        return cls(config.num_experts, config.d_model, config.d_model)

    def forward_sorted(self, x, plan):
        return self.grouped_linear(x, self.weight, plan, self.bias)

    def forward_expert(self, e, x):
        return nn.functional.linear(x, self.weight[e], None if self.bias is None else self.bias[e])


class MLPExperts(ExpertBank, kind="mlp"):
    """Two-layer MLP experts ``y = sigma(W2_e act(W1_e x + b1_e) + b2_e)``.

    Parameters
    ----------
    num_experts, d_model, d_hidden : int
    activation : str
        See ``sci_moe._util.get_activation``.
    bias : bool
    d_out : int, optional
        Output size (default ``d_model``).
    output_activation : str, optional
        ``sigma``, applied to every expert's output *before* the routing weights mix
        them (``sum_j w_j sigma(.)``: e.g. sigmoid masks, the phoneme MoE of the
        Omni-Expert paper, Saha et al. 2025). ``None`` (default): no output activation.
    """

    def __init__(
        self,
        num_experts: int,
        d_model: int,
        d_hidden: int,
        activation: str = "gelu",
        bias: bool = False,
        d_out: int | None = None,
        *,
        output_activation: str | None = None,
    ) -> None:
        super().__init__()
        self.num_experts, self.d_in, self.d_hidden = num_experts, d_model, d_hidden
        self.d_out = d_model if d_out is None else d_out
        self.activation = activation
        self._act = get_activation(activation)
        self.output_activation = output_activation
        self._out_act = None if output_activation is None else get_activation(output_activation)
        self.up = nn.Parameter(torch.empty(num_experts, d_hidden, d_model))
        self.down = nn.Parameter(torch.empty(num_experts, self.d_out, d_hidden))
        _init_stacked(self.up, d_model)
        _init_stacked(self.down, d_hidden)
        self.up_bias = nn.Parameter(torch.zeros(num_experts, d_hidden)) if bias else None
        self.down_bias = nn.Parameter(torch.zeros(num_experts, self.d_out)) if bias else None

    def forward_sorted(self, x, plan):
        h = self._act(self.grouped_linear(x, self.up, plan, self.up_bias))
        y = self.grouped_linear(h, self.down, plan, self.down_bias)
        return y if self._out_act is None else self._out_act(y)

    def forward_expert(self, e, x):
        F = nn.functional
        ub, db = _take(self.up_bias, e), _take(self.down_bias, e)
        y = F.linear(self._act(F.linear(x, _take(self.up, e), ub)), _take(self.down, e), db)
        return y if self._out_act is None else self._out_act(y)


class GLUExperts(ExpertBank, kind="glu"):
    """Gated-linear-unit experts (SwiGLU with ``activation="silu"``, as Mixtral/Qwen/DeepSeek).

    .. math:: y = W^{down}_e\\,\\big(\\mathrm{act}(W^{gate}_e x) \\odot W^{up}_e x\\big)

    Gate and up projections are fused in one ``(E, 2 d_hidden, d_model)`` parameter
    ``gate_up`` (rows ``[gate; up]``), the layout of transformers' ``gate_up_proj``.

    Parameters
    ----------
    num_experts, d_model, d_hidden : int
    activation : str
    """

    def __init__(
        self, num_experts: int, d_model: int, d_hidden: int, activation: str = "silu"
    ) -> None:
        super().__init__()
        self.num_experts, self.d_in, self.d_out, self.d_hidden = (
            num_experts,
            d_model,
            d_model,
            d_hidden,
        )
        self.activation = activation
        self._act = get_activation(activation)
        self.gate_up = nn.Parameter(torch.empty(num_experts, 2 * d_hidden, d_model))
        self.down = nn.Parameter(torch.empty(num_experts, d_model, d_hidden))
        _init_stacked(self.gate_up, d_model)
        _init_stacked(self.down, d_hidden)

    def _glu(self, gu: torch.Tensor) -> torch.Tensor:
        return glu_product(gu, self.activation)

    @property
    def per_expert_width(self) -> int:
        """``2 d_hidden``: the ``[gate; up]`` rows of the first GEMM."""
        return 2 * self.d_hidden

    def forward_sorted(self, x, plan):
        if chunked_path(x, plan, self):  # measured rule: cache-sized chunks of experts
            return chunked_forward(x, plan, (self.gate_up, self.down), self._glu, 2 * self.d_hidden)
        return self.grouped_linear(
            self._glu(self.grouped_linear(x, self.gate_up, plan)), self.down, plan
        )

    def forward_expert(self, e, x):
        F = nn.functional
        return F.linear(self._glu(F.linear(x, _take(self.gate_up, e))), _take(self.down, e))

    def expert_functions(self):
        F = nn.functional
        gate_up, down = self.gate_up.unbind(0), self.down.unbind(0)
        return [
            lambda x, a=a, b=b: F.linear(self._glu(F.linear(x, a)), b)
            for a, b in zip(gate_up, down, strict=True)
        ]


class AdapterExperts(MLPExperts, kind="adapter"):
    """Bottleneck adapter experts (Houlsby et al. 2019): ``W_up act(W_down x)``.

    The up-projection starts at zero so a freshly added adapter MoE leaves a residual
    stream unchanged. Add its output to the residual yourself (``x + moe(x)``).

    Parameters
    ----------
    num_experts, d_model, bottleneck : int
    activation : str
    """

    def __init__(
        self, num_experts: int, d_model: int, bottleneck: int, activation: str = "gelu"
    ) -> None:
        super().__init__(num_experts, d_model, bottleneck, activation, bias=True)
        nn.init.zeros_(self.down)


class LoRAExperts(ExpertBank):
    """Low-rank experts on one frozen base linear layer (mixture of LoRA adapters).

    .. math:: y = W_0 x + b_0 + \\sum_{e \\in \\mathrm{TopK}(x)} w_e\\,\\frac{\\alpha}{r} B_e A_e x

    The frozen base term is returned by :meth:`base` and added once per token; the
    routed experts compute only their low-rank update. ``B`` starts at zero.

    Parameters
    ----------
    base_layer : nn.Linear
        The pretrained layer; its parameters are frozen (``requires_grad=False``).
    num_experts, rank : int
    alpha : float
        LoRA scale numerator (scale = ``alpha / rank``).
    """

    def __init__(
        self, base_layer: nn.Linear, num_experts: int, rank: int, alpha: float = 16.0
    ) -> None:
        super().__init__()
        if not isinstance(base_layer, nn.Linear):
            raise TypeError(f"base_layer must be an nn.Linear, got {type(base_layer).__name__}")
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        self.base_layer = base_layer
        for p in self.base_layer.parameters():
            p.requires_grad_(False)
        self.num_experts, self.rank = num_experts, rank
        self.d_in, self.d_out = base_layer.in_features, base_layer.out_features
        self.scale = alpha / rank
        self.lora_a = nn.Parameter(torch.empty(num_experts, rank, self.d_in))
        self.lora_b = nn.Parameter(torch.zeros(num_experts, self.d_out, rank))
        _init_stacked(self.lora_a, self.d_in)

    def base(self, x):
        return self.base_layer(x)

    def forward_sorted(self, x, plan):
        return self.scale * self.grouped_linear(
            self.grouped_linear(x, self.lora_a, plan), self.lora_b, plan
        )

    def forward_expert(self, e, x):
        F = nn.functional
        return self.scale * F.linear(F.linear(x, self.lora_a[e]), self.lora_b[e])


class ResidualMLPExperts(ExpertBank):
    """``E`` experts of ``L`` residual, layer-normalised MLP layers of width ``d``.

    .. math::

        h^{(l+1)} = \\gamma_{e,l} \\odot \\mathrm{LN}\\big(\\mathrm{drop}(
            \\mathrm{act}(W_{e,l} h^{(l)} + b_{e,l})) + h^{(l)}\\big) + \\beta_{e,l}

    The expert of AnyGraph (Xia & Huang 2024, ``MLP`` in its ``model.py``), used by the
    graph expert merging of Liu et al. (NeurIPS 2025). Every tensor is stacked over
    experts, so the expert surgery (:func:`~sci_moe.moe.merge_experts`,
    :func:`~sci_moe.moe.copy_expert`, :func:`~sci_moe.moe.merged_forward`) applies; the
    grouped forward runs one grouped GEMM per layer. ``leaky_relu`` has slope 0.5 (as
    AnyGraph).

    Parameters
    ----------
    num_experts, d_model, num_layers : int
    activation : {"relu", "leaky_relu", "gelu", "identity"}
    dropout : float
        Dropout on the branch, active in training mode only.
    eps : float
        LayerNorm epsilon.

    Attributes
    ----------
    weight : Parameter, shape (E, L, d, d)
    bias, ln_weight, ln_bias : Parameter, shape (E, L, d)
    """

    _ACTS: ClassVar[dict] = {
        "relu": nn.functional.relu,
        "leaky_relu": lambda x: nn.functional.leaky_relu(x, 0.5),
        "gelu": nn.functional.gelu,
        "identity": lambda x: x,
    }

    def __init__(
        self,
        num_experts: int,
        d_model: int,
        num_layers: int = 2,
        activation: str = "leaky_relu",
        dropout: float = 0.0,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if num_experts < 1 or d_model < 1 or num_layers < 1:
            raise ValueError(
                f"num_experts, d_model and num_layers must be >= 1, got {num_experts}, "
                f"{d_model}, {num_layers}"
            )
        if activation not in self._ACTS:
            raise ValueError(f"activation must be one of {sorted(self._ACTS)}, got {activation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.num_experts, self.d_in, self.d_out = num_experts, d_model, d_model
        self.num_layers, self.activation, self.dropout, self.eps = (
            num_layers,
            activation,
            dropout,
            eps,
        )
        E, L, d = num_experts, num_layers, d_model
        bound = math.sqrt(6.0 / (2 * d))  # xavier-uniform, as AnyGraph
        self.weight = nn.Parameter(torch.empty(E, L, d, d).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(E, L, d))
        self.ln_weight = nn.Parameter(torch.ones(E, L, d))
        self.ln_bias = nn.Parameter(torch.zeros(E, L, d))

    def _layer(self, h, w, b, g, beta):
        z = nn.functional.linear(h, w, b)
        z = self._ACTS[self.activation](z)
        z = nn.functional.dropout(z, self.dropout, self.training)
        return nn.functional.layer_norm(z + h, (self.d_in,), eps=self.eps) * g + beta

    def forward_sorted(self, x, plan):
        kept = plan.num_kept
        expert = plan.expert[:kept]
        h = x
        for layer in range(self.num_layers):
            z = self.grouped_linear(
                h, self.weight[:, layer].contiguous(), plan, self.bias[:, layer]
            )
            z = self._ACTS[self.activation](z)
            z = nn.functional.dropout(z, self.dropout, self.training)
            z = nn.functional.layer_norm(z + h, (self.d_in,), eps=self.eps)
            h = z * self.ln_weight[expert, layer] + self.ln_bias[expert, layer]
        return h

    def forward_expert(self, e, x):
        h = x
        for layer in range(self.num_layers):
            h = self._layer(
                h,
                self.weight[e, layer],
                self.bias[e, layer],
                self.ln_weight[e, layer],
                self.ln_bias[e, layer],
            )
        return h

    def extra_repr(self) -> str:
        return (
            f"num_experts={self.num_experts}, d_model={self.d_in}, "
            f"num_layers={self.num_layers}, activation={self.activation!r}"
        )
