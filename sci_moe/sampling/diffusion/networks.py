"""Energy and score networks ``E_theta(x, t)`` / ``s_theta(x, t)`` for energy-based diffusion.

An energy ("potential") network outputs one scalar per sample and its score is
:math:`s_\\theta = -\\nabla_x E_\\theta` (conservative, usable as a force field at small
``t``); a score network outputs the score directly (ScoreMD's high-``t`` experts).
Positions are ``(B, N, D)``: ``B`` samples of ``N`` particles in ``D`` dimensions, in
model units (molecules scaled by ``1/std``, see :mod:`sci_moe.sampling.diffusion.io`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from .sde import n_time_features, time_features

__all__ = [
    "EnergyNet",
    "InvariantEnergyNet",
    "InvariantMLPEnergy",
    "MLPEnergy",
    "MLPScore",
    "ScoreNet",
    "energy_and_score",
    "score_from_energy",
]


def energy_and_score(
    energy_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    t: torch.Tensor,
    create_graph: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Energy and score :math:`s = -\\nabla_x E` of an energy function.

    Parameters
    ----------
    energy_fn : callable ``(x (B, ...), t (B,)) -> (B,)``
    x : Tensor, shape (B, ...)
    t : Tensor, shape (B,)
    create_graph : bool
        Keep the graph of the gradient (needed when the score enters a training loss).

    Returns
    -------
    energy : Tensor, shape (B,)
    score : Tensor, shape (B, ...)
    """
    with torch.enable_grad():
        xg = x if x.requires_grad else x.detach().requires_grad_(True)
        e = energy_fn(xg, t)
        (g,) = torch.autograd.grad(e.sum(), xg, create_graph=create_graph)
    if not create_graph:
        e = e.detach()
    return e, -g


def score_from_energy(energy_fn, x, t, create_graph: bool = False) -> torch.Tensor:
    """Score :math:`-\\nabla_x E(x, t)`, shape of ``x`` (see :func:`energy_and_score`)."""
    return energy_and_score(energy_fn, x, t, create_graph)[1]


