"""FAME: functional attention with MoE-driven bidirectional neural CDEs.

Gao, Chen & Zhang, "FAME: Adaptive Functional Attention with Expert Routing for
Function-on-Function Regression", NeurIPS 2025 (arXiv 2510.00621; no public code, layer
details below are ours where the paper is not specific).

Pipeline for a sample with ``J`` input functions on the scaled domain ``[0, 1]``:

1. control paths ``X_j(t) = (t, x_j(t))`` (:mod:`sci_moe.functional.paths`);
2. a bidirectional neural CDE per function, ``dZ^f = f^{(j)}_f(Z^f) dX_j`` forward from
   0 and ``dZ^b = f^{(j)}_b(Z^b) dX_j(1 - s)`` on the reversed path, with vector fields
   mixed once per function (:class:`~sci_moe.functional.fame.MixtureVectorField`);
   ``Z_j(tau) = [Z^f(tau), Z^b(1 - tau)]`` on the ``Q`` quadrature nodes;
3. continuous attention over time per function and cross-attention across functions
   (:mod:`sci_moe.functional.fame.attention`) give ``G(tau)``;
4. an NCDE decoder driven by the natural cubic spline of ``(tau, G(tau))`` gives
   ``Y(t) = W u(t) + V G(t) + b`` at any query time (``V G(t)``, a linear skip from the
   spline of ``G``, is our addition: it shortens the gradient path to the encoder).

Solver: torchcde ``cdeint`` with torchdiffeq's fixed-step ``rk4``, step
``1 / ((Q - 1) substeps)``, cubic Hermite output interpolation between steps; gradients by
back-propagation through the solver (``adjoint=False``, default) or the adjoint method.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..paths import SPLINE_KINDS, SUMMARY_SIZE
from .attention import ContinuousAttention, FunctionCrossAttention
from .vector_field import MixtureVectorField

__all__ = ["FAME", "FAMEConfig", "import_torchcde"]


def import_torchcde():
    """Import torchcde or explain how to install it."""
    try:
        import torchcde
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "sci_moe.functional.fame needs torchcde; install the extra: "
            "pip install 'sci-moe[functional]'"
        ) from err
    return torchcde


@dataclass
class FAMEConfig:
    """Sizes and solver of a :class:`FAME` model.

    Parameters
    ----------
    num_functions : int
        Input functions per sample ``J``.
    num_experts : int
        Expert vector fields ``K`` per direction (1 = a plain neural CDE).
    hidden : int
        Encoder CDE state size per direction ``h``.
    expert_hidden : int
        Width of each expert MLP.
    attention_dim : int
        Width ``d`` of the attention layers and of the decoder's control path.
    decoder_hidden : int
        Decoder CDE state size.
    num_quadrature : int
        Nodes ``Q`` of the attention quadrature (equispaced on ``[0, 1]``).
    substeps : int
        rk4 steps per quadrature interval (step ``1 / ((Q - 1) substeps)``).
    spline : {"natural", "not-a-knot", "hermite"}
        Interpolant of the observations (:mod:`~sci_moe.functional.paths`).
    bidirectional : bool
        Run the backward CDE too (the paper's model); ``False`` keeps only the forward.
    cross_attention : bool
        Mix functions by cross-attention (``False``: plain mean over functions).
    adjoint : bool
        Adjoint gradients (memory ``O(1)`` in the steps) instead of back-propagation.
    time_scale : float
        Factor on the time channel of every control path (encoder and decoder): the paths
        are ``(time_scale * t, x(t))`` on ``t in [0, 1]``. With ``1`` (the model before
        issue 45) the time channel rises by only 1 over the whole domain while a
        normalised input channel varies by several units, so dynamics driven by time
        (decay, oscillation: rates of 10-20 per scaled domain in the benchmark tasks) need
        weights of that size, which Adam reaches only after thousands of steps, and the
        decoder, whose field ends in ``tanh``, cannot move its state by more than 1 per
        unit of time at all. The default 8 makes a weight of order 1 give a rate of order
        8 per domain (about one per interval of the default quadrature).
    """

    num_functions: int
    num_experts: int = 3
    hidden: int = 16
    expert_hidden: int = 32
    attention_dim: int = 16
    decoder_hidden: int = 16
    num_quadrature: int = 33
    substeps: int = 1
    spline: str = "natural"
    bidirectional: bool = True
    cross_attention: bool = True
    adjoint: bool = False
    time_scale: float = 8.0

    def __post_init__(self) -> None:
        for name in (
            "num_functions",
            "num_experts",
            "hidden",
            "expert_hidden",
            "attention_dim",
            "decoder_hidden",
            "substeps",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_quadrature < 3:
            raise ValueError(f"num_quadrature must be >= 3, got {self.num_quadrature}")
        if not (isinstance(self.time_scale, int | float) and self.time_scale > 0):
            raise ValueError(f"time_scale must be > 0, got {self.time_scale!r}")
        if self.spline not in SPLINE_KINDS:
            raise ValueError(f"spline must be one of {SPLINE_KINDS}, got {self.spline!r}")

    @property
    def step_size(self) -> float:
        """rk4 step on the scaled domain ``[0, 1]``."""
        return 1.0 / ((self.num_quadrature - 1) * self.substeps)

    @property
    def summary_size(self) -> int:
        """Router input size: the path summary plus a one-hot of the function index."""
        return SUMMARY_SIZE + self.num_functions


class FAME(nn.Module):
    """The FAME network on prepared control paths (see the module docstring).

    Use :class:`~sci_moe.functional.fame.FunctionOnFunctionRegressor` for raw
    ``(times, values)`` data; this module works on scaled, normalised tensors.

    Parameters
    ----------
    config : FAMEConfig
    """

    channels = 2  # (time, value)

    def __init__(self, config: FAMEConfig) -> None:
        super().__init__()
        self.config = c = config
        self.directions = 2 if c.bidirectional else 1
        self.field = MixtureVectorField(
            c.hidden,
            self.channels,
            c.num_experts,
            c.expert_hidden,
            c.summary_size,
            groups=self.directions,
        )
        self.initial = nn.ModuleList(
            [nn.Linear(self.channels, c.hidden) for _ in range(self.directions)]
        )
        self.attention = ContinuousAttention(self.directions * c.hidden, c.attention_dim)
        self.cross = FunctionCrossAttention(c.attention_dim) if c.cross_attention else None
        d, hd = c.attention_dim, c.decoder_hidden
        self.decoder_initial = nn.Linear(d, hd)
        self.decoder_field = nn.Sequential(
            nn.Linear(hd, hd), nn.Tanh(), nn.Linear(hd, hd * (d + 1)), nn.Tanh()
        )
        self.readout = nn.Linear(hd, 1)
        self.skip = nn.Linear(d, 1, bias=False)
        self.register_buffer(
            "quadrature", torch.linspace(0.0, 1.0, c.num_quadrature), persistent=False
        )

    def _scale(self, channels: int) -> torch.Tensor | None:
        """Per-channel factor of a vector field: ``time_scale`` on the time channel."""
        s = float(self.config.time_scale)
        if s == 1.0:
            return None
        scale = torch.ones(channels, dtype=self.quadrature.dtype, device=self.quadrature.device)
        scale[0] = s
        return scale

    def _solve(self, X, func, z0, t):
        torchcde = import_torchcde()
        c = self.config
        kw = dict(method="rk4", options=dict(step_size=c.step_size, interp="cubic"))
        if c.adjoint:
            kw["adjoint_params"] = tuple(p for p in self.parameters() if p.requires_grad)
        return torchcde.cdeint(X=X, func=func, z0=z0, t=t, adjoint=c.adjoint, **kw)

    def encode(
        self,
        coeffs: torch.Tensor,
        grid: torch.Tensor,
        summary: torch.Tensor,
        reverse_coeffs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Bidirectional MoE-CDE states on the quadrature nodes.

        Parameters
        ----------
        coeffs : Tensor, shape (B, J, L - 1, 8)
            Forward paths (:func:`~sci_moe.functional.build_paths`).
        grid : Tensor, shape (L,)
            Their knots, mirror-symmetric on ``[0, 1]``.
        summary : Tensor, shape (B, J, 4)
            Normalised path summaries (:func:`~sci_moe.functional.path_summary`).
        reverse_coeffs : Tensor, shape (B, J, L - 1, 8), optional
            Time-reversed paths; required when ``bidirectional``.

        Returns
        -------
        Tensor, shape (B, J, Q, directions * hidden)
        """
        torchcde = import_torchcde()
        B, J = coeffs.shape[:2]
        if J != self.config.num_functions:
            raise ValueError(f"got {J} input functions, the model has {self.config.num_functions}")
        onehot = torch.eye(J, dtype=summary.dtype, device=summary.device).expand(B, J, J)
        self.field.set_paths(torch.cat([summary, onehot], -1).reshape(B * J, -1))
        parts = [coeffs.reshape(B * J, *coeffs.shape[2:])]
        if self.directions == 2:
            if reverse_coeffs is None:
                raise ValueError("a bidirectional FAME needs reverse_coeffs")
            parts.append(reverse_coeffs.reshape(B * J, *coeffs.shape[2:]))
        X = torchcde.CubicSpline(torch.cat(parts), grid)
        x0 = X.evaluate(grid[0])  # (D B J, channels)
        z0 = torch.cat([lin(x0[g * B * J : (g + 1) * B * J]) for g, lin in enumerate(self.initial)])
        field = _Field(self.field.vector_field, self.field, self._scale(self.channels))
        z = self._solve(X, field, z0, self.quadrature.to(grid.dtype))  # (D B J, Q, h)
        z = z.view(self.directions, B, J, *z.shape[1:])
        states = [z[0]] + ([z[1].flip(-2)] if self.directions == 2 else [])
        return torch.cat(states, -1)

    def decode(self, g: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """NCDE decoder driven by ``(tau, G(tau))``, plus a linear skip from ``G(t)``.

        Parameters
        ----------
        g : Tensor, shape (B, Q, attention_dim)
        query : Tensor, shape (M,)
            Query times in ``[0, 1]`` (any order, repeats allowed).

        Returns
        -------
        Tensor, shape (B, M)
        """
        torchcde = import_torchcde()
        tau = self.quadrature.to(g.dtype)
        B, Q, d = g.shape
        path = torch.cat([tau.expand(B, Q).unsqueeze(-1), g], -1)
        X = torchcde.CubicSpline(torchcde.natural_cubic_coeffs(path, tau), tau)
        u0 = self.decoder_initial(g[:, 0])
        hd = self.config.decoder_hidden

        def field(t, u):
            return self.decoder_field(u).view(*u.shape[:-1], hd, d + 1)

        decoder = _Field(field, self.decoder_field, self._scale(d + 1))
        if query.numel() and (query.min() < 0 or query.max() > 1):
            raise ValueError("query times must lie in the scaled domain [0, 1]")
        times, inverse = torch.unique(torch.cat([query.new_zeros(1), query]), return_inverse=True)
        if times.numel() == 1:  # only t = 0 asked for
            times = torch.cat([times, times.new_ones(1)])
        u = self._solve(X, decoder, u0, times)  # (B, len(times), hd)
        g_at = X.evaluate(times)[..., 1:]  # G on its spline at the query times
        y = self.readout(u) + self.skip(g_at)
        return y[:, inverse[1:]].squeeze(-1)

    def forward(self, coeffs, grid, summary, query, reverse_coeffs=None) -> torch.Tensor:
        """Predict the (normalised) output function at the query times.

        Parameters
        ----------
        coeffs, grid, summary, reverse_coeffs
            See :meth:`encode`.
        query : Tensor, shape (M,)
            Scaled query times in ``[0, 1]``.

        Returns
        -------
        Tensor, shape (B, M)
        """
        z = self.encode(coeffs, grid, summary, reverse_coeffs)
        h = self.attention(z, self.quadrature.to(z.dtype))  # (B, J, Q, d)
        g = self.cross(h) if self.cross is not None else h.mean(1)
        return self.decode(g, query)

    @property
    def mixture_weights(self) -> torch.Tensor | None:
        """``pi`` of the last encoded batch, shape ``(B J, K)`` (None before any)."""
        m = self.field.mixture
        return None if m is None else m.weights


class _Field(nn.Module):
    """``fn(t, u)``, its last axis (the control channels) times ``scale`` if given."""

    def __init__(self, fn, module, scale: torch.Tensor | None = None):
        super().__init__()
        self.fn = fn
        self.module = module
        self.scale = scale

    def forward(self, t, u):
        f = self.fn(t, u)
        return f if self.scale is None else f * self.scale.to(f.dtype)
