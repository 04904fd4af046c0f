"""Baselines for SPiCE, on the same batches and with the same backbone.

Every 3D baseline runs the PaiNN backbone of SPiCE (same blocks, cutoff and readout MLP
``phi``) on the conformers of a batch in one call; they differ in which conformers they
see and how the conformer embeddings are pooled (:mod:`~sci_moe.molecules.spice.set_readouts`):

* ``single_conformer`` — the lowest-energy conformer only (MARCEL's 1-conformer 3D);
* ``random_conformer`` — one uniformly random conformer per molecule and step in
  training, the first stored conformer in evaluation (MARCEL's random-conformer
  augmentation);
* ``mean_ensemble`` / ``deepsets`` / ``attention_ensemble`` / ``boltzmann_ensemble`` —
  all conformers, pooled by a mean, DeepSets, self-attention + attention pooling, or the
  Boltzmann weights (MARCEL's ``Model4D`` set encoders);
* ``gnn2d_3d`` — "2D + 3D": the 2D GINE embedding of :class:`GNN2D` concatenated with the
  DeepSets-pooled 3D ensemble embedding;
* ``gnn2d`` — :class:`GNN2D`, a 2D GINE network on the bond graph (no coordinates);
* ``spice_dense`` — :class:`~sci_moe.molecules.spice.model.SPiCE` without MoE.

:data:`MODELS` is the registry (name -> description); :func:`build_model` builds any of
them by name with the sizes shared by all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..backbone import scatter_sum
from ..graph import EnsembleBatch, radius_graph_per_conformer
from .ensemble import EnsembleEncoder, EnsembleEncoderConfig, scatter_mean
from .model import AtomEmbedding, EnsembleRegressor, SPiCE, SPiCEConfig, _EncoderSizes
from .set_readouts import SET_READOUTS, SetReadout

__all__ = [
    "GNN2D",
    "MODELS",
    "MODEL_NAMES",
    "BaselineConfig",
    "ConformerBaseline",
    "build_model",
]

#: Registry of :func:`build_model`: name -> one-line description.
MODELS = {
    "spice": "SPiCE: backbone + geometric MoE + cross-conformer integration",
    "spice_dense": "SPiCE without MoE (one dense expert per path)",
    "single_conformer": "backbone on the lowest-energy conformer",
    "random_conformer": "backbone on one random conformer (first one in evaluation)",
    "mean_ensemble": "backbone on all conformers, mean of the conformer embeddings",
    "deepsets": "backbone on all conformers, DeepSets readout",
    "attention_ensemble": "backbone on all conformers, self-attention + attention pooling",
    "boltzmann_ensemble": "backbone on all conformers, Boltzmann-weighted readout",
    "gnn2d_3d": "2D GINE embedding concatenated with the DeepSets 3D ensemble embedding",
    "gnn2d": "2D GINE network on the bond graph (no coordinates)",
}
#: Names accepted by :func:`build_model`.
MODEL_NAMES = tuple(MODELS)
_CONFORMERS = ("lowest", "random", "all")


@dataclass
class BaselineConfig(_EncoderSizes):
    """Options of the baselines (the sizes mean the same as in :class:`SPiCEConfig`).

    Parameters
    ----------
    n_targets, atom_dim, bond_dim, hidden, num_layers, num_rbf : int
        As in :class:`SPiCEConfig` (default widths: the shipped featuriser's).
    cutoff_nm : float
    max_neighbors : int, optional
    num_atom_types : int
    conformers : {"lowest", "random", "all"}
        :class:`ConformerBaseline` only: encode the lowest-energy conformer, one random
        conformer (training; the first in evaluation) or all.
    set_readout : {"deepsets", "mean", "attention", "boltzmann"}
        :class:`ConformerBaseline` with ``conformers="all"``: see
        :class:`~sci_moe.molecules.spice.set_readouts.SetReadout`.
    with_2d : bool
        :class:`ConformerBaseline` only: concatenate a :class:`GNN2D` embedding of the
        bond graph to the ensemble embedding before the head ("2D + 3D").
    heads : int
        Attention heads of the ``"attention"`` readout.
    atom_pool : {"sum", "mean"}
    """

    conformers: str = "all"
    set_readout: str = "deepsets"
    with_2d: bool = False
    heads: int = 4
    atom_pool: str = "sum"

    def __post_init__(self) -> None:
        if self.n_targets < 1 or self.hidden < 1 or self.num_layers < 1:
            raise ValueError("n_targets, hidden and num_layers must be >= 1")
        if self.conformers not in _CONFORMERS:
            raise ValueError(f"conformers must be one of {_CONFORMERS}, got {self.conformers!r}")
        if self.set_readout not in SET_READOUTS:
            raise ValueError(f"set_readout must be one of {SET_READOUTS}, got {self.set_readout!r}")
        if self.set_readout == "attention" and self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} must be divisible by heads={self.heads}")
        if self.atom_pool not in ("sum", "mean"):
            raise ValueError(f"atom_pool must be 'sum' or 'mean', got {self.atom_pool!r}")
        if not self.cutoff_nm > 0:
            raise ValueError(f"cutoff_nm must be > 0 (nm), got {self.cutoff_nm}")


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.SiLU(), nn.Linear(hidden, d_out))


def pick_conformer(batch: EnsembleBatch, random: bool) -> EnsembleBatch:
    """One conformer per molecule: uniformly random (the global CPU generator of torch, also
    for a batch on a GPU) or the first.

    Parameters
    ----------
    batch : EnsembleBatch
    random : bool
        ``True``: a random conformer of each molecule; ``False``: its first conformer.

    Returns
    -------
    EnsembleBatch
        With ``num_confs == num_mols``.
    """
    C, M = batch.num_confs, batch.num_mols
    dev = batch.conf_to_mol.device
    # drawn on the CPU and moved: the same conformers on every device (and the CPU
    # generator is the one the engine checkpoints)
    key = torch.rand(C).to(dev) if random else -torch.arange(C, device=dev, dtype=torch.float)
    best = key.new_full((M,), float("-inf")).scatter_reduce(0, batch.conf_to_mol, key, "amax")
    keep = key == best[batch.conf_to_mol]
    return batch.select_conformers(keep)


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
        kind = c.set_readout if c.conformers == "all" else "mean"
        self.set_readout = SetReadout(kind, c.hidden, c.heads)
        self.gnn2d = GNN2D(c, head=False) if c.with_2d else None
        width = 2 * c.hidden if c.with_2d else c.hidden
        self.head = _mlp(width, c.hidden, c.n_targets)

    def forward_norm(self, batch: EnsembleBatch):
        c = self.config
        full = batch
        if c.conformers == "lowest":
            batch = batch.lowest_energy()
        elif c.conformers == "random":
            batch = pick_conformer(batch, random=self.training)
        t = self.embedding(batch)
        h = t.index_select(0, batch.point_to_atom)  # = t[point_to_atom], faster backward
        pos = batch.pos.to(h.dtype)
        edges = radius_graph_per_conformer(pos, batch.point_to_conf, c.cutoff_nm, c.max_neighbors)
        h, v, _, _ = self.encoder(h, t, pos, edges, batch)
        x = torch.cat([h, torch.sqrt(v.square().sum(1) + 1e-8)], dim=-1)
        pool = scatter_sum if c.atom_pool == "sum" else scatter_mean
        g = pool(self.phi(x), batch.point_to_conf, batch.num_confs)
        gm = self.set_readout(g, batch.conf_to_mol, batch.num_mols, batch.conf_weight)
        if self.gnn2d is not None:
            gm = torch.cat([gm, self.gnn2d.embed(full)], dim=-1)
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
        msg = x.index_select(0, src)  # = x[src]; index_select is faster, forward and backward
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
    head : bool
        Build the output MLP (``False`` for the 2D branch of ``gnn2d_3d``, which only
        uses :meth:`embed`).
    """

    def __init__(self, config: BaselineConfig, head: bool = True) -> None:
        super().__init__(config.n_targets)
        c = self.config = config
        self.embedding = AtomEmbedding(c.hidden, c.num_atom_types, c.atom_dim)
        self.layers = nn.ModuleList(GINELayer(c.hidden, c.bond_dim) for _ in range(c.num_layers))
        self.head = _mlp(c.hidden, c.hidden, c.n_targets) if head else None

    def embed(self, batch: EnsembleBatch) -> torch.Tensor:
        """Molecule embeddings of shape ``(M, hidden)`` (pooled GINE atom features)."""
        x = self.embedding(batch)
        for layer in self.layers:
            x = layer(x, batch.bond_index, batch.bond_attr)
        pool = scatter_sum if self.config.atom_pool == "sum" else scatter_mean
        return pool(x, batch.atom_to_mol, batch.num_mols)

    def forward_norm(self, batch: EnsembleBatch):
        g = self.embed(batch)
        return self.head(g), g.new_zeros(()), [], None


def build_model(name: str, **options) -> EnsembleRegressor:
    """Build SPiCE or a baseline by name with shared options.

    Parameters
    ----------
    name : str
        One of :data:`MODEL_NAMES` (described in :data:`MODELS` and the module
        docstring).
    **options
        Fields of :class:`~sci_moe.molecules.spice.model.SPiCEConfig` (SPiCE variants) or
        :class:`BaselineConfig` (baselines); options the chosen model does not have are
        ignored so one dict can configure every model.

    Returns
    -------
    EnsembleRegressor
    """
    if name not in MODELS:
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
    kw["conformers"], kw["with_2d"] = "all", False
    if name == "single_conformer":
        kw["conformers"] = "lowest"
    elif name == "random_conformer":
        kw["conformers"] = "random"
    elif name == "gnn2d_3d":
        kw.update(set_readout="deepsets", with_2d=True)
    else:
        kw["set_readout"] = {
            "mean_ensemble": "mean",
            "deepsets": "deepsets",
            "attention_ensemble": "attention",
            "boltzmann_ensemble": "boltzmann",
        }[name]
    return ConformerBaseline(BaselineConfig(**kw))
