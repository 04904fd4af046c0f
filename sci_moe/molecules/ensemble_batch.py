"""Batches of conformer ensembles with different numbers of atoms and conformers.

A batch concatenates molecules and keeps index vectors between the levels (point ->
atom, point -> conformer, conformer -> molecule, atom -> molecule). A *point* is one atom
in one conformer, so a molecule with ``N`` atoms and ``C`` conformers has ``N * C``
points, ordered conformer-major (all atoms of conformer 0, then conformer 1, ...).
Positions in **nm**, energies in **kJ/mol**.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import torch
from torch import Tensor

from .._util import scatter_sum
from .ensemble_graph import EnsembleGraph
from .radius_graph import radius_graph_per_conformer

__all__ = ["EnsembleBatch", "EnsembleDataset", "collate_ensembles"]


@dataclass
class EnsembleBatch:
    """A batch of conformer ensembles (contract D of the project).

    ``M`` molecules, ``A`` atoms, ``B`` directed bonds, ``C`` conformers, ``P`` points
    (atom-in-conformer). Points are ordered molecule by molecule, conformer-major, so the
    points of each conformer are contiguous.

    Attributes
    ----------
    z : Tensor, shape (A,), long
        Atomic numbers.
    atom_attr : Tensor, shape (A, Fa), float
    bond_index : Tensor, shape (2, B), long
        Bonds in both directions, batch-global atom indices.
    bond_attr : Tensor, shape (B, Fb), float
    atom_to_mol : Tensor, shape (A,), long
    pos : Tensor, shape (P, 3), float
        Positions in **nm**.
    point_to_atom : Tensor, shape (P,), long
        Index of the 2-D atom of each point (into ``z``).
    point_to_conf : Tensor, shape (P,), long
    conf_to_mol : Tensor, shape (C,), long
    conf_weight : Tensor, shape (C,), float
        Boltzmann weights, summing to 1 over the conformers of each molecule.
    conf_energy : Tensor, shape (C,), float
        kJ/mol relative to each molecule's lowest conformer.
    y : Tensor, shape (M, T), float
        Targets (NaN where missing).
    conf_y : Tensor, shape (C, T), float, optional
        Per-conformer target values when every molecule has them.
    num_mols : int
    names, smiles : list of str
    """

    z: Tensor
    atom_attr: Tensor
    bond_index: Tensor
    bond_attr: Tensor
    atom_to_mol: Tensor
    pos: Tensor
    point_to_atom: Tensor
    point_to_conf: Tensor
    conf_to_mol: Tensor
    conf_weight: Tensor
    conf_energy: Tensor
    y: Tensor
    num_mols: int
    conf_y: Tensor | None = None
    names: list[str] = field(default_factory=list)
    smiles: list[str] = field(default_factory=list)

    @property
    def num_atoms(self) -> int:
        return int(self.z.numel())

    @property
    def num_confs(self) -> int:
        return int(self.conf_to_mol.numel())

    @property
    def num_points(self) -> int:
        return int(self.point_to_atom.numel())

    @property
    def point_to_mol(self) -> Tensor:
        """Molecule of each point, shape (P,)."""
        return self.conf_to_mol[self.point_to_conf]

    @property
    def confs_per_mol(self) -> Tensor:
        """Number of conformers of each molecule, shape (M,)."""
        return torch.bincount(self.conf_to_mol, minlength=self.num_mols)

    @property
    def atoms_per_mol(self) -> Tensor:
        """Number of atoms of each molecule, shape (M,)."""
        return torch.bincount(self.atom_to_mol, minlength=self.num_mols)

    def check_finite(self) -> None:
        """Raise a ``ValueError`` naming the molecule and conformer of any NaN/Inf position.

        One ``isfinite`` reduction over ``pos`` (the slow path runs only on failure).
        """
        bad_pt = ~torch.isfinite(self.pos).all(1)
        if bool(bad_pt.any()):
            confs = torch.unique(self.point_to_conf[bad_pt]).tolist()
            first = torch.zeros(self.num_mols, dtype=torch.long)
            counts = self.confs_per_mol.cpu()
            first[1:] = torch.cumsum(counts, 0)[:-1]
            c2m = self.conf_to_mol.cpu()
            where = []
            for c in confs[:10]:
                m = int(c2m[c])
                name = self.names[m] if m < len(self.names) else ""
                where.append(f"molecule {m} {name!r} conformer {c - int(first[m])}")
            raise ValueError(
                f"NaN/Inf coordinates in {len(confs)} conformer(s): {'; '.join(where)}; "
                "fix or drop those conformers before predicting"
            )

    def radius_graph(self, cutoff: float, max_neighbors: int | None = None) -> Tensor:
        """Radius graph of every conformer (see :func:`radius_graph_per_conformer`), (2, E)."""
        return radius_graph_per_conformer(self.pos, self.point_to_conf, cutoff, max_neighbors)

    def to(self, device=None, dtype: torch.dtype | None = None) -> EnsembleBatch:
        """Copy to a device and/or floating dtype (integer tensors keep their dtype)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Tensor):
                v = v.to(device=device, dtype=dtype if (dtype and v.is_floating_point()) else None)
            out[f.name] = v
        return EnsembleBatch(**out)

    def select_conformers(self, keep: Tensor) -> EnsembleBatch:
        """Keep a subset of conformers (every molecule must keep at least one).

        Parameters
        ----------
        keep : Tensor, shape (C,), bool
            Conformers to keep; Boltzmann weights are renormalised per molecule and
            energies re-referenced to the lowest kept conformer.
        """
        keep = keep.to(torch.bool).reshape(-1)
        if keep.numel() != self.num_confs:
            raise ValueError(f"keep must have one entry per conformer ({self.num_confs})")
        kept_per_mol = scatter_sum(keep.long(), self.conf_to_mol, self.num_mols)
        if (kept_per_mol == 0).any():
            raise ValueError("select_conformers must keep at least one conformer per molecule")
        new_index = torch.cumsum(keep.long(), 0) - 1
        pkeep = keep[self.point_to_conf]
        conf_to_mol = self.conf_to_mol[keep]
        w = self.conf_weight[keep]
        wsum = scatter_sum(w, conf_to_mol, self.num_mols)
        w = w / wsum[conf_to_mol]
        e = self.conf_energy[keep]
        emin = torch.full((self.num_mols,), float("inf"), dtype=e.dtype, device=e.device)
        emin = emin.scatter_reduce(0, conf_to_mol, e, reduce="amin")
        return EnsembleBatch(
            z=self.z,
            atom_attr=self.atom_attr,
            bond_index=self.bond_index,
            bond_attr=self.bond_attr,
            atom_to_mol=self.atom_to_mol,
            pos=self.pos[pkeep],
            point_to_atom=self.point_to_atom[pkeep],
            point_to_conf=new_index[self.point_to_conf[pkeep]],
            conf_to_mol=conf_to_mol,
            conf_weight=w,
            conf_energy=e - emin[conf_to_mol],
            y=self.y,
            num_mols=self.num_mols,
            conf_y=None if self.conf_y is None else self.conf_y[keep],
            names=list(self.names),
            smiles=list(self.smiles),
        )

    def lowest_energy(self) -> EnsembleBatch:
        """The same batch with only the lowest-energy conformer of each molecule."""
        e = self.conf_energy
        emin = torch.full((self.num_mols,), float("inf"), dtype=e.dtype, device=e.device)
        emin = emin.scatter_reduce(0, self.conf_to_mol, e, reduce="amin")
        is_min = e == emin[self.conf_to_mol]
        # first conformer attaining the minimum in each molecule
        idx = torch.arange(self.num_confs, device=e.device)
        big = torch.full((self.num_mols,), self.num_confs, dtype=torch.long, device=e.device)
        first = big.scatter_reduce(
            0, self.conf_to_mol, torch.where(is_min, idx, self.num_confs), "amin"
        )
        keep = torch.zeros(self.num_confs, dtype=torch.bool, device=e.device)
        keep[first] = True
        return self.select_conformers(keep)


