"""The :class:`MoE` layer = router + routed expert bank + shared experts."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch
from torch import nn

from .auxiliary import auxiliary_losses
from .checks import check_coef, check_int, check_layer_input, check_real
from .default_moe import DefaultOutputs
from .dispatchers import Dispatcher, LocalDispatch
from .experts import ExpertBank, GLUExperts, MLPExperts
from .routed import MoEInfo, RoutedModule, RoutedPath
from .router import Router, RouterConfig
from .routing import Routing

__all__ = [
    "MoE",
    "MoEConfig",
    "SharedExperts",
]

_COEFS = ("load_balance_coef", "z_loss_coef", "orthogonality_coef", "variance_coef")


@dataclass
class MoEConfig:
    """Configuration of an :class:`MoE` layer built from scratch.

    Parameters
    ----------
    d_model : int
        Token feature size (input and output).
    num_experts : int
        Routed experts ``E``.
    top_k : int
        Experts per token.
    d_hidden : int, optional
        Hidden size of each expert (default ``2 * d_model``); bottleneck size for
        ``expert="adapter"``.
    expert : str
        Expert kind, a registered :class:`~sci_moe.moe.ExpertBank` kind
        (:meth:`ExpertBank.kinds <sci_moe.moe.ExpertBank.kinds>`): built in ``"glu"``
        (SwiGLU-style), ``"mlp"`` (two-layer MLP), ``"linear"`` (affine map),
        ``"adapter"`` (bottleneck adapter); a field adds its own with
        ``class MyExperts(ExpertBank, kind="my")``.
    activation : str
        Activation of the experts (``"silu"`` for SwiGLU).
    num_shared_experts : int
        Always-on experts, fused into one MLP of hidden size
        ``num_shared_experts * shared_d_hidden`` (DeepSeek-V3); 0 for none.
    shared_d_hidden : int, optional
        Hidden size per shared expert (default ``d_hidden``).
    shared_gate : bool
        Scale the shared output by ``sigmoid(x w_g)`` (Qwen2-MoE).
    load_balance_coef, z_loss_coef : float
        Weights of :func:`load_balancing_loss` and :func:`router_z_loss` in
        :attr:`MoEInfo.aux_loss`.
    global_batch_balance : bool
        All-reduce the balancing statistics over the data-parallel group.
    default_moe : bool
        Default MoE (Panda et al. 2025): non-selected experts contribute an EMA of their
        past outputs, weighted by their router score, so the router gets a dense
        gradient (see :class:`sci_moe.moe.default_moe.DefaultOutputs`).
    default_beta : float
        EMA decay of Default MoE.
    default_scored : bool
        Router-score-weighted EMA update ("scored" variant).
    orthogonality_coef, variance_coef : float
        Weights of :func:`~sci_moe.moe.orthogonality_loss` and
        :func:`~sci_moe.moe.variance_loss` (Guo et al. 2025) in the auxiliary loss; both
        use ``reduction="mean"`` over tokens here so the weight does not depend on the
        batch size.
    check_finite : bool
        Raise ``ValueError`` on NaN/Inf inputs (one reduction per call, and a host sync
        on GPUs; switch off in tuned training loops).
    router : RouterConfig fields
        Any other keyword (``score``, ``mode``, ``normalize``, ``selection_bias``,
        ``num_groups``, ``topk_groups``, ``capacity_factor``, ``jitter``, ``noise_std``,
        ``scaling``, ``norm_eps``, ``bias_update_rate``) goes to :class:`RouterConfig`.
    """

    d_model: int
    num_experts: int
    top_k: int = 2
    d_hidden: int | None = None
    expert: str = "glu"
    activation: str = "silu"
    num_shared_experts: int = 0
    shared_d_hidden: int | None = None
    shared_gate: bool = False
    load_balance_coef: float = 0.01
    z_loss_coef: float = 0.0
    global_batch_balance: bool = False
    default_moe: bool = False
    default_beta: float = 0.9
    default_scored: bool = False
    orthogonality_coef: float = 0.0
    variance_coef: float = 0.0
    check_finite: bool = True
    router: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("d_model", "num_experts", "top_k", "num_shared_experts"):
            setattr(self, name, check_int(name, getattr(self, name)))
        for name in ("d_hidden", "shared_d_hidden"):
            if getattr(self, name) is not None:
                setattr(self, name, check_int(name, getattr(self, name)))
        for name in _COEFS:
            setattr(self, name, check_coef(name, getattr(self, name)))
        self.default_beta = check_real("default_beta", self.default_beta)
        ExpertBank.by_kind(self.expert)  # a registered kind (ValueError listing them)
        if self.d_hidden is None:
            self.d_hidden = 2 * self.d_model
        if self.d_hidden < 1:
            raise ValueError(f"d_hidden must be >= 1, got {self.d_hidden}")
        if self.num_shared_experts < 0:
            raise ValueError(f"num_shared_experts must be >= 0, got {self.num_shared_experts}")
        if self.shared_d_hidden is None:
            self.shared_d_hidden = self.d_hidden
        if not 0.0 <= self.default_beta < 1.0:
            raise ValueError(f"default_beta must be in [0, 1), got {self.default_beta}")
        # Validate the router options now, with the layer's sizes.
        self.router_config()

    def router_config(self) -> RouterConfig:
        """The :class:`RouterConfig` these options describe."""
        return RouterConfig(
            d_model=self.d_model, num_experts=self.num_experts, top_k=self.top_k, **self.router
        )


class SharedExperts(nn.Module):
    """Always-on (shared) experts: one dense GLU/MLP, optionally sigmoid-gated.

    ``num_shared`` experts of hidden size ``d_hidden`` are fused into one of hidden size
    ``num_shared * d_hidden`` (exactly equivalent, as DeepSeek-V3 does). With
    ``gate=True`` the output is multiplied by ``sigmoid(x w_g)`` (Qwen2-MoE).

    Parameters
    ----------
    d_model, d_hidden : int
    num_shared : int
    kind : {"glu", "mlp"}
    activation : str
    gate : bool
    """

    def __init__(
        self,
        d_model: int,
        d_hidden: int,
        num_shared: int = 1,
        kind: str = "glu",
        activation: str = "silu",
        gate: bool = False,
    ) -> None:
        super().__init__()
        hidden = num_shared * d_hidden
        if kind == "glu":
            self.mlp: ExpertBank = GLUExperts(1, d_model, hidden, activation)
        elif kind == "mlp":
            self.mlp = MLPExperts(1, d_model, hidden, activation)
        else:
            raise ValueError(f"shared experts must be 'glu' or 'mlp', got {kind!r}")
        self.gate = nn.Linear(d_model, 1, bias=False) if gate else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` of shape ``(..., d_model)`` -> ``(..., d_model)`` (also a plain dense GLU/MLP)."""
        y = self.mlp.forward_expert(0, x)
        if self.gate is not None:
            y = torch.sigmoid(self.gate(x)) * y
        return y


