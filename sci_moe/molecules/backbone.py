"""Equivariant per-conformer backbone: PaiNN message passing with l=0 and l=1 features.

Every conformer-atom ("point") carries invariant scalars ``h`` of shape ``(P, F)`` (irreps
``Fx0e``) and Cartesian vectors ``V`` of shape ``(P, 3, F)`` (irreps ``Fx1o``; in e3nn's
channel-major layout ``V.transpose(1, 2).reshape(P, 3 F)``). Messages only run along the
edges of a radius graph built *per conformer*, so each conformer sees only its own
geometry: an independent rotation, reflection or translation of one conformer rotates
its vectors with it and leaves its scalars unchanged.

PaiNN: K. T. Schütt, O. T. Unke, M. Gastegger, "Equivariant message passing for the
prediction of tensorial properties and molecular spectra", ICML 2021 (Eqs. 7-10). The
normalisation after each block (LayerNorm on scalars, equivariant LayerNorm on vectors)
follows the SPiCE code (DannieSYD/SPiCE, ``models/spice.py``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._util import scatter_sum  # re-exported: public name of this module

__all__ = [
    "BesselBasis",
    "EquivariantLayerNorm",
    "PaiNNBlock",
    "PaiNNMessage",
    "PaiNNUpdate",
    "cosine_cutoff",
    "edge_geometry",
    "scatter_sum",
    "vectors_to_irreps",
]


def vectors_to_irreps(v: torch.Tensor) -> torch.Tensor:
    """Cartesian ``(P, 3, F)`` vectors -> e3nn ``Fx1o`` layout ``(P, 3 F)`` (channel-major)."""
    return v.transpose(1, 2).reshape(v.shape[0], -1)


def cosine_cutoff(r: torch.Tensor, cutoff: float) -> torch.Tensor:
    """Behler's cosine cutoff ``0.5 (cos(pi r / r_c) + 1)`` for ``r < r_c``, else 0."""
    f = 0.5 * (torch.cos(math.pi * r / cutoff) + 1.0)
    return f * (r < cutoff).to(r.dtype)


class BesselBasis(nn.Module):
    """Radial basis ``sin(n pi r / r_c) / r`` (DimeNet/PaiNN), ``n = 1..num_rbf``.

    Parameters
    ----------
    num_rbf : int
    cutoff : float
        In the units of the positions.
    """

    def __init__(self, num_rbf: int, cutoff: float) -> None:
        super().__init__()
        if num_rbf < 1:
            raise ValueError(f"num_rbf must be >= 1, got {num_rbf}")
        if not cutoff > 0:
            raise ValueError(f"cutoff must be > 0, got {cutoff}")
        self.cutoff = float(cutoff)
        self.register_buffer("freq", torch.arange(1, num_rbf + 1, dtype=torch.float32) * math.pi)

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        """``r`` of shape ``(E,)`` -> ``(E, num_rbf)``."""
        x = r.unsqueeze(-1) / self.cutoff
        return torch.sin(self.freq.to(r.dtype) * x) / r.clamp_min(1e-9).unsqueeze(-1)


