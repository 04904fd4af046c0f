r"""MoME adapters: shared + top-k routed bottleneck experts beside a frozen sub-module.

MoME (Cappellazzo et al., NeurIPS 2025, arXiv 2510.04136) adds to a block of a frozen
transformer, *in parallel*, a mixture of bottleneck adapters,

.. math::

    h_{out} = \mathrm{Block}(h) + \sum_{n=1}^{N_s} E_n(h)
              + \sum_{n \in \mathrm{TopK}(g(h))} g_n(h)\,E_n(h),
    \qquad E_n(h) = W^{up}_n\,\mathrm{GELU}(W^{down}_n h),
    \qquad g(h) = \mathrm{softmax}(W_r h),

with **one** router and one expert set serving every Matryoshka compression rate. The
adapter is a :class:`~sci_moe.moe.RoutedModule`: the router is the core's
:class:`~sci_moe.moe.Router`, the routed experts the core's
:class:`~sci_moe.moe.AdapterExperts` run by :func:`~sci_moe.moe.dispatch`, the shared
experts a :class:`~sci_moe.moe.SharedExperts` MLP with GELU, and the balance term the
core's Switch :func:`~sci_moe.moe.load_balancing_loss`, returned in the call's
:class:`~sci_moe.moe.MoEInfo` (``return_routing=True``). Every up-projection starts at
zero, so a fresh adapter leaves the frozen model's output unchanged.

Three adapters share one API (``forward(x)`` on tokens ``(..., d_model)``, :attr:`rate`,
:meth:`usage`) so the training loop treats them alike; which tokens are real (the
padding mask) is :class:`~sci_moe.speech.mome.ParallelAdapters`' business, which passes
an adapter only the real tokens:

* :class:`MoMEAdapter`: the method.
* :class:`PerRateAdapter`: one dense adapter per rate (Llama-MTSK-like, "Matryoshka
  only", no sharing across rates).
* :class:`SingleAdapter`: one dense adapter used at every rate (the single-rate baseline
  when trained at one rate).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from sci_moe.moe import (
    AdapterExperts,
    RoutedModule,
    RoutedPath,
    Router,
    RouterConfig,
    Routing,
    SharedExperts,
    load_balancing_loss,
)

__all__ = [
    "DenseAdapter",
    "MoMEAdapter",
    "MoMEConfig",
    "PerRateAdapter",
    "SingleAdapter",
    "adapter_parameter_count",
]


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass
class MoMEConfig:
    """Options of a :class:`MoMEAdapter`.

    Parameters
    ----------
    d_model : int
        Hidden size of the frozen block the adapter sits beside.
    num_experts : int
        Routed experts ``N_r``.
    top_k : int
        Routed experts per token.
    num_shared : int
        Always-on shared experts ``N_s`` (0 disables them).
    bottleneck : int
        Bottleneck width of every expert (>= 1; the paper goes down to 1).
    normalize : bool
        Renormalise the top-k weights to sum to one (the paper does not say; default
        ``False``, weights are the softmax probabilities of the chosen experts).
    activation : str
        Expert non-linearity (GELU in the paper).
    """

    d_model: int
    num_experts: int = 8
    top_k: int = 2
    num_shared: int = 1
    bottleneck: int = 8
    normalize: bool = False
    activation: str = "gelu"

    def __post_init__(self) -> None:
        _positive_int("d_model", self.d_model)
        _positive_int("num_experts", self.num_experts)
        _positive_int("bottleneck", self.bottleneck)
        _positive_int("num_shared", self.num_shared, minimum=0)
        _positive_int("top_k", self.top_k)
        if self.top_k > self.num_experts:
            raise ValueError(
                f"top_k={self.top_k} exceeds num_experts={self.num_experts}; lower top_k"
            )


class _RateAware(nn.Module):
    """Common API: the current rate label and per-rate usage counts."""

    def __init__(self) -> None:
        super().__init__()
        self.rate: str = ""
        self.record = False
        self._counts: dict[str, torch.Tensor] = {}

    def _flatten(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"adapter expects features of size {self.d_model}, got {tuple(x.shape)}"
            )
        return x.reshape(-1, x.shape[-1])

    def reset_usage(self) -> None:
        """Forget the recorded per-rate expert counts."""
        self._counts = {}

    def usage(self) -> dict[str, torch.Tensor]:
        """Per-rate expert-usage histograms recorded while :attr:`record` was on.

        Returns
        -------
        dict of str to Tensor, shape (num_experts,), float64
            Fraction of the kept top-k assignments of each rate's tokens per routed
            expert (empty for dense adapters).
        """
        return {k: v / v.sum().clamp_min(1.0) for k, v in self._counts.items()}

    def _record(self, routing: Routing) -> None:
        if not self.record:
            return
        load = routing.load.detach().to(torch.float64).cpu()
        prev = self._counts.get(self.rate)
        self._counts[self.rate] = load if prev is None else prev + load


class DenseAdapter(nn.Module):
    """One bottleneck adapter ``W_up GELU(W_down x)`` with a zero-initialised ``W_up``.

    A one-expert :class:`~sci_moe.moe.AdapterExperts` bank applied to every token.

    Parameters
    ----------
    d_model, bottleneck : int
    activation : str
    """

    def __init__(self, d_model: int, bottleneck: int, activation: str = "gelu") -> None:
        super().__init__()
        self.bank = AdapterExperts(1, d_model, bottleneck, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` of shape ``(T, d_model)`` -> ``(T, d_model)``."""
        return self.bank.forward_expert(0, x)


