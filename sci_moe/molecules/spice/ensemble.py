"""Hierarchical ensemble encoder: per-conformer blocks + cross-conformer integration.

SPiCE (Zhu et al., NeurIPS 2025; DannieSYD/SPiCE ``models/spice.py``) interleaves, in
every layer ``l``:

1. an equivariant per-conformer block (:class:`~sci_moe.molecules.backbone.PaiNNBlock`);
2. the geometric MoE (:class:`~sci_moe.molecules.spice.geometric_moe.GeometricMoE`);
3. **cross-conformer integration**, which mixes *only invariant* features:

   * ensemble summary of each 2D atom, the mean over conformers
     ``m_i = (1/K) sum_c h_{c,i}``;
   * message passing on the 2D bond graph (GINE, Hu et al. 2020) updating the topology
     features ``t_i <- LN(t_i + MLP((1 + eps) m_i + sum_{j in N(i)} SiLU(m_j + W_b e_ij)))``;
   * attention back to each conformer: atom ``i`` of conformer ``c`` queries the atoms of
     the *same* conformer, ``a_{c,ij} = softmax_j(q(t_i) . k(h_{c,j}) / sqrt(d))`` and
     ``h_{c,i} <- LN(h_{c,i} + rho(sum_j a_{c,ij} v(h_{c,j})))``.

   Without the attention (``attention=False``, the ablation of the attention alone)
   each conformer-atom gets its own atom's topology features instead,
   ``h_{c,i} <- LN(h_{c,i} + rho(t_i))``: the conformer mean and the GINE step stay,
   and ``t`` still reaches the conformers (otherwise it would never reach the readout).

   Vectors are never averaged across conformers, so each conformer's vectors keep
   rotating with that conformer only; the mean over ``c`` and the attention (within a
   conformer) make the result invariant to the order of conformers and equivariant to
   the order of atoms.

The public code uses a dense ``(sum N)^2`` attention over the whole batch and no
``1/sqrt(d)``; here the attention is block-diagonal per conformer (padded to the largest
conformer) with the usual scaling and several heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..._util import scatter_mean, scatter_sum
from ..backbone import PaiNNBlock, edge_geometry
from .geometric_moe import GeometricMoE, GeometricMoEConfig, GeometricMoEInfo

__all__ = [
    "CrossConformerIntegration",
    "EnsembleEncoder",
    "EnsembleEncoderConfig",
    "conformer_packing",
    "pack_by_group",
]


def pack_by_group(group: torch.Tensor, num_groups: int) -> tuple[torch.Tensor, int]:
    """Rank of each row inside its group, for packing rows into ``(G, n_max, ...)``.

    Parameters
    ----------
    group : Tensor, shape (R,), int64
        Group id of each row (e.g. ``point_to_conf``); any order.
    num_groups : int

    Returns
    -------
    rank : Tensor, shape (R,), int64
        Position of the row inside its group (rows keep their relative order).
    n_max : int
        Size of the largest group.
    """
    if group.numel() == 0:
        return group.clone(), 0
    counts = torch.bincount(group, minlength=num_groups)
    order = torch.argsort(group, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(group)
    rank[order] = torch.arange(group.numel(), device=group.device) - starts[group[order]]
    return rank, int(counts.max())


def conformer_packing(point_to_conf: torch.Tensor, num_confs: int) -> tuple[torch.Tensor, int]:
    """Flat slot of every point in a ``(C, n_max)`` padded layout of the conformers.

    Parameters
    ----------
    point_to_conf : Tensor, shape (P,), int64
    num_confs : int

    Returns
    -------
    flat : Tensor, shape (P,), int64
        ``point_to_conf * n_max + rank`` with ``rank`` from :func:`pack_by_group`: rows
        ``flat`` of a ``(C * n_max, ...)`` buffer hold the points, one conformer per
        block of ``n_max`` rows, in their order.
    n_max : int
        Points of the largest conformer.
    """
    rank, n_max = pack_by_group(point_to_conf, num_confs)
    return point_to_conf * n_max + rank, n_max


class CrossConformerIntegration(nn.Module):
    """Mix invariant features across the conformers of each molecule (see module docs).

    Parameters
    ----------
    hidden : int
        Feature size ``F`` of ``h`` and ``t``.
    bond_dim : int
        Bond feature size ``Fb`` (0 for none).
    heads : int
        Attention heads (``hidden`` must be divisible by it when ``attention``).
    attention : bool
        The attention back to the conformers (``False``: ``h_{c,i} <- LN(h_{c,i} +
        rho(t_i))``, no ``q``/``k``/``v``/``norm_q``/``norm_k`` parameters; see the
        module docs).
    """

    def __init__(self, hidden: int, bond_dim: int, heads: int = 4, attention: bool = True) -> None:
        super().__init__()
        if not isinstance(attention, bool):
            raise ValueError(f"attention must be a bool, got {attention!r}")
        if attention and hidden % heads:
            raise ValueError(f"hidden={hidden} must be divisible by heads={heads}")
        self.hidden, self.heads, self.attention = hidden, heads, attention
        self.bond = nn.Linear(bond_dim, hidden) if bond_dim > 0 else None
        self.eps = nn.Parameter(torch.zeros(()))
        self.gine = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.norm_t = nn.LayerNorm(hidden)
        if attention:  # created in this order, so seeded models keep their initial weights
            self.norm_q = nn.LayerNorm(hidden)
            self.norm_k = nn.LayerNorm(hidden)
            self.q = nn.Linear(hidden, hidden, bias=False)
            self.k = nn.Linear(hidden, hidden, bias=False)
            self.v = nn.Linear(hidden, hidden, bias=False)
        self.rho = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.norm_h = nn.LayerNorm(hidden)

    def forward(
        self,
        h: torch.Tensor,
        t: torch.Tensor,
        point_to_atom: torch.Tensor,
        point_to_conf: torch.Tensor,
        num_confs: int,
        bond_index: torch.Tensor,
        bond_attr: torch.Tensor | None,
        packing: tuple[torch.Tensor, int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Update the per-conformer scalars ``h`` and the 2D atom features ``t``.

        Parameters
        ----------
        h : Tensor, shape (P, F)
            Invariant features of every conformer-atom.
        t : Tensor, shape (A, F)
            Topology (2D) features of every atom.
        point_to_atom, point_to_conf : Tensor, shape (P,), int64
        num_confs : int
        bond_index : Tensor, shape (2, B), int64
            2D bonds in both directions (row 0 source, row 1 target).
        bond_attr : Tensor, shape (B, Fb), optional
        packing : (Tensor of shape (P,), int), optional
            :func:`conformer_packing` of ``point_to_conf`` (computed when omitted; the
            encoder computes it once for all layers; unused without attention).

        Returns
        -------
        h : Tensor, shape (P, F)
        t : Tensor, shape (A, F)
        """
        A = t.shape[0]
        m = scatter_mean(h, point_to_atom, A)
        src, dst = bond_index
        msg = m.index_select(0, src)  # = m[src]; index_select is faster, forward and backward
        if self.bond is not None and bond_attr is not None:
            msg = msg + self.bond(bond_attr.to(msg.dtype))
        agg = scatter_sum(torch.nn.functional.silu(msg), dst, A)
        t = self.norm_t(t + self.gine((1 + self.eps) * m + agg))
        if not self.attention:  # each conformer-atom gets its own atom's t
            h = self.norm_h(h + self.rho(t.index_select(0, point_to_atom)))
            return h, t

        if packing is None:
            packing = conformer_packing(point_to_conf, num_confs)
        flat, n_max = packing
        H, d = self.heads, self.hidden // self.heads
        q = self.q(self.norm_q(t)).index_select(0, point_to_atom)
        k, v = self.k(self.norm_k(h)), self.v(h)

        def dense(x):  # (P, F) -> (C, H, n_max, d), zero rows where a conformer is shorter
            out = x.new_zeros(num_confs * n_max, self.hidden).index_copy(0, flat, x)
            return out.view(num_confs, n_max, H, d).transpose(1, 2)

        mask = torch.zeros(num_confs * n_max, dtype=torch.bool, device=h.device)
        mask = mask.index_fill_(0, flat, True).view(num_confs, 1, 1, n_max)
        # softmax_j(q_i . k_j / sqrt(d)) over the atoms j of the same conformer
        att = torch.nn.functional.scaled_dot_product_attention(
            dense(q), dense(k), dense(v), attn_mask=mask
        )
        out = att.transpose(1, 2).reshape(num_confs * n_max, self.hidden).index_select(0, flat)
        h = self.norm_h(h + self.rho(out.reshape(-1, self.hidden)))
        return h, t