def edge_geometry(pos: torch.Tensor, edge_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Distances and unit vectors of the edges ``j -> i``.

    Parameters
    ----------
    pos : Tensor, shape (P, 3)
    edge_index : Tensor, shape (2, E)
        PyG flow: row 0 the source ``j``, row 1 the target ``i``.

    Returns
    -------
    dist : Tensor, shape (E,)
    unit : Tensor, shape (E, 3)
        ``(pos_j - pos_i) / |pos_j - pos_i|`` (a polar vector, ``1o``).
    """
    src, dst = edge_index
    vec = pos.index_select(0, src) - pos.index_select(0, dst)
    dist = vec.norm(dim=-1)
    return dist, vec / dist.clamp_min(1e-9).unsqueeze(-1)


class EquivariantLayerNorm(nn.Module):
    """Layer norm for vector channels ``V`` of shape ``(P, 3, F)`` (SPiCE's ELN).

    .. math::

        \\mathrm{ELN}(V)_{:,f} = \\gamma_f\\,\\frac{V_{:,f} - \\bar V}
        {\\sqrt{\\tfrac1F\\sum_{f'}\\lVert V_{:,f'} - \\bar V\\rVert^2 + \\epsilon}},
        \\qquad \\bar V = \\tfrac1F\\sum_f V_{:,f}

    Subtracting the channel mean and dividing by an invariant norm commute with any
    ``Q`` in O(3), so the map is equivariant.
    """

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        v = v - v.mean(dim=-1, keepdim=True)
        norm = v.square().sum(1).mean(-1, keepdim=True).add(self.eps).sqrt()
        return v / norm.unsqueeze(1) * self.weight


class PaiNNMessage(nn.Module):
    """PaiNN message block (Schütt et al. 2021, Eq. 7-8).

    .. math::

        (\\phi_s, \\phi_{vv}, \\phi_{vs})_{ij} = \\phi(h_j) \\odot
        W(\\lVert r_{ij}\\rVert)\\, f_c(\\lVert r_{ij}\\rVert), \\quad
        \\Delta h_i = \\sum_j \\phi_{s,ij}, \\quad
        \\Delta V_i = \\sum_j \\phi_{vv,ij} \\odot V_j + \\phi_{vs,ij}\\, \\hat r_{ij}
    """

    def __init__(self, hidden: int, num_rbf: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.phi = nn.Sequential(
            nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 3 * hidden)
        )
        self.filter = nn.Linear(num_rbf, 3 * hidden)

    def forward(
        self,
        h: torch.Tensor,
        v: torch.Tensor | None,
        edge_index: torch.Tensor,
        rbf: torch.Tensor,
        fcut: torch.Tensor,
        unit: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Messages ``(dh, dV)`` summed at the target atoms.

        Parameters
        ----------
        h : Tensor, shape (P, F)
        v : Tensor, shape (P, 3, F), or None
            Vector features; ``None`` for zero vectors (the first block): the
            ``phi_vv V_j`` term is then skipped (it is exactly zero), with no scan of
            ``V`` to find out.
        edge_index : Tensor, shape (2, E)
            Source row 0 (``j``), target row 1 (``i``).
        rbf : Tensor, shape (E, num_rbf)
        fcut : Tensor, shape (E,)
        unit : Tensor, shape (E, 3)
            Unit vectors ``r_ij``.

        Returns
        -------
        dh : Tensor, shape (P, F)
        dv : Tensor, shape (P, 3, F)
        """
        src, dst = edge_index
        P = h.shape[0]
        # index_select, not h[src]: the same rows, and on a CPU several times faster forward
        # and backward (index_add_ instead of an accumulating index_put_)
        x = self.phi(h).index_select(0, src) * (self.filter(rbf) * fcut.unsqueeze(-1))
        xs, xvv, xvs = x.split(self.hidden, dim=-1)
        # dV_i = sum_j xvv_ij V_j + xvs_ij r_ij, one Cartesian component at a time: (E, F)
        # products instead of (E, 1, F) x (E, 3, F) broadcasts, whose 3 x F inner loops
        # are slow; the same products and sums.
        dv = []
        for k in range(3):
            d = xvs * unit[:, k : k + 1]
            if v is not None:
                d = xvv * v[:, k].index_select(0, src) + d
            dv.append(scatter_sum(d, dst, P))
        return scatter_sum(xs, dst, P), torch.stack(dv, dim=1)


class PaiNNUpdate(nn.Module):
    """PaiNN update block (Schütt et al. 2021, Eq. 9-10).

    .. math::

        a = \\mathrm{MLP}([h, \\lVert V W_V \\rVert]), \\quad
        \\Delta V = a_{vv} \\odot V W_U, \\quad
        \\Delta h = a_{ss} + a_{sv} \\langle V W_U, V W_V\\rangle
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.lin_u = nn.Linear(hidden, hidden, bias=False)
        self.lin_v = nn.Linear(hidden, hidden, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(2 * hidden, hidden), nn.SiLU(), nn.Linear(hidden, 3 * hidden)
        )

    def forward(self, h, v):
        u, w = self.lin_u(v), self.lin_v(v)
        w_norm = torch.sqrt(w.square().sum(1) + 1e-8)
        a = self.mlp(torch.cat([h, w_norm], dim=-1))
        avv, asv, ass = a.split(self.hidden, dim=-1)
        return ass + asv * (u * w).sum(1), avv.unsqueeze(1) * u


class PaiNNBlock(nn.Module):
    """One equivariant interaction: message, update, then (optionally) normalisation.

    Parameters
    ----------
    hidden : int
        Channels ``F`` of the scalars and of the vectors.
    num_rbf : int
        Radial basis functions.
    cutoff : float
        Radius of the per-conformer graph (units of the positions).
    norm : bool
        ``h <- LN(h + dh)``, ``V <- ELN(V + dV)`` after the block (SPiCE); plain
        residuals otherwise (PaiNN).

    Examples
    --------
    >>> block = PaiNNBlock(hidden=16, num_rbf=8, cutoff=5.0)
    >>> pos = torch.randn(5, 3)
    >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    >>> h, v = block(torch.randn(5, 16), torch.zeros(5, 3, 16), pos, edge_index)
    >>> h.shape, v.shape
    (torch.Size([5, 16]), torch.Size([5, 3, 16]))
    """

    def __init__(self, hidden: int, num_rbf: int = 20, cutoff: float = 5.0, norm: bool = True):
        super().__init__()
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        self.rbf = BesselBasis(num_rbf, cutoff)
        self.cutoff = float(cutoff)
        self.message = PaiNNMessage(hidden, num_rbf)
        self.update = PaiNNUpdate(hidden)
        self.norm_h = nn.LayerNorm(hidden) if norm else None
        self.norm_v = EquivariantLayerNorm(hidden) if norm else None

    def forward(
        self,
        h: torch.Tensor,
        v: torch.Tensor | None,
        pos: torch.Tensor,
        edge_index: torch.Tensor,
        geometry: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Apply the block.

        Parameters
        ----------
        h : Tensor, shape (P, F)
            Invariant features of every conformer-atom.
        v : Tensor, shape (P, 3, F), or None
            Vector features; ``None`` for zero vectors (the first block: the same
            result as zeros, without their gather and products).
        pos : Tensor, shape (P, 3)
            Positions (the units of ``cutoff``).
        edge_index : Tensor, shape (2, E)
            Radius graph within each conformer (source row 0, target row 1).
        geometry : (dist, unit), optional
            Precomputed :func:`edge_geometry` (shared by all blocks of a model).

        Returns
        -------
        h : Tensor, shape (P, F)
        v : Tensor, shape (P, 3, F)
        """
        dist, unit = edge_geometry(pos, edge_index) if geometry is None else geometry
        rbf = self.rbf(dist)
        fcut = cosine_cutoff(dist, self.cutoff)
        dh, dv = self.message(h, v, edge_index, rbf, fcut, unit)
        h, v = h + dh, dv if v is None else v + dv
        dh, dv = self.update(h, v)
        h, v = h + dh, v + dv
        if self.norm_h is not None:
            h, v = self.norm_h(h), self.norm_v(v)
        return h, v