class MoMEAdapter(_RateAware, RoutedModule):
    """Shared + top-k routed bottleneck experts, one router for every rate.

    A :class:`~sci_moe.moe.RoutedModule` (flatten, route, dispatch, shared experts,
    reshape); it overrides :meth:`route` (to keep the routing and the per-rate usage)
    and :meth:`auxiliary_losses` (the Switch balance loss).

    Parameters
    ----------
    config : MoMEConfig
        Keyword arguments build one when omitted.

    Attributes
    ----------
    router : Router
        Softmax top-k router ``(E, d_model)``.
    experts : AdapterExperts
        ``num_experts`` routed experts, run with :func:`~sci_moe.moe.dispatch`.
    shared : SharedExperts or None
        ``num_shared`` fused always-on experts (an MLP of width
        ``num_shared * bottleneck``), zero output projection at start.
    last_routing : Routing or None
        Routing of the last call.

    Examples
    --------
    >>> a = MoMEAdapter(d_model=16, num_experts=4, top_k=2, bottleneck=2)
    >>> y, info = a(torch.randn(3, 5, 16), return_routing=True)
    >>> y.shape, sorted(info.losses)
    (torch.Size([3, 5, 16]), ['load_balance'])
    """

    def __init__(self, config: MoMEConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = MoMEConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either a MoMEConfig or keyword arguments, not both")
        c = self.config = config
        self.d_model = c.d_model
        self.router = Router(
            RouterConfig(
                d_model=c.d_model,
                num_experts=c.num_experts,
                top_k=c.top_k,
                score="softmax",
                normalize=c.normalize,
            )
        )
        self.experts = AdapterExperts(c.num_experts, c.d_model, c.bottleneck, c.activation)
        self.shared: SharedExperts | None = None
        if c.num_shared:
            self.shared = SharedExperts(
                c.d_model, c.bottleneck, c.num_shared, kind="mlp", activation=c.activation
            )
            nn.init.zeros_(self.shared.mlp.down)
        self.last_routing: Routing | None = None

    def route(self, x: torch.Tensor) -> Routing:
        """Top-k routing of the ``(T, d_model)`` tokens; kept in :attr:`last_routing` and
        counted under :attr:`rate` while :attr:`record` is on."""
        routing = self.router(x)
        self.last_routing = routing
        self._record(routing)
        return routing

    def auxiliary_losses(self, x: torch.Tensor, routing: Routing) -> dict[str, torch.Tensor]:
        """``{"load_balance": L}``: the Switch balance loss (1 when perfectly balanced),
        unweighted (the training loop weighs it)."""
        return {"load_balance": load_balancing_loss(routing)}

    def routed_paths(self) -> list[RoutedPath]:
        """The adapter's one router -> routed-bank path (with its shared experts)."""
        (path,) = super().routed_paths()
        return [dataclasses.replace(path, num_shared_experts=self.config.num_shared)]

    def active_parameters(self) -> int:
        """Parameters one token uses: router + shared + ``top_k`` routed experts."""
        c = self.config
        per_expert = sum(p.numel() for p in self.experts.parameters()) // c.num_experts
        shared = 0 if self.shared is None else sum(p.numel() for p in self.shared.parameters())
        return self.router.weight.numel() + shared + c.top_k * per_expert


class PerRateAdapter(_RateAware):
    """One dense bottleneck adapter per compression rate (no sharing across rates).

    Parameters
    ----------
    d_model, bottleneck : int
    rates : sequence of str
        Rate labels (as set in :attr:`rate` by the model before each forward).
    activation : str
    """

    def __init__(
        self, d_model: int, bottleneck: int, rates: Sequence[str], activation: str = "gelu"
    ) -> None:
        super().__init__()
        rates = [str(r) for r in rates]
        if not rates or len(set(rates)) != len(rates):
            raise ValueError(f"rates must be distinct labels, got {rates}")
        self.d_model = _positive_int("d_model", d_model)
        _positive_int("bottleneck", bottleneck)
        self.adapters = nn.ModuleDict(
            {r: DenseAdapter(d_model, bottleneck, activation) for r in rates}
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the current rate's adapter to tokens ``(..., d_model)``."""
        if self.rate not in self.adapters:
            raise ValueError(
                f"no adapter for rate {self.rate!r}; this PerRateAdapter has "
                f"{list(self.adapters)} (set .rate before the forward)"
            )
        y = self.adapters[self.rate](self._flatten(x))
        return y.reshape(x.shape[:-1] + y.shape[-1:])

    def active_parameters(self) -> int:
        """Parameters one token uses (one rate's adapter)."""
        first = next(iter(self.adapters.values()))
        return sum(p.numel() for p in first.parameters())


class SingleAdapter(_RateAware):
    """One dense bottleneck adapter used at every rate.

    Parameters
    ----------
    d_model, bottleneck : int
    activation : str
    """

    def __init__(self, d_model: int, bottleneck: int, activation: str = "gelu") -> None:
        super().__init__()
        self.d_model = _positive_int("d_model", d_model)
        _positive_int("bottleneck", bottleneck)
        self.adapter = DenseAdapter(d_model, bottleneck, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the adapter to tokens ``(..., d_model)``."""
        y = self.adapter(self._flatten(x))
        return y.reshape(x.shape[:-1] + y.shape[-1:])

    def active_parameters(self) -> int:
        """Parameters one token uses (all of them)."""
        return sum(p.numel() for p in self.parameters())


def adapter_parameter_count(d_model: int, bottleneck: int) -> int:
    """Parameters of one :class:`DenseAdapter`: ``2 d b + b + d`` (weights and biases).

    Use it to size baselines to a MoME adapter's trainable parameters.

    Parameters
    ----------
    d_model, bottleneck : int

    Returns
    -------
    int
    """
    return 2 * d_model * bottleneck + bottleneck + d_model
