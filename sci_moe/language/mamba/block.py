"""A pure-torch Mamba (v1) block with a constant-size inference state.

Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State Spaces"
(arXiv 2312.00752), Fig. 3 / Alg. 2, in the parameter layout of transformers'
``MambaMixer`` (so its weights load as a state dict, see :mod:`.interop`):

.. math::

    [x; z] &= W_{in} h \\qquad (\\text{Conv Proj } x,\\ \\text{Gate Proj } z) \\\\
    u &= \\mathrm{silu}(\\mathrm{conv1d}_{causal}(x)) \\\\
    [\\delta; B; C] &= W_x u, \\qquad \\Delta = \\mathrm{softplus}(W_{dt} \\delta + b_{dt}) \\\\
    y &= \\mathrm{SSM}_{A, D}(u, \\Delta, B, C) \\cdot \\mathrm{silu}(z) \\\\
    \\mathrm{out} &= W_{out}\\, y

with ``A = -exp(A_log)``. The projections are methods (:meth:`MambaBlock.project_in`,
:meth:`MambaBlock.project_out`) so Routing Mamba replaces them with routed expert
banks and keeps :meth:`MambaBlock.mix` (conv, x_proj, dt_proj, scan) shared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import scan_kernel
from .recurrent import ScanWorkspace, selective_scan_recurrent
from .scan import selective_scan, selective_scan_reference

__all__ = ["MambaBlock", "MambaConfig", "MambaState"]

_SCANS = ("auto", "parallel", "recurrent", "reference")


@dataclass
class MambaConfig:
    """Options of a :class:`MambaBlock`.

    Parameters
    ----------
    d_model : int
        Input/output width.
    d_state : int
        SSM state size ``N`` per channel (16 in Mamba).
    d_conv : int
        Width of the causal depthwise convolution (4 in Mamba).
    expand : int
        ``d_inner = expand * d_model`` (2 in Mamba).
    dt_rank : int or "auto"
        Rank of the time-step projection; ``"auto"`` is ``ceil(d_model / 16)``.
    bias : bool
        Biases on ``in_proj`` and ``out_proj``.
    conv_bias : bool
        Bias on the depthwise convolution.
    dt_min, dt_max, dt_init_floor : float
        Initial time steps are log-uniform in ``[dt_min, dt_max]``, at least the floor.
    chunk_size : int
        Chunk length of the parallel scan (:func:`~.scan.selective_scan`).
    scan : {"auto", "parallel", "recurrent", "reference"}
        ``"parallel"``: :func:`~.scan.selective_scan` (the chunked parallel scan, Triton
        kernels on CUDA); ``"recurrent"``: :func:`~.recurrent.selective_scan_recurrent` (one
        fused autograd node, the fast one on the CPU); ``"auto"`` (default): the
        recurrent scan for CPU tensors, else the parallel one (also on the CPU where
        :func:`~.scan_kernel.use_triton_scan` would take the Triton kernels); ``"reference"``: the
        step-by-step loop (for checks and timing). All four compute the same values up to
        floating-point rounding.
    """

    d_model: int
    d_state: int = 16
    d_conv: int = 4
    expand: int = 2
    dt_rank: int | str = "auto"
    bias: bool = False
    conv_bias: bool = True
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    dt_init_floor: float = 1e-4
    chunk_size: int = 256
    scan: str = "auto"

    def __post_init__(self) -> None:
        for name in ("d_model", "d_state", "d_conv", "expand", "chunk_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if self.dt_rank == "auto":
            self.dt_rank = math.ceil(self.d_model / 16)
        if not isinstance(self.dt_rank, int) or self.dt_rank < 1:
            raise ValueError(f"dt_rank must be an int >= 1 or 'auto', got {self.dt_rank!r}")
        if not 0 < self.dt_min <= self.dt_max:
            raise ValueError(
                f"need 0 < dt_min <= dt_max, got dt_min={self.dt_min}, dt_max={self.dt_max}"
            )
        if self.scan not in _SCANS:
            raise ValueError(f"scan must be one of {_SCANS}, got {self.scan!r}")

    @property
    def d_inner(self) -> int:
        """Inner width ``expand * d_model``."""
        return self.expand * self.d_model


@dataclass
class MambaState:
    """Constant-size recurrent state of a :class:`MambaBlock` (for generation).

    Attributes
    ----------
    conv : Tensor, shape (batch, d_inner, d_conv - 1)
        The last ``d_conv - 1`` inputs of the convolution.
    ssm : Tensor, shape (batch, d_inner, d_state)
        The SSM state ``h``, in at least float32.
    """

    conv: torch.Tensor
    ssm: torch.Tensor


class MambaBlock(nn.Module):
    """Mamba (v1) mixer: in_proj, causal depthwise conv, selective scan, gate, out_proj.

    Parameter names and shapes are those of transformers' ``MambaMixer``:
    ``in_proj (2 d_inner, d_model)``, ``conv1d (d_inner, 1, d_conv)``,
    ``x_proj (dt_rank + 2 d_state, d_inner)``, ``dt_proj (d_inner, dt_rank)``,
    ``A_log (d_inner, d_state)``, ``D (d_inner,)``, ``out_proj (d_model, d_inner)``.
    No normalisation or residual (wrap it in a pre-norm residual block).

    Parameters
    ----------
    config : MambaConfig
        Built from keyword arguments when omitted.

    Attributes
    ----------
    scan_workspace : ScanWorkspace
        This block's reusable memory for :func:`~.recurrent.selective_scan_recurrent` (the
        CPU scan): a plain attribute, never in ``state_dict``; ``copy.deepcopy`` and
        pickling give the copy a fresh empty one. It holds at most a few
        ``(length, batch, d_inner, d_state)`` tensors of the latest call's shape.

    Examples
    --------
    >>> block = MambaBlock(d_model=16, d_state=4)
    >>> block(torch.randn(2, 10, 16)).shape
    torch.Size([2, 10, 16])
    """

    def __init__(self, config: MambaConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = MambaConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either a MambaConfig or keyword arguments, not both")
        self.config = c = config
        d, di = c.d_model, c.d_inner
        self.build_projections()
        self.conv1d = nn.Conv1d(di, di, c.d_conv, groups=di, padding=0, bias=c.conv_bias)
        self.x_proj = nn.Linear(di, c.dt_rank + 2 * c.d_state, bias=False)
        self.dt_proj = nn.Linear(c.dt_rank, di, bias=True)
        A = torch.arange(1, c.d_state + 1, dtype=torch.get_default_dtype()).expand(di, -1)
        self.A_log = nn.Parameter(torch.log(A).contiguous())
        self.D = nn.Parameter(torch.ones(di))
        # reusable memory of the recurrent scan, this block's own: a plain attribute (not
        # in state_dict); a deepcopy or pickle of the block gets a fresh empty one
        self.scan_workspace = ScanWorkspace()
        self._init_dt()
        del d

    # ----------------------------------------------------------- projections

    def build_projections(self) -> None:
        """Create ``in_proj`` and ``out_proj`` (overridden by Routing Mamba)."""
        c = self.config
        self.in_proj = nn.Linear(c.d_model, 2 * c.d_inner, bias=c.bias)
        self.out_proj = nn.Linear(c.d_inner, c.d_model, bias=c.bias)

    def project_in(self, h: torch.Tensor, context=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Conv Proj and Gate Proj: ``(x, z)``, each ``(batch, length, d_inner)``."""
        return self.in_proj(h).chunk(2, dim=-1)

    def project_out(self, y: torch.Tensor, context=None) -> torch.Tensor:
        """Out Proj: ``(batch, length, d_inner) -> (batch, length, d_model)``."""
        return self.out_proj(y)

    @torch.no_grad()
    def _init_dt(self) -> None:
        c = self.config
        std = c.dt_rank**-0.5
        nn.init.uniform_(self.dt_proj.weight, -std, std)
        dt = torch.exp(
            torch.rand(c.d_inner) * (math.log(c.dt_max) - math.log(c.dt_min)) + math.log(c.dt_min)
        ).clamp(min=c.dt_init_floor)
        self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus

    # ------------------------------------------------------------------ state

    def initial_state(self, batch_size: int, dtype=None, device=None) -> MambaState:
        """Zero state for ``batch_size`` sequences (what a fresh sequence starts from)."""
        c = self.config
        p = self.A_log
        dtype = p.dtype if dtype is None else dtype
        device = p.device if device is None else device
        sdtype = torch.promote_types(dtype, torch.float32)
        return MambaState(
            torch.zeros(batch_size, c.d_inner, c.d_conv - 1, dtype=dtype, device=device),
            torch.zeros(batch_size, c.d_inner, c.d_state, dtype=sdtype, device=device),
        )

    def _check_state(self, state: MambaState, batch: int) -> None:
        c = self.config
        want_conv = (batch, c.d_inner, c.d_conv - 1)
        want_ssm = (batch, c.d_inner, c.d_state)
        if not isinstance(state, MambaState):
            raise TypeError(f"state must be a MambaState, got {type(state).__name__}")
        if tuple(state.conv.shape) != want_conv or tuple(state.ssm.shape) != want_ssm:
            raise ValueError(
                f"state does not fit this block and batch: conv {tuple(state.conv.shape)} "
                f"(want {want_conv}), ssm {tuple(state.ssm.shape)} (want {want_ssm}); "
                "start from block.initial_state(batch_size)"
            )

    # ---------------------------------------------------------------- forward

    def mix(
        self, x: torch.Tensor, z: torch.Tensor, state: MambaState | None = None
    ) -> tuple[torch.Tensor, MambaState]:
        """The shared middle of the block: conv, x_proj, dt_proj and the selective scan.

        Parameters
        ----------
        x, z : Tensor, shape (batch, length, d_inner)
            Conv-branch and gate-branch projections.
        state : MambaState, optional
            State after the previous tokens (zero when omitted).

        Returns
        -------
        y : Tensor, shape (batch, length, d_inner)
            Gated SSM output (before Out Proj).
        state : MambaState
            State after the last token.
        """
        c = self.config
        Bsz = x.shape[0]
        if state is None:
            state = self.initial_state(Bsz, dtype=x.dtype, device=x.device)
        self._check_state(state, Bsz)
        xt = torch.cat([state.conv.to(x.dtype), x.transpose(1, 2)], dim=-1)
        new_conv = xt[..., xt.shape[-1] - (c.d_conv - 1) :]
        u = F.silu(self.conv1d(xt))  # (B, d_inner, L)
        dt, Bm, Cm = torch.split(
            self.x_proj(u.transpose(1, 2)), [c.dt_rank, c.d_state, c.d_state], dim=-1
        )
        delta = F.linear(dt, self.dt_proj.weight).transpose(1, 2)
        A = -torch.exp(self.A_log.float() if self.A_log.dtype != torch.float64 else self.A_log)
        args = (u, delta, A, Bm.transpose(1, 2), Cm.transpose(1, 2), self.D, z.transpose(1, 2))
        kw = dict(
            delta_bias=self.dt_proj.bias,
            delta_softplus=True,
            initial_state=state.ssm,
            return_last_state=True,
        )
        scan = c.scan
        if scan == "auto":  # the Triton kernels where they run, else the CPU's fast scan
            kernels = scan_kernel.use_triton_scan(*args, self.dt_proj.bias, state.ssm)
            scan = "recurrent" if u.device.type == "cpu" and not kernels else "parallel"
        if scan == "parallel":
            y, h = selective_scan(*args, chunk_size=c.chunk_size, **kw)
        elif scan == "recurrent":
            y, h = selective_scan_recurrent(*args, **kw, workspace=self.scan_workspace)
        else:
            y, h = selective_scan_reference(*args, **kw)
        return y.transpose(1, 2), MambaState(new_conv, h)

    def forward(
        self,
        hidden_states: torch.Tensor,
        state: MambaState | None = None,
        return_state: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, MambaState]:
        """Mix a sequence.

        Parameters
        ----------
        hidden_states : Tensor, shape (batch, length, d_model)
        state : MambaState, optional
            Continue after earlier tokens (prefill in pieces, or one token at a time
            for generation: the state has constant size).
        return_state : bool
            Also return the state after the last token.

        Returns
        -------
        out : Tensor, shape (batch, length, d_model)
        state : MambaState
            Only with ``return_state=True``.
        """
        if hidden_states.dim() != 3 or hidden_states.shape[-1] != self.config.d_model:
            raise ValueError(
                f"hidden_states must have shape (batch, length, {self.config.d_model}), "
                f"got {tuple(hidden_states.shape)}"
            )
        x, z = self.project_in(hidden_states)
        y, new_state = self.mix(x, z, state)
        out = self.project_out(y)
        return (out, new_state) if return_state else out

    def step(self, token: torch.Tensor, state: MambaState) -> tuple[torch.Tensor, MambaState]:
        """One generation step: ``token (batch, d_model) -> (out (batch, d_model), state)``."""
        if token.dim() != 2:
            raise ValueError(f"token must have shape (batch, d_model), got {tuple(token.shape)}")
        out, state = self.forward(token[:, None], state, return_state=True)
        return out[:, 0], state