@dataclass
class EnsembleEncoderConfig:
    """Options of an :class:`EnsembleEncoder`.

    Parameters
    ----------
    hidden : int
        Channels ``F`` (scalars, vectors, topology features).
    num_layers : int
        SPiCE blocks (backbone block + geometric MoE + cross-conformer integration).
    num_rbf : int
        Radial basis functions of the backbone.
    cutoff : float
        Radius of the per-conformer graphs, in the units of the batch positions.
    bond_dim : int
        Bond feature size ``Fb`` (0 for none).
    heads : int
        Attention heads of the cross-conformer attention.
    attention : bool
        The cross-conformer attention inside :class:`CrossConformerIntegration`
        (``False``: the conformer mean and the GINE step stay, and each conformer-atom
        gets its own atom's topology features instead of the attention; needs
        ``cross_conformer``).
    moe : GeometricMoEConfig or dict or None
        Geometric MoE after every backbone block; ``None`` for no MoE layer at all
        (a plain backbone).
    cross_conformer : bool
        Use :class:`CrossConformerIntegration` after every block (``False``: the
        conformers are encoded independently).
    directions : bool
        Give the blocks the bond directions (``False``: the unit vectors are zero, so
        the vector features stay zero and the model sees interatomic distances only: an
        invariant model with the same backbone and parameters, SPiCE's ablation of its
        equivariant features).
    """

    hidden: int = 64
    num_layers: int = 3
    num_rbf: int = 20
    cutoff: float = 5.0
    bond_dim: int = 0
    heads: int = 4
    moe: GeometricMoEConfig | dict | None = None
    cross_conformer: bool = True
    directions: bool = True
    attention: bool = True

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.num_layers < 1:
            raise ValueError("hidden and num_layers must be >= 1")
        if self.bond_dim < 0:
            raise ValueError(f"bond_dim must be >= 0, got {self.bond_dim}")
        if isinstance(self.moe, dict):
            self.moe = GeometricMoEConfig(**{"hidden": self.hidden, **self.moe})
        if self.moe is not None and self.moe.hidden != self.hidden:
            raise ValueError(
                f"moe.hidden={self.moe.hidden} must equal the encoder's hidden={self.hidden}"
            )
        if not isinstance(self.attention, bool):
            raise ValueError(f"attention must be a bool, got {self.attention!r}")
        if not self.attention and not self.cross_conformer:
            raise ValueError(
                "attention=False needs cross_conformer=True (there is no attention to remove)"
            )
        if self.cross_conformer and self.attention and self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} must be divisible by heads={self.heads}")