class EnergyNet(nn.Module):
    """Base class of conservative networks: ``forward(x, t) -> E (B,)``.

    Subclasses implement ``forward`` and ``spec`` (the constructor keyword arguments, for
    :func:`~sci_moe.sampling.diffusion.io.save_energy_model`).
    """

    conservative = True

    def energy(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Energy in units of kT, shape (B,)."""
        return self(x, t)

    def score(self, x: torch.Tensor, t: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
        """Score :math:`-\\nabla_x E`, shape of ``x``."""
        return score_from_energy(self, x, t, create_graph)

    def energy_and_score(self, x, t, create_graph: bool = False):
        """``(E (B,), s (B, ...))`` from one forward and one backward pass."""
        return energy_and_score(self, x, t, create_graph)

    def spec(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError


class ScoreNet(nn.Module):
    """Base class of score networks: ``forward(x, t) -> s`` with the shape of ``x``."""

    conservative = False

    def score(self, x: torch.Tensor, t: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
        """Score ``s_theta(x, t)``, shape of ``x``."""
        return self(x, t)

    def spec(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError


def _mlp(d_in: int, hidden: Sequence[int], d_out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(d_in, h), nn.SiLU()]
        d_in = h
    layers.append(nn.Linear(d_in, d_out))
    return nn.Sequential(*layers)


def _check_x(x: torch.Tensor, event_shape: tuple[int, ...], t: torch.Tensor) -> None:
    if tuple(x.shape[1:]) != event_shape:
        raise ValueError(f"positions must have shape (B, {event_shape}), got {tuple(x.shape)}")
    if t.shape != x.shape[:1]:
        raise ValueError(f"t must have shape ({x.shape[0]},), got {tuple(t.shape)}")


class _MLPBase(nn.Module):
    def __init__(
        self,
        event_shape: Sequence[int],
        hidden: Sequence[int],
        d_out: int | None,
        t_range: tuple[float, float],
    ) -> None:
        super().__init__()
        self.event_shape = tuple(int(s) for s in event_shape)
        if not self.event_shape or min(self.event_shape) < 1:
            raise ValueError(f"event_shape must be non-empty and positive, got {event_shape}")
        if not hidden:
            raise ValueError("hidden must list at least one layer width, e.g. (92, 92, 92)")
        self.hidden = tuple(int(h) for h in hidden)
        self.t_range = (float(t_range[0]), float(t_range[1]))
        d_x = math.prod(self.event_shape)
        self.net = _mlp(d_x + n_time_features(*self.t_range), self.hidden, d_out or d_x)

    def _features(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        _check_x(x, self.event_shape, t)
        tf = time_features(t.to(x.dtype), *self.t_range)
        return torch.cat([x.flatten(1), tf], dim=-1)

    def spec(self) -> dict:
        return {
            "event_shape": list(self.event_shape),
            "hidden": list(self.hidden),
            "t_range": list(self.t_range),
        }


class MLPEnergy(_MLPBase, EnergyNet):
    """MLP potential ``E(x, t)`` on flattened positions plus ScoreMD's time features.

    ScoreMD's toy ``small_potential`` is ``hidden=(92, 92, 92)`` with swish (SiLU).

    Parameters
    ----------
    event_shape : sequence of int
        Shape of one sample, e.g. ``(1, 2)`` for a 2-D toy system.
    hidden : sequence of int
        Hidden widths.
    t_range : (float, float)
        Time range of this network (adds range-relative time features when not [0, 1]).
    """

    def __init__(self, event_shape, hidden=(92, 92, 92), t_range=(0.0, 1.0)) -> None:
        super().__init__(event_shape, hidden, 1, t_range)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Energy, shape (B,), of positions ``x`` (B, \\*event_shape) at times ``t`` (B,)."""
        return self.net(self._features(x, t)).squeeze(-1)


class MLPScore(_MLPBase, ScoreNet):
    """MLP score model ``s(x, t)`` (not conservative), for high-``t`` experts.

    Parameters are those of :class:`MLPEnergy`.
    """

    def __init__(self, event_shape, hidden=(64, 64), t_range=(0.0, 1.0)) -> None:
        super().__init__(event_shape, hidden, None, t_range)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Score, shape of ``x``."""
        return self.net(self._features(x, t)).view_as(x)


class InvariantEnergyNet(EnergyNet):
    """SE(3)-invariant energy (or equivariant score) network for small molecules.

    PaiNN-style message passing (Schuett, Unke, Gastegger 2021) on the fully connected
    graph of the ``N`` particles, with scalar features ``h_i`` (F) and vector features
    ``v_i`` (F x 3). Messages use Gaussian radial features of the distances
    :math:`d_{ij}` and the unit vectors :math:`\\hat r_{ij}`:

    .. math::

        \\Delta h_i = \\sum_j \\phi_s(h_j) W_s(d_{ij}),\\quad
        \\Delta v_i = \\sum_j \\phi_v(h_j) W_v(d_{ij})\\, v_j
            + \\phi_r(h_j) W_r(d_{ij})\\, \\hat r_{ij}
            + \\phi_c(h_j) W_c(d_{ij})\\, (v_j \\times \\hat r_{ij})

    followed by PaiNN's update block (``<U v_i, V v_i>`` into the scalars). The cross
    product term makes pseudovectors, so the scalars see chirality: the energy is invariant
    under rotations and translations but **not** under reflections, as needed for chiral
    molecules (alanine's C-alpha). A pure distance model would give L- and D-alanine the
    same energy. Time enters as a learned embedding of :func:`time_features` added to the
    scalars in every layer. Energy = sum over particles of an MLP of ``h_i``; the score
    variant (``output="score"``) returns ``sum_f w_f(h_i) v_{i,f}``, an equivariant vector
    per particle.

    Parameters
    ----------
    n_particles : int
        ``N``.
    atom_types : sequence of int, optional
        Type id per particle (default: each particle its own type, as ScoreMD's one-hot atom
        index).
    hidden : int
        Feature width ``F``.
    n_layers : int
        Message-passing layers (>= 2 for the chirality term to reach the scalars).
    n_rbf : int
        Gaussian radial basis functions on ``[0, r_max]``.
    r_max : float
        Largest radial centre (model units).
    t_range : (float, float)
        Time range (for the time features).
    output : {"energy", "score"}
    """

    def __init__(
        self,
        n_particles: int,
        atom_types: Sequence[int] | None = None,
        hidden: int = 64,
        n_layers: int = 3,
        n_rbf: int = 16,
        r_max: float = 4.0,
        t_range: tuple[float, float] = (0.0, 1.0),
        output: str = "energy",
    ) -> None:
        super().__init__()
        if n_particles < 2:
            raise ValueError(f"n_particles must be >= 2, got {n_particles}")
        if output not in ("energy", "score"):
            raise ValueError(f"output must be 'energy' or 'score', got {output!r}")
        if n_layers < 1 or hidden < 1 or n_rbf < 1 or r_max <= 0:
            raise ValueError("n_layers, hidden, n_rbf must be >= 1 and r_max > 0")
        types = list(range(n_particles)) if atom_types is None else [int(a) for a in atom_types]
        if len(types) != n_particles or min(types) < 0:
            raise ValueError(f"atom_types must hold {n_particles} non-negative ids, got {types}")
        self.n_particles, self.hidden, self.n_layers = n_particles, hidden, n_layers
        self.n_rbf, self.r_max, self.output = n_rbf, float(r_max), output
        self.t_range = (float(t_range[0]), float(t_range[1]))
        self.atom_types = types
        self.conservative = output == "energy"
        self.event_shape = (n_particles, 3)
        self.register_buffer("types", torch.tensor(types, dtype=torch.long), persistent=False)
        pairs = [(j, i) for i in range(n_particles) for j in range(n_particles) if i != j]
        src, dst = zip(*pairs, strict=True)
        self.register_buffer("src", torch.tensor(src), persistent=False)
        self.register_buffer("dst", torch.tensor(dst), persistent=False)
        self.register_buffer("centres", torch.linspace(0, r_max, n_rbf), persistent=False)
        self.gamma = (n_rbf / r_max) ** 2 if n_rbf > 1 else 1.0
        F, nt = hidden, n_time_features(*self.t_range)
        self.embed = nn.Embedding(max(types) + 1, F)
        self.time_embed = nn.ModuleList([_mlp(nt, [F], F) for _ in range(n_layers)])
        self.phi = nn.ModuleList([_mlp(F, [F], 4 * F) for _ in range(n_layers)])
        self.filt = nn.ModuleList([nn.Linear(n_rbf, 4 * F) for _ in range(n_layers)])
        self.U = nn.ModuleList([nn.Linear(F, F, bias=False) for _ in range(n_layers)])
        self.V = nn.ModuleList([nn.Linear(F, F, bias=False) for _ in range(n_layers)])
        self.upd = nn.ModuleList([_mlp(2 * F, [F], 3 * F) for _ in range(n_layers)])
        self.head = _mlp(F, [F], 1 if output == "energy" else F)

    def spec(self) -> dict:
        return {
            "n_particles": self.n_particles,
            "atom_types": self.atom_types,
            "hidden": self.hidden,
            "n_layers": self.n_layers,
            "n_rbf": self.n_rbf,
            "r_max": self.r_max,
            "t_range": list(self.t_range),
            "output": self.output,
        }

    def _features(self, x: torch.Tensor, t: torch.Tensor):
        _check_x(x, self.event_shape, t)
        B, N, F = x.shape[0], self.n_particles, self.hidden
        r = x[:, self.src] - x[:, self.dst]  # (B, E, 3): from i=dst to j=src
        d = (r.pow(2).sum(-1) + 1e-8).sqrt()
        u = r / d.unsqueeze(-1)
        rbf = torch.exp(-self.gamma * (d.unsqueeze(-1) - self.centres.to(x.dtype)) ** 2)
        tf = time_features(t.to(x.dtype), *self.t_range)
        h = self.embed(self.types).to(x.dtype).expand(B, N, F)
        v = x.new_zeros(B, N, F, 3)
        for layer in range(self.n_layers):
            h = h + self.time_embed[layer](tf).unsqueeze(1)
            m = self.phi[layer](h)[:, self.src] * self.filt[layer](rbf)  # (B, E, 4F)
            ms, mv, mr, mc = m.split(F, dim=-1)
            vj = v[:, self.src]
            uu = u.unsqueeze(2)
            dv = mv.unsqueeze(-1) * vj + mr.unsqueeze(-1) * uu
            dv = dv + mc.unsqueeze(-1) * torch.linalg.cross(vj, uu.expand_as(vj), dim=-1)
            h = h.index_add(1, self.dst, ms)
            v = v.index_add(1, self.dst, dv)
            Uv = self.U[layer](v.transpose(-1, -2)).transpose(-1, -2)
            Vv = self.V[layer](v.transpose(-1, -2)).transpose(-1, -2)
            vnorm = (Vv.pow(2).sum(-1) + 1e-8).sqrt()
            a_vv, a_sv, a_ss = self.upd[layer](torch.cat([h, vnorm], -1)).split(F, dim=-1)
            h = h + a_ss + a_sv * (Uv * Vv).sum(-1)
            v = v + a_vv.unsqueeze(-1) * Uv
        return h, v

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Energy (B,) (``output="energy"``) or score (B, N, 3) (``output="score"``)."""
        h, v = self._features(x, t)
        w = self.head(h)  # (B, N, 1) or (B, N, F)
        if self.output == "energy":
            return w.sum(dim=(1, 2))
        return (w.unsqueeze(-1) * v).sum(2) / math.sqrt(self.hidden)

    def score(self, x, t, create_graph: bool = False):
        """Score: ``-grad E`` for ``output="energy"``, the network output otherwise."""
        if self.output == "score":
            return self(x, t)
        return score_from_energy(self, x, t, create_graph)

    def energy(self, x, t):
        """Energy (B,); only for ``output="energy"``."""
        if self.output != "energy":
            raise ValueError("this InvariantEnergyNet has output='score' and no energy")
        return self(x, t)


class InvariantMLPEnergy(EnergyNet):
    """SE(3)-invariant MLP energy on a complete set of internal coordinates.

    Features: all ``N(N-1)/2`` pairwise distances :math:`d_{ij}` and the signed volumes
    :math:`(x_j - x_i)\\cdot[(x_k - x_i)\times(x_l - x_i)]` of the quadruples ``quads``
    (default: every quadruple for ``N <= 8``, consecutive ones otherwise), plus
    :func:`time_features`. For points in general position the distances fix the shape up to
    a reflection and one signed volume fixes the handedness, so the features are complete
    SE(3) invariants and the MLP can represent any rotation- and translation-invariant,
    chirality-aware energy. Much cheaper than message passing for small fixed molecules
    (e.g. ScoreMD's 5-bead alanine dipeptide); the price is a fixed particle count.

    Parameters
    ----------
    n_particles : int
    hidden : sequence of int
    quads : sequence of (int, int, int, int), optional
    t_range : (float, float)
    """

    def __init__(
        self,
        n_particles: int,
        hidden: Sequence[int] = (128, 128, 128),
        quads: Sequence[Sequence[int]] | None = None,
        t_range: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        super().__init__()
        if n_particles < 4:
            raise ValueError(f"n_particles must be >= 4 for a chirality feature, got {n_particles}")
        if not hidden:
            raise ValueError("hidden must list at least one layer width")
        n = n_particles
        if quads is None:
            import itertools

            quads = (
                list(itertools.combinations(range(n), 4))
                if n <= 8
                else [(i, i + 1, i + 2, i + 3) for i in range(n - 3)]
            )
        quads = [tuple(int(i) for i in q) for q in quads]
        if any(len(q) != 4 or len(set(q)) != 4 or min(q) < 0 or max(q) >= n for q in quads):
            raise ValueError(f"quads must hold 4 distinct particle indices < {n}")
        self.n_particles, self.hidden, self.quads = n, tuple(int(h) for h in hidden), quads
        self.t_range = (float(t_range[0]), float(t_range[1]))
        self.event_shape = (n, 3)
        iu = torch.triu_indices(n, n, 1)
        self.register_buffer("pi", iu[0], persistent=False)
        self.register_buffer("pj", iu[1], persistent=False)
        self.register_buffer(
            "q", torch.tensor(quads, dtype=torch.long).view(-1, 4), persistent=False
        )
        d_in = iu.shape[1] + len(quads) + n_time_features(*self.t_range)
        self.net = _mlp(d_in, self.hidden, 1)

    def spec(self) -> dict:
        return {
            "n_particles": self.n_particles,
            "hidden": list(self.hidden),
            "quads": [list(q) for q in self.quads],
            "t_range": list(self.t_range),
        }

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Distances and signed volumes, shape (B, N(N-1)/2 + len(quads))."""
        d = ((x[:, self.pi] - x[:, self.pj]).pow(2).sum(-1) + 1e-8).sqrt()
        feats = [d]
        if len(self.quads):
            o = x[:, self.q[:, 0]]
            a, b, c = (x[:, self.q[:, k]] - o for k in (1, 2, 3))
            feats.append((a * torch.linalg.cross(b, c, dim=-1)).sum(-1))
        return torch.cat(feats, -1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Energy (B,) of positions (B, N, 3) at times (B,)."""
        _check_x(x, self.event_shape, t)
        tf = time_features(t.to(x.dtype), *self.t_range)
        return self.net(torch.cat([self.features(x), tf], -1)).squeeze(-1)
