"""Routing Mamba (RoM): Mamba's projections as routed expert banks sharing one routing.

Zhan et al., "Routing Mamba: Scaling State Space Models with Mixture-of-Experts
Projection", NeurIPS 2025 (arXiv 2506.18145). The Conv Proj (x half of ``in_proj``),
Gate Proj (z half) and Out Proj of a Mamba block become banks of ``E`` linear experts;
**one** router reads the block input and its top-k decision and weights drive all three
banks; the depthwise convolution, ``x_proj``, ``dt_proj``, ``A`` and ``D`` stay shared:

.. math::

    r &= \\mathrm{Router}(h_t) \\quad (\\text{experts } i_{tj},\\ \\text{weights } w_{tj}) \\\\
    x_t &= \\textstyle\\sum_j w_{tj} W^{conv}_{i_{tj}} h_t, \\qquad
    z_t = \\sum_j w_{tj} W^{gate}_{i_{tj}} h_t \\\\
    y &= \\mathrm{MambaMix}(x, z) \\quad (\\text{shared conv, x\\_proj, dt\\_proj, scan}) \\\\
    \\mathrm{out}_t &= \\textstyle\\sum_j w_{tj} W^{out}_{i_{tj}} y_t

The routing is a core :class:`~sci_moe.moe.Routing`, computed once per block call and
passed to the three routed projections, each a :class:`RoMProjection` (a
:class:`~sci_moe.moe.RoutedModule` over a :class:`~sci_moe.moe.LinearExperts` bank, run
by :func:`~sci_moe.moe.dispatch`; the routing caches its expert sort, so the three banks
share it too). ``routing="independent"`` is the paper's ablation: one router per
projection (Conv and Gate routers read ``h``, the Out router reads ``y``). The block owns
its routers and passes each projection its routing. With one expert and ``top_k=1`` the
block is exactly a dense :class:`~.block.MambaBlock`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ...moe import (
    LinearExperts,
    MoEInfo,
    RoutedModule,
    RoutedPath,
    Router,
    RouterConfig,
    Routing,
    auxiliary_losses,
)
from .block import MambaBlock, MambaConfig, MambaState

__all__ = ["PROJECTIONS", "RoMBlock", "RoMConfig", "RoMProjection"]

PROJECTIONS = ("conv", "gate", "out")
"""Names of the routed projections of a :class:`RoMBlock` (Conv, Gate and Out Proj)."""
_ROUTING = ("shared", "independent")


@dataclass
class RoMConfig(MambaConfig):
    """Options of a :class:`RoMBlock`: every :class:`~.block.MambaConfig` field, plus routing.

    Parameters
    ----------
    num_experts : int
        Experts per projection bank ``E``.
    top_k : int
        Experts per token ``k`` (``1 <= k <= E``).
    routing : {"shared", "independent"}
        One router for the three projections (RoM) or one router each (ablation).
    router : dict
        Extra :class:`~sci_moe.moe.RouterConfig` options (``score``, ``normalize``,
        ``selection_bias``, ``noise_std``, ``jitter``, ``capacity_factor``, ...).
    load_balance_coef, z_loss_coef : float
        Weights of the load-balance and z losses in :attr:`MoEInfo.aux_loss`
        (see :func:`~sci_moe.moe.auxiliary_losses`); summed over routers.
    """

    num_experts: int = 8
    top_k: int = 1
    routing: str = "shared"
    router: dict = field(default_factory=dict)
    load_balance_coef: float = 0.01
    z_loss_coef: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.routing not in _ROUTING:
            raise ValueError(f"routing must be one of {_ROUTING}, got {self.routing!r}")
        if not isinstance(self.router, dict):
            raise TypeError(f"router must be a dict of RouterConfig options, got {self.router!r}")
        if self.load_balance_coef < 0 or self.z_loss_coef < 0:
            raise ValueError("load_balance_coef and z_loss_coef must be >= 0")
        self.router_config(self.d_model)  # validates num_experts, top_k and options

    def router_config(self, d_in: int) -> RouterConfig:
        """The :class:`~sci_moe.moe.RouterConfig` of a router reading ``d_in`` features."""
        reserved = {"d_model", "num_experts", "top_k"} & set(self.router)
        if reserved:
            raise ValueError(f"set {sorted(reserved)} as RoMConfig fields, not in router")
        return RouterConfig(
            d_model=d_in, num_experts=self.num_experts, top_k=self.top_k, **self.router
        )


class RoMProjection(RoutedModule):
    """One routed projection of a :class:`RoMBlock`: ``E`` linear experts, routed by the block.

    A :class:`~sci_moe.moe.RoutedModule` without a router of its own: the block computes
    the routing (its shared router, or this projection's router of the independent
    ablation) and calls ``projection(x, routing)``, which flattens the tokens, runs the
    bank through :func:`~sci_moe.moe.dispatch` and reshapes. Its routed path is reported
    by the block (:meth:`RoMBlock.routed_paths`), with the router that routes it.

    Parameters
    ----------
    num_experts, d_in, d_out : int
    bias : bool
        Per-expert bias.

    Attributes
    ----------
    experts : LinearExperts
        ``weight`` of shape ``(E, d_out, d_in)`` (and ``bias`` ``(E, d_out)``).
    """

    def __init__(self, num_experts: int, d_in: int, d_out: int, bias: bool = False) -> None:
        super().__init__()
        self.d_model = d_in
        self.experts = LinearExperts(num_experts, d_in, d_out, bias=bias)

    def route(self, x: torch.Tensor) -> Routing:
        """Not routable alone: the :class:`RoMBlock` passes the routing."""
        raise ValueError(
            "a RoMProjection is routed by its RoMBlock: call it as projection(x, routing)"
        )

    def routed_paths(self) -> list[RoutedPath]:
        """None of its own: the block reports the path with its router."""
        return []


class RoMBlock(MambaBlock):
    """Routing Mamba block: routed Conv/Gate/Out projection experts, shared SSM core.

    Parameters
    ----------
    config : RoMConfig
        Built from keyword arguments when omitted.

    Attributes
    ----------
    router : Router
        The shared router (``routing="shared"``).
    routers : ModuleDict
        ``{"conv", "gate", "out"}`` routers (``routing="independent"``).
    conv_proj, gate_proj : RoMProjection
        ``E`` experts ``d_model -> d_inner`` each (bank ``conv_proj.experts``).
    out_proj : RoMProjection
        ``E`` experts ``d_inner -> d_model``.

    Examples
    --------
    >>> block = RoMBlock(d_model=16, d_state=4, num_experts=4, top_k=2)
    >>> out, info = block(torch.randn(2, 10, 16))
    >>> out.shape, info.routing.indices.shape
    (torch.Size([2, 10, 16]), torch.Size([20, 2]))
    """

    def __init__(self, config: RoMConfig | None = None, **kwargs) -> None:
        if config is None:
            config = RoMConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either a RoMConfig or keyword arguments, not both")
        if not isinstance(config, RoMConfig):
            raise TypeError(f"config must be a RoMConfig, got {type(config).__name__}")
        super().__init__(config)

    def build_projections(self) -> None:
        c = self.config
        E, d, di = c.num_experts, c.d_model, c.d_inner
        self.conv_proj = RoMProjection(E, d, di, bias=c.bias)
        self.gate_proj = RoMProjection(E, d, di, bias=c.bias)
        self.out_proj = RoMProjection(E, di, d, bias=c.bias)
        if c.routing == "shared":
            self.router = Router(c.router_config(d))
        else:
            self.routers = torch.nn.ModuleDict(
                {
                    "conv": Router(c.router_config(d)),
                    "gate": Router(c.router_config(d)),
                    "out": Router(c.router_config(di)),
                }
            )

    def banks(self) -> dict[str, LinearExperts]:
        """The three routed banks by projection name."""
        return {name: getattr(self, f"{name}_proj").experts for name in PROJECTIONS}

    def expert_parameters(self) -> int:
        """Parameters of all routed experts (the three banks)."""
        return sum(p.numel() for b in self.banks().values() for p in b.parameters())

    def routed_paths(self) -> list[RoutedPath]:
        """The ``"conv"``, ``"gate"`` and ``"out"`` projection paths.

        With shared routing all three have the same router (balancing tools such as
        :class:`~sci_moe.moe.BiasBalancer` update it once); see
        :func:`sci_moe.moe.routed_paths`.
        """
        c = self.config
        paths = []
        for name, bank in self.banks().items():
            router = self.router if c.routing == "shared" else self.routers[name]
            d_in = c.d_inner if name == "out" else c.d_model
            paths.append(RoutedPath(self, router, bank, c.num_experts, c.top_k, d_in, name=name))
        return paths

    def active_parameters(self) -> int:
        """Parameters one token uses: shared ones, routers and ``top_k`` experts per bank."""
        c = self.config
        total = sum(p.numel() for p in self.parameters())
        experts = self.expert_parameters()
        return total - experts + experts * c.top_k // c.num_experts

    def _info(self, routings: dict) -> MoEInfo:
        c = self.config
        losses, aux = {}, None
        for name, r in routings.items():
            ls, a = auxiliary_losses(r, c.load_balance_coef, c.z_loss_coef)
            suffix = "" if len(routings) == 1 else f"[{name}]"
            losses.update({f"{k}{suffix}": v for k, v in ls.items()})
            aux = a if aux is None else aux + a
        first = next(iter(routings.values()))
        return MoEInfo(first, losses, aux)

    def forward(
        self,
        hidden_states: torch.Tensor,
        state: MambaState | None = None,
        return_state: bool = False,
    ) -> tuple[torch.Tensor, MoEInfo] | tuple[torch.Tensor, MambaState, MoEInfo]:
        """Mix a sequence through routed projections.

        Parameters
        ----------
        hidden_states : Tensor, shape (batch, length, d_model)
        state : MambaState, optional
            Continue after earlier tokens (see :meth:`MambaBlock.forward`).
        return_state : bool
            Also return the state after the last token.

        Returns
        -------
        out : Tensor, shape (batch, length, d_model)
        state : MambaState
            Only with ``return_state=True``.
        info : MoEInfo
            The (shared) routing of the ``batch * length`` tokens, the unweighted
            auxiliary losses and their weighted sum ``aux_loss``. With independent
            routers ``info.routing`` is the Conv router's and the losses of the three
            routers are named ``"load_balance[conv]"`` etc. and summed in ``aux_loss``.
        """
        c = self.config
        if hidden_states.dim() != 3 or hidden_states.shape[-1] != c.d_model:
            raise ValueError(
                f"hidden_states must have shape (batch, length, {c.d_model}), "
                f"got {tuple(hidden_states.shape)}"
            )
        Bsz, L, d = hidden_states.shape
        h = hidden_states.reshape(Bsz * L, d)
        if c.routing == "shared":
            r = self.router(h)  # the one routing decision of this block
            routings = {"shared": r}
            r_conv = r_gate = r_out = r
        else:
            r_conv, r_gate = self.routers["conv"](h), self.routers["gate"](h)
            routings = {"conv": r_conv, "gate": r_gate}
        x = self.conv_proj(h, r_conv).view(Bsz, L, -1)
        z = self.gate_proj(h, r_gate).view(Bsz, L, -1)
        y, new_state = self.mix(x, z, state)
        y2 = y.reshape(Bsz * L, -1)
        if c.routing == "independent":
            r_out = routings["out"] = self.routers["out"](y2)
        out = self.out_proj(y2, r_out).view(Bsz, L, d)
        info = self._info(routings)
        return (out, new_state, info) if return_state else (out, info)

    def step(self, token: torch.Tensor, state: MambaState) -> tuple[torch.Tensor, MambaState]:
        """One generation step: ``token (batch, d_model) -> (out (batch, d_model), state)``."""
        if token.dim() != 2:
            raise ValueError(f"token must have shape (batch, d_model), got {tuple(token.shape)}")
        out, state, _ = self.forward(token[:, None], state, return_state=True)
        return out[:, 0], state

    @classmethod
    def from_dense(cls, dense: MambaBlock, **options) -> RoMBlock:
        """A RoM block whose every expert is a copy of ``dense``'s projections (upcycling).

        Parameters
        ----------
        dense : MambaBlock
        **options
            :class:`RoMConfig` routing fields (``num_experts``, ``top_k``, ...).

        Returns
        -------
        RoMBlock
            With one expert and ``top_k=1`` it computes exactly what ``dense`` does.
        """
        if type(dense) is not MambaBlock:
            raise TypeError(f"dense must be a MambaBlock, got {type(dense).__name__}")
        fields_ = {k: v for k, v in vars(dense.config).items()}
        block = cls(RoMConfig(**fields_, **options))
        p = dense.A_log
        block = block.to(dtype=p.dtype, device=p.device)
        sd = dense.state_dict()
        di = dense.config.d_inner
        w_in = sd.pop("in_proj.weight")
        w_out = sd.pop("out_proj.weight")
        b_in, b_out = sd.pop("in_proj.bias", None), sd.pop("out_proj.bias", None)
        E = block.config.num_experts
        banks = block.banks()
        with torch.no_grad():
            banks["conv"].weight.copy_(w_in[:di].expand(E, -1, -1))
            banks["gate"].weight.copy_(w_in[di:].expand(E, -1, -1))
            banks["out"].weight.copy_(w_out.expand(E, -1, -1))
            if b_in is not None:
                banks["conv"].bias.copy_(b_in[:di].expand(E, -1))
                banks["gate"].bias.copy_(b_in[di:].expand(E, -1))
                banks["out"].bias.copy_(b_out.expand(E, -1))
        missing, unexpected = block.load_state_dict(sd, strict=False)
        if unexpected or [
            k for k in missing if not k.startswith(("conv_proj", "gate_proj", "out_proj", "router"))
        ]:
            raise ValueError(
                f"dense block does not fit: missing {missing}, unexpected {unexpected}"
            )
        return block