def collate_ensembles(graphs: Sequence[EnsembleGraph]) -> EnsembleBatch:
    """Batch molecules with different numbers of atoms and conformers.

    Parameters
    ----------
    graphs : sequence of EnsembleGraph
        At least one; all with the same number of targets and feature widths.

    Returns
    -------
    EnsembleBatch
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("collate_ensembles needs at least one EnsembleGraph")
    for g in graphs:
        if not isinstance(g, EnsembleGraph):
            raise TypeError(
                f"collate_ensembles expects EnsembleGraph items, got {type(g).__name__}"
            )
    n_t = graphs[0].y.numel()
    fa, fb = graphs[0].atom_attr.shape[1], graphs[0].bond_attr.shape[1]
    for g in graphs:
        if g.y.numel() != n_t or g.atom_attr.shape[1] != fa or g.bond_attr.shape[1] != fb:
            raise ValueError(
                f"molecule {g.name!r} has {g.y.numel()} targets / feature widths "
                f"{g.atom_attr.shape[1]}, {g.bond_attr.shape[1]}; expected {n_t} / {fa}, {fb}"
            )
    z, attr, bidx, battr, a2m = [], [], [], [], []
    pos, p2a, p2c, c2m, cw, ce, ys, cys = [], [], [], [], [], [], [], []
    atom_off = conf_off = 0
    for m, g in enumerate(graphs):
        n, c = g.num_atoms, g.num_confs
        z.append(g.z)
        attr.append(g.atom_attr)
        bidx.append(g.bond_index + atom_off)
        battr.append(g.bond_attr)
        a2m.append(torch.full((n,), m, dtype=torch.long))
        pos.append(g.pos.reshape(c * n, 3))
        p2a.append(torch.arange(n).repeat(c) + atom_off)
        p2c.append(torch.arange(c).repeat_interleave(n) + conf_off)
        c2m.append(torch.full((c,), m, dtype=torch.long))
        cw.append(g.conf_weight)
        ce.append(g.conf_energy)
        ys.append(g.y)
        cys.append(g.conf_y)
        atom_off += n
        conf_off += c
    have_conf_y = all(cy is not None for cy in cys)
    return EnsembleBatch(
        z=torch.cat(z),
        atom_attr=torch.cat(attr),
        bond_index=torch.cat(bidx, dim=1),
        bond_attr=torch.cat(battr),
        atom_to_mol=torch.cat(a2m),
        pos=torch.cat(pos),
        point_to_atom=torch.cat(p2a),
        point_to_conf=torch.cat(p2c),
        conf_to_mol=torch.cat(c2m),
        conf_weight=torch.cat(cw),
        conf_energy=torch.cat(ce),
        y=torch.stack(ys).reshape(len(graphs), n_t),
        num_mols=len(graphs),
        conf_y=torch.cat(cys) if have_conf_y else None,
        names=[g.name for g in graphs],
        smiles=[g.smiles for g in graphs],
    )


class EnsembleDataset(torch.utils.data.Dataset):
    """A list of :class:`EnsembleGraph` usable with ``DataLoader(collate_fn=collate_ensembles)``."""

    def __init__(self, graphs: Sequence[EnsembleGraph], target_names: Sequence[str] = ()):
        self.graphs = list(graphs)
        self.target_names = list(target_names)

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int) -> EnsembleGraph:
        return self.graphs[i]

    def loader(self, batch_size: int, shuffle: bool = False, seed: int = 0, **kwargs):
        """A ``DataLoader`` yielding :class:`EnsembleBatch` (seeded shuffling)."""
        gen = torch.Generator().manual_seed(seed)
        return torch.utils.data.DataLoader(
            self,
            batch_size=batch_size,
            shuffle=shuffle,
            generator=gen,
            collate_fn=collate_ensembles,
            **kwargs,
        )