class MoE(RoutedModule):
    """Mixture-of-Experts layer: ``y = sum_k w_k E_{i_k}(x) (+ shared(x)) (+ base(x))``.

    Build it from options (``MoE(d_model=64, num_experts=8, top_k=2)`` or an
    :class:`MoEConfig`), or from parts (``MoE.from_modules(router, experts, shared)``),
    e.g. to reuse one router's :class:`Routing` across several banks.

    Parameters
    ----------
    config : MoEConfig, optional
        Built from ``**kwargs`` when omitted.
    dispatcher : Dispatcher, optional
        Where the routed experts run: :class:`~sci_moe.moe.LocalDispatch` (default) or
        :class:`~sci_moe.moe.parallel.ExpertParallel` (experts sharded over the ranks of
        a process group; the bank then holds this rank's slice). Every option of the
        layer works with every dispatcher: there is one forward.

    Attributes
    ----------
    router : Router
    experts : ExpertBank
    shared : SharedExperts or None
    config : MoEConfig or None
        ``None`` for layers built with :meth:`from_modules`.
    dispatcher : Dispatcher

    Examples
    --------
    >>> moe = MoE(d_model=32, num_experts=8, top_k=2)
    >>> x = torch.randn(4, 10, 32)
    >>> y, info = moe(x, return_routing=True)
    >>> y.shape, info.routing.indices.shape
    (torch.Size([4, 10, 32]), torch.Size([40, 2]))
    """

    def __init__(
        self, config: MoEConfig | None = None, *, dispatcher: Dispatcher | None = None, **kwargs
    ) -> None:
        super().__init__()
        if config is None:
            names = {f.name for f in fields(MoEConfig)}
            router_kw = {k: kwargs.pop(k) for k in list(kwargs) if k not in names}
            if router_kw:
                valid = {f.name for f in fields(RouterConfig)}
                unknown = sorted(set(router_kw) - valid)
                if unknown:
                    raise TypeError(f"unknown MoE option(s) {unknown}")
                kwargs["router"] = {**kwargs.get("router", {}), **router_kw}
            config = MoEConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either an MoEConfig or keyword arguments, not both")
        c = config
        self.config: MoEConfig | None = c
        self.d_model = c.d_model
        self.load_balance_coef, self.z_loss_coef = c.load_balance_coef, c.z_loss_coef
        self.global_batch_balance = c.global_batch_balance
        self.orthogonality_coef, self.variance_coef = c.orthogonality_coef, c.variance_coef
        self.check_finite = c.check_finite
        self.router = Router(c.router_config())
        self.experts: ExpertBank = ExpertBank.by_kind(c.expert).from_config(c)
        self.default = None
        if c.default_moe:
            self.default = DefaultOutputs(
                c.num_experts, self.experts.d_out, c.default_beta, c.default_scored
            )
        self.shared = None
        if c.num_shared_experts:
            kind = "glu" if c.expert == "glu" else "mlp"
            self.shared = SharedExperts(
                c.d_model,
                c.shared_d_hidden,
                c.num_shared_experts,
                kind,
                c.activation,
                c.shared_gate,
            )
        self._adopt(dispatcher)

    def _adopt(self, dispatcher: Dispatcher | None) -> None:
        dispatcher = LocalDispatch() if dispatcher is None else dispatcher
        if not isinstance(dispatcher, Dispatcher):
            raise TypeError(
                f"dispatcher must be a sci_moe.moe.Dispatcher (e.g. LocalDispatch() or "
                f"sci_moe.moe.parallel.ExpertParallel()), got {type(dispatcher).__name__}"
            )
        self.dispatcher = dispatcher
        dispatcher.attach(self)

    @classmethod
    def from_modules(
        cls,
        router: Router,
        experts: ExpertBank,
        shared: nn.Module | None = None,
        load_balance_coef: float = 0.01,
        z_loss_coef: float = 0.0,
        global_batch_balance: bool = False,
        default: DefaultOutputs | None = None,
        orthogonality_coef: float = 0.0,
        variance_coef: float = 0.0,
        *,
        check_finite: bool = True,
        dispatcher: Dispatcher | None = None,
    ) -> MoE:
        """Assemble a layer from an existing router, expert bank and shared module.

        ``shared`` is any module mapping ``(T, d_model) -> (T, d_model)``; ``default``
        a :class:`sci_moe.moe.default_moe.DefaultOutputs` for Default MoE; the coefficients and
        ``check_finite`` are those of :class:`MoEConfig`; ``dispatcher`` as in
        :class:`MoE`. The result's ``config`` attribute is ``None``: the parts, not a
        config, define it.
        """
        load_balance_coef = check_coef("load_balance_coef", load_balance_coef)
        z_loss_coef = check_coef("z_loss_coef", z_loss_coef)
        orthogonality_coef = check_coef("orthogonality_coef", orthogonality_coef)
        variance_coef = check_coef("variance_coef", variance_coef)
        sharded = dispatcher is not None and dispatcher.shards_experts
        if router.num_experts != experts.num_experts and not sharded:
            raise ValueError(
                f"router has {router.num_experts} experts but the bank has {experts.num_experts}"
            )
        if router.config.d_model != experts.d_in:
            raise ValueError(
                f"router expects d_model={router.config.d_model} "
                f"but the bank's d_in is {experts.d_in}"
            )
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        # Built from parts: there is no MoEConfig that would rebuild this layer.
        self.config = None
        self.d_model = experts.d_in
        self.load_balance_coef, self.z_loss_coef = load_balance_coef, z_loss_coef
        self.global_batch_balance = global_batch_balance
        self.orthogonality_coef, self.variance_coef = orthogonality_coef, variance_coef
        self.check_finite = check_finite
        self.default = default
        self.router, self.experts, self.shared = router, experts, shared
        self._adopt(dispatcher)
        return self

    @property
    def num_experts(self) -> int:
        """Number of routed experts ``E``."""
        return self.router.num_experts

    @property
    def top_k(self) -> int:
        """Experts per token ``k``."""
        return self.router.top_k

    def _check_input(self, x: torch.Tensor) -> None:
        check_layer_input(x, self.d_model, self.check_finite)

    def _weight_dtype(self) -> torch.dtype | None:
        """The one floating dtype of the expert bank's parameters (``None`` if mixed)."""
        dtypes = {p.dtype for p in self.experts.parameters() if p.is_floating_point()}
        return dtypes.pop() if len(dtypes) == 1 else None

    def route(self, x: torch.Tensor) -> Routing:
        """Route ``x`` of shape ``(..., d_model)`` (flattened to ``(T, d_model)``)."""
        self._check_input(x)
        return self.dispatcher.route(self.router, x.reshape(-1, self.d_model))

    def routed_paths(self) -> list[RoutedPath]:
        """The layer's one :class:`~sci_moe.moe.RoutedPath` (router -> experts)."""
        n_shared = 0
        if self.shared is not None:
            n_shared = self.config.num_shared_experts if self.config is not None else 1
        return [
            RoutedPath(
                owner=self,
                router=self.router,
                experts=self.experts,
                num_experts=self.num_experts,
                top_k=self.top_k,
                d_model=self.d_model,
                shared=self.shared,
                num_shared_experts=n_shared,
            )
        ]

    def forward(
        self,
        x: torch.Tensor,
        routing: Routing | None = None,
        return_routing: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, MoEInfo]:
        """Apply the layer.

        Parameters
        ----------
        x : Tensor, shape (..., d_model)
        routing : Routing, optional
            A routing computed earlier (e.g. by another layer sharing this router);
            computed from ``x`` when omitted.
        return_routing : bool
            Also return an :class:`MoEInfo` with the routing and auxiliary losses.

        Returns
        -------
        y : Tensor, shape (..., d_out)
        info : MoEInfo
            Only with ``return_routing=True``.
        """
        check_layer_input(x, self.d_model, self.check_finite, dtype=self._weight_dtype())
        shape = x.shape
        x2 = x.reshape(-1, self.d_model)
        if routing is None:
            routing = self.dispatcher.route(self.router, x2)
        elif routing.num_experts != self.num_experts or routing.num_tokens != x2.shape[0]:
            raise ValueError(
                f"routing is for {routing.num_tokens} tokens over {routing.num_experts} "
                f"experts, but x has {x2.shape[0]} tokens and the layer {self.num_experts}"
            )
        use_default = self.default is not None and self.default.active()
        need_outputs = use_default or (return_routing and self.orthogonality_coef > 0)
        ys = None
        if need_outputs:
            y, ys = self.dispatcher(x2, routing, self.experts, return_expert_outputs=True)
        else:
            y = self.dispatcher(x2, routing, self.experts)
        if use_default:
            if self.training:  # EMA first (over the whole batch), then used in the same step
                self.default.update(routing, ys, reduce=self.dispatcher.reduce_batch)
            y = y + self.default(routing).to(y.dtype)
        base = self.experts.base(x2)
        if base is not None:
            y = y + base
        if self.shared is not None:
            y = y + self.shared(x2)
        y = y.to(x.dtype).reshape(*shape[:-1], y.shape[-1])
        if not return_routing:
            return y
        losses, aux = auxiliary_losses(
            routing,
            self.load_balance_coef,
            self.z_loss_coef,
            self.variance_coef,
            self.orthogonality_coef,
            expert_outputs=ys,
            global_batch=self.global_batch_balance,
            process_group=self.dispatcher.process_group,
        )
        return y, MoEInfo(routing, losses, aux, ys)

    @torch.no_grad()
    def update_router_bias(self, routing: Routing) -> None:
        """Aux-loss-free balancing step from the load of ``routing``.

        See :meth:`Router.update_bias`. With a dispatcher that splits the batch over
        ranks (expert parallelism) the load is summed over the ranks first (a
        collective), so the replicated biases stay identical.
        """
        self.router.update_bias(self.dispatcher.reduce_batch(routing.load.clone()))
