"""Baselines for SPiCE, on the same batches and with the same backbone.

* :class:`ConformerBaseline` with ``conformers="lowest"`` — the PaiNN backbone on the
  lowest-energy conformer only (MARCEL's single-conformer 3D models);
* :class:`ConformerBaseline` with ``conformers="all"`` — the backbone on every
  conformer, then a DeepSets ensemble readout ``rho(mean_c psi(g_c))`` (MARCEL's
  ``Model4D`` with a DeepSets set encoder), or a plain mean (``set_readout="mean"``);
* :class:`GNN2D` — a 2D GINE network on the bond graph (no coordinates; MARCEL's 2D GIN);
* SPiCE without MoE — :class:`~sci_moe.molecules.model.SPiCE` with ``use_moe=False``.

:func:`build_model` builds any of them by name, with the sizes shared by all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .backbone import scatter_sum
from .ensemble import EnsembleEncoder, EnsembleEncoderConfig, scatter_mean
from .graph import EnsembleBatch, radius_graph_per_conformer
from .model import AtomEmbedding, EnsembleRegressor, SPiCE, SPiCEConfig

__all__ = [
    "GNN2D",
    "MODEL_NAMES",
    "BaselineConfig",
    "ConformerBaseline",
    "build_model",
]

#: Names accepted by :func:`build_model`.
MODEL_NAMES = ("spice", "spice_dense", "single_conformer", "deepsets", "mean_ensemble", "gnn2d")


@dataclass
class BaselineConfig:
    """Options of the baselines (the sizes mean the same as in :class:`SPiCEConfig`).

    Parameters
    ----------
    n_targets, atom_dim, bond_dim, hidden, num_layers, num_rbf : int
    cutoff_nm : float
    max_neighbors : int, optional
    num_atom_types : int
    conformers : {"lowest", "all"}
        :class:`ConformerBaseline` only: encode the lowest-energy conformer or all.
    set_readout : {"deepsets", "mean"}
        :class:`ConformerBaseline` with ``conformers="all"``: DeepSets
        ``rho(mean_c psi(g_c))`` or the mean of the conformer embeddings.
    atom_pool : {"sum", "mean"}
    """

    n_targets: int = 1
    atom_dim: int = 0
    bond_dim: int = 0
    hidden: int = 64
    num_layers: int = 3
    num_rbf: int = 20
    cutoff_nm: float = 0.5
    max_neighbors: int | None = None
    num_atom_types: int = 100
    conformers: str = "all"
    set_readout: str = "deepsets"
    atom_pool: str = "sum"

    def __post_init__(self) -> None:
        if self.n_targets < 1 or self.hidden < 1 or self.num_layers < 1:
            raise ValueError("n_targets, hidden and num_layers must be >= 1")
        if self.conformers not in ("lowest", "all"):
            raise ValueError(f"conformers must be 'lowest' or 'all', got {self.conformers!r}")
        if self.set_readout not in ("deepsets", "mean"):
            raise ValueError(f"set_readout must be 'deepsets' or 'mean', got {self.set_readout!r}")
        if self.atom_pool not in ("sum", "mean"):
            raise ValueError(f"atom_pool must be 'sum' or 'mean', got {self.atom_pool!r}")
        if not self.cutoff_nm > 0:
            raise ValueError(f"cutoff_nm must be > 0 (nm), got {self.cutoff_nm}")


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.SiLU(), nn.Linear(hidden, d_out))


class ConformerBaseline(EnsembleRegressor):
    """PaiNN backbone per conformer, then a set readout (see the module docstring).

    Parameters
    ----------
    config : BaselineConfig
    """

    def __init__(self, config: BaselineConfig) -> None:
        super().__init__(config.n_targets)
        c = self.config = config
        self.embedding = AtomEmbedding(c.hidden, c.num_atom_types, c.atom_dim)
        self.encoder = EnsembleEncoder(
            EnsembleEncoderConfig(
                hidden=c.hidden,
                num_layers=c.num_layers,
                num_rbf=c.num_rbf,
                cutoff=c.cutoff_nm,
                moe=None,
                cross_conformer=False,
            )
        )
        self.phi = _mlp(2 * c.hidden, c.hidden, c.hidden)
        self.psi = _mlp(c.hidden, c.hidden, c.hidden) if c.set_readout == "deepsets" else None
        self.head = _mlp(c.hidden, c.hidden, c.n_targets)

    def forward_norm(self, batch: EnsembleBatch):
        c = self.config
        if c.conformers == "lowest":
            batch = batch.lowest_energy()
        t = self.embedding(batch)
        h = t[batch.point_to_atom]
        pos = batch.pos.to(h.dtype)
        edges = radius_graph_per_conformer(pos, batch.point_to_conf, c.cutoff_nm, c.max_neighbors)
        h, v, _, _ = self.encoder(h, t, pos, edges, batch)
        x = torch.cat([h, torch.sqrt(v.square().sum(1) + 1e-8)], dim=-1)
        pool = scatter_sum if c.atom_pool == "sum" else scatter_mean
        g = pool(self.phi(x), batch.point_to_conf, batch.num_confs)
        if self.psi is not None:
            g = self.psi(g)
        gm = scatter_mean(g, batch.conf_to_mol, batch.num_mols)
        return self.head(gm), h.new_zeros(()), [], None


class GINELayer(nn.Module):
    """GINE (Hu et al. 2020): ``x_i <- LN(x_i + MLP((1 + eps) x_i + sum_j ReLU(x_j + W e_ij)))``."""

    def __init__(self, hidden: int, bond_dim: int) -> None:
        super().__init__()
        self.bond = nn.Linear(bond_dim, hidden) if bond_dim > 0 else None
        self.eps = nn.Parameter(torch.zeros(()))
        self.mlp = _mlp(hidden, hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x, bond_index, bond_attr):
        src, dst = bond_index
        msg = x[src]
        if self.bond is not None:
            msg = msg + self.bond(bond_attr.to(x.dtype))
        agg = scatter_sum(torch.relu(msg), dst, x.shape[0])
        return self.norm(x + self.mlp((1 + self.eps) * x + agg))


class GNN2D(EnsembleRegressor):
    """2D graph network (GINE layers on the bond graph, atom pooling, MLP head).

    Uses no coordinates: every conformer-dependent difference between molecules is
    invisible to it, which is what makes it the reference for "does 3D help".

    Parameters
    ----------
    config : BaselineConfig
        ``num_layers`` GINE layers of width ``hidden``.
    """

    def __init__(self, config: BaselineConfig) -> None:
        super().__init__(config.n_targets)
        c = self.config = config
        self.embedding = AtomEmbedding(c.hidden, c.num_atom_types, c.atom_dim)
        self.layers = nn.ModuleList(GINELayer(c.hidden, c.bond_dim) for _ in range(c.num_layers))
        self.head = _mlp(c.hidden, c.hidden, c.n_targets)

    def forward_norm(self, batch: EnsembleBatch):
        x = self.embedding(batch)
        for layer in self.layers:
            x = layer(x, batch.bond_index, batch.bond_attr)
        pool = scatter_sum if self.config.atom_pool == "sum" else scatter_mean
        g = pool(x, batch.atom_to_mol, batch.num_mols)
        return self.head(g), x.new_zeros(()), [], None


def build_model(name: str, **options) -> EnsembleRegressor:
    """Build SPiCE or a baseline by name with shared options.

    Parameters
    ----------
    name : str
        One of :data:`MODEL_NAMES`: ``"spice"`` (SPiCE), ``"spice_dense"`` (SPiCE without
        MoE), ``"single_conformer"`` (backbone on the lowest-energy conformer),
        ``"deepsets"`` / ``"mean_ensemble"`` (backbone on all conformers with a DeepSets
        / mean readout), ``"gnn2d"`` (2D GINE).
    **options
        Fields of :class:`~sci_moe.molecules.model.SPiCEConfig` (SPiCE variants) or
        :class:`BaselineConfig` (baselines); options the chosen model does not have are
        ignored so one dict can configure every model.

    Returns
    -------
    EnsembleRegressor
    """
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; choose one of {MODEL_NAMES}")
    if name in ("spice", "spice_dense"):
        fields = SPiCEConfig.__dataclass_fields__
        kw = {k: v for k, v in options.items() if k in fields}
        if name == "spice_dense":
            kw.update(use_moe=False, upcycle=False)
        return SPiCE(SPiCEConfig(**kw))
    fields = BaselineConfig.__dataclass_fields__
    kw = {k: v for k, v in options.items() if k in fields}
    if name == "gnn2d":
        return GNN2D(BaselineConfig(**kw))
    if name == "single_conformer":
        kw["conformers"] = "lowest"
    else:
        kw["conformers"] = "all"
        kw["set_readout"] = "deepsets" if name == "deepsets" else "mean"
    return ConformerBaseline(BaselineConfig(**kw))