class EnsembleEncoder(nn.Module):
    """Stack of SPiCE blocks over a batch of conformer ensembles.

    Parameters
    ----------
    config : EnsembleEncoderConfig
    """

    def __init__(self, config: EnsembleEncoderConfig) -> None:
        super().__init__()
        c = self.config = config
        self.blocks = nn.ModuleList(
            PaiNNBlock(c.hidden, c.num_rbf, c.cutoff) for _ in range(c.num_layers)
        )
        self.moes = nn.ModuleList(
            GeometricMoE(c.moe) for _ in range(c.num_layers if c.moe is not None else 0)
        )
        self.cross = nn.ModuleList(
            CrossConformerIntegration(c.hidden, c.bond_dim, c.heads, c.attention)
            for _ in range(c.num_layers if c.cross_conformer else 0)
        )

    def forward(
        self,
        h: torch.Tensor,
        t: torch.Tensor,
        pos: torch.Tensor,
        edge_index: torch.Tensor,
        batch,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[GeometricMoEInfo]]:
        """Encode every conformer.

        Parameters
        ----------
        h : Tensor, shape (P, F)
            Initial invariant features of the conformer-atoms.
        t : Tensor, shape (A, F)
            Initial topology features of the 2D atoms.
        pos : Tensor, shape (P, 3)
        edge_index : Tensor, shape (2, E)
            Radius graph within each conformer.
        batch : EnsembleBatch
            Provides ``point_to_atom``, ``point_to_conf``, ``conf_to_mol``,
            ``bond_index`` and ``bond_attr``.

        Returns
        -------
        h : Tensor, shape (P, F)
        v : Tensor, shape (P, 3, F)
            Vector features; each conformer's rotate with that conformer.
        t : Tensor, shape (A, F)
        infos : list of GeometricMoEInfo
            One per MoE layer.
        """
        v = None  # zero vectors: the first block skips their terms (PaiNNBlock)
        geometry = edge_geometry(pos, edge_index)
        if not self.config.directions:  # distances only: vectors never leave zero
            geometry = (geometry[0], torch.zeros_like(geometry[1]))
        num_confs = int(batch.conf_to_mol.shape[0])
        bond_attr = getattr(batch, "bond_attr", None)
        packing = (
            conformer_packing(batch.point_to_conf, num_confs)
            if self.cross and self.config.attention
            else None
        )
        infos = []
        for i, block in enumerate(self.blocks):
            h, v = block(h, v, pos, edge_index, geometry)
            if self.moes:
                h, v, info = self.moes[i](h, v)
                infos.append(info)
            if self.cross:
                h, t = self.cross[i](
                    h,
                    t,
                    batch.point_to_atom,
                    batch.point_to_conf,
                    num_confs,
                    batch.bond_index,
                    bond_attr,
                    packing,
                )
        return h, v, t, infos
