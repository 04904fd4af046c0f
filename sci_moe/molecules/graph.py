"""Graph data for conformer ensembles: one 2-D graph, many 3-D conformers.

A molecule is stored once as a 2-D graph (atoms, bonds and their features) plus the
positions of each of its ``C`` conformers; a batch concatenates molecules with different
numbers of atoms **and** conformers and keeps index vectors between the levels
(point -> atom, point -> conformer, conformer -> molecule, atom -> molecule). A *point*
is one atom in one conformer, so a molecule with ``N`` atoms and ``C`` conformers has
``N * C`` points, ordered conformer-major (all atoms of conformer 0, then conformer 1, ...).

Units: positions in **nm**, conformer energies in **kJ/mol** (relative to the lowest
conformer of the molecule), temperatures in K.

The radius graph is pure torch (PyG 2.8's ``radius_graph`` needs ``pyg-lib``): points of
each conformer are scattered into a padded ``(C, n_max, 3)`` block and compared with
``torch.cdist``; edges never cross conformers. Edge convention as in PyG:
``edge_index[0]`` is the source ``j``, ``edge_index[1]`` the target ``i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from torch import Tensor

from .features import atom_features, bond_features, bond_index

__all__ = [
    "ANGSTROM_TO_NM",
    "EnsembleBatch",
    "EnsembleDataset",
    "EnsembleGraph",
    "boltzmann_weights",
    "collate_ensembles",
    "radius_graph_per_conformer",
]

#: Multiply RDKit coordinates (Angstrom) by this to get nm.
ANGSTROM_TO_NM = 0.1
#: Boltzmann constant in kJ/mol/K (as OpenMM and :mod:`sci_moe.sampling.md`).
KB_KJ_PER_MOL_K = 0.00831446261815324


def boltzmann_weights(
    energies_kj: np.ndarray | Sequence[float], temperature_k: float
) -> np.ndarray:
    r"""Boltzmann weights of conformer energies.

    .. math:: w_c = \frac{\exp(-(E_c - E_\min)/k_B T)}{\sum_{c'} \exp(-(E_{c'} - E_\min)/k_B T)}

    Parameters
    ----------
    energies_kj : array_like, shape (C,)
        Conformer energies in kJ/mol (any common offset).
    temperature_k : float
        Temperature in K (> 0).

    Returns
    -------
    numpy.ndarray, shape (C,), float64
        Non-negative weights summing to 1.
    """
    e = np.asarray(energies_kj, dtype=np.float64).reshape(-1)
    if e.size == 0:
        raise ValueError("boltzmann_weights needs at least one energy")
    if not np.all(np.isfinite(e)):
        raise ValueError(f"conformer energies must be finite, got {e}")
    if not temperature_k > 0:
        raise ValueError(f"temperature_k must be > 0 K, got {temperature_k}")
    x = -(e - e.min()) / (KB_KJ_PER_MOL_K * temperature_k)
    w = np.exp(x)
    return w / w.sum()


def _as_tensor(x, dtype) -> Tensor:
    if isinstance(x, Tensor):
        return x.detach().to(dtype)
    return torch.as_tensor(np.asarray(x), dtype=dtype)


@dataclass
class EnsembleGraph:
    """One molecule: its 2-D graph and an ensemble of conformers.

    Attributes
    ----------
    z : Tensor, shape (N,), long
        Atomic numbers.
    atom_attr : Tensor, shape (N, Fa), float
        Atom features (:func:`sci_moe.molecules.features.atom_features`).
    bond_index : Tensor, shape (2, B), long
        Bonds in both directions (local atom indices).
    bond_attr : Tensor, shape (B, Fb), float
        Bond features.
    pos : Tensor, shape (C, N, 3), float
        Conformer positions in nm, atom order as ``z``.
    conf_energy : Tensor, shape (C,), float
        Conformer energies in kJ/mol relative to the lowest one.
    conf_weight : Tensor, shape (C,), float
        Boltzmann weights (sum to 1).
    y : Tensor, shape (T,), float
        Molecule targets (NaN where missing); ``T`` may be 0.
    conf_y : Tensor, shape (C, T), float, optional
        Per-conformer values of the targets (for lowest-energy / oracle baselines).
    name, smiles : str
        Identifiers.
    """

    z: Tensor
    atom_attr: Tensor
    bond_index: Tensor
    bond_attr: Tensor
    pos: Tensor
    conf_energy: Tensor
    conf_weight: Tensor
    y: Tensor = field(default_factory=lambda: torch.zeros(0))
    conf_y: Tensor | None = None
    name: str = ""
    smiles: str = ""

    def __post_init__(self) -> None:
        fdt = torch.get_default_dtype()
        self.z = _as_tensor(self.z, torch.long).reshape(-1)
        n = self.z.numel()
        self.atom_attr = _as_tensor(self.atom_attr, fdt)
        self.bond_index = _as_tensor(self.bond_index, torch.long).reshape(2, -1)
        self.bond_attr = _as_tensor(self.bond_attr, fdt)
        self.pos = _as_tensor(self.pos, fdt)
        self.conf_energy = _as_tensor(self.conf_energy, fdt).reshape(-1)
        self.conf_weight = _as_tensor(self.conf_weight, fdt).reshape(-1)
        self.y = _as_tensor(self.y, fdt).reshape(-1)
        where = f"EnsembleGraph {self.name!r}"
        if n == 0:
            raise ValueError(f"{where}: a molecule needs at least one atom")
        if self.atom_attr.ndim != 2 or self.atom_attr.shape[0] != n:
            raise ValueError(
                f"{where}: atom_attr must be (N={n}, Fa), got {tuple(self.atom_attr.shape)}"
            )
        if self.pos.ndim == 2:
            self.pos = self.pos.unsqueeze(0)
        if self.pos.ndim != 3 or self.pos.shape[1:] != (n, 3):
            raise ValueError(
                f"{where}: pos must be (C, N={n}, 3) in nm, got {tuple(self.pos.shape)}"
            )
        c = self.pos.shape[0]
        if c == 0:
            raise ValueError(f"{where}: an ensemble needs at least one conformer")
        if self.conf_energy.numel() != c or self.conf_weight.numel() != c:
            raise ValueError(
                f"{where}: conf_energy and conf_weight need one value per conformer ({c}), got "
                f"{self.conf_energy.numel()} and {self.conf_weight.numel()}"
            )
        if (self.conf_weight < 0).any() or abs(float(self.conf_weight.sum()) - 1.0) > 1e-4:
            raise ValueError(f"{where}: conf_weight must be >= 0 and sum to 1")
        b = self.bond_index.shape[1]
        if self.bond_attr.ndim != 2 or self.bond_attr.shape[0] != b:
            raise ValueError(
                f"{where}: bond_attr must be (B={b}, Fb), got {tuple(self.bond_attr.shape)}"
            )
        if b and (int(self.bond_index.min()) < 0 or int(self.bond_index.max()) >= n):
            raise ValueError(f"{where}: bond_index refers to atoms outside 0..{n - 1}")
        if not torch.isfinite(self.pos).all():
            raise ValueError(f"{where}: positions contain NaN/Inf")
        if self.conf_y is not None:
            self.conf_y = _as_tensor(self.conf_y, fdt).reshape(c, -1)
            if self.conf_y.shape[1] != self.y.numel():
                raise ValueError(
                    f"{where}: conf_y must be (C={c}, T={self.y.numel()}), "
                    f"got {tuple(self.conf_y.shape)}"
                )

    @property
    def num_atoms(self) -> int:
        return int(self.z.numel())

    @property
    def num_confs(self) -> int:
        return int(self.pos.shape[0])

    @classmethod
    def from_rdkit(
        cls,
        mol,
        conf_ids: Sequence[int] | None = None,
        energies_kj: Sequence[float] | None = None,
        temperature_k: float = 298.15,
        weights: Sequence[float] | None = None,
        y: Sequence[float] | None = None,
        conf_y: np.ndarray | None = None,
        heavy_only: bool = False,
        name: str = "",
    ) -> EnsembleGraph:
        """Build from an RDKit molecule carrying 3-D conformers.

        Parameters
        ----------
        mol : rdkit.Chem.Mol
            Molecule with conformers (RDKit coordinates in Angstrom, converted to nm).
        conf_ids : sequence of int, optional
            Conformers to use, in this order (default: all).
        energies_kj : sequence of float, optional
            Energies of those conformers in kJ/mol (default: all zero).
        temperature_k : float
            Temperature of the Boltzmann weights when ``weights`` is not given.
        weights : sequence of float, optional
            Explicit conformer weights (normalised here).
        y, conf_y : optional
            Molecule targets ``(T,)`` and per-conformer values ``(C, T)``.
        heavy_only : bool
            Drop hydrogens (their count stays in the ``num_hs`` atom feature).
        name : str
            Identifier.
        """
        from rdkit import Chem

        if mol is None or mol.GetNumConformers() == 0:
            raise ValueError(f"{name or 'molecule'}: needs at least one 3-D conformer")
        if conf_ids is None:
            conf_ids = [c.GetId() for c in mol.GetConformers()]
        conf_ids = list(conf_ids)
        if heavy_only:
            mol = Chem.RemoveHs(mol)
        pos = np.stack([mol.GetConformer(int(c)).GetPositions() for c in conf_ids]) * ANGSTROM_TO_NM
        if energies_kj is None:
            energies_kj = np.zeros(len(conf_ids))
        e = np.asarray(energies_kj, dtype=np.float64)
        if e.shape != (len(conf_ids),):
            raise ValueError(
                f"{name}: need one energy per conformer ({len(conf_ids)}), got {e.shape}"
            )
        if weights is None:
            w = boltzmann_weights(e, temperature_k)
        else:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != e.shape or (w < 0).any() or w.sum() <= 0:
                raise ValueError(f"{name}: weights must be >= 0, one per conformer, not all zero")
            w = w / w.sum()
        return cls(
            z=np.array([a.GetAtomicNum() for a in mol.GetAtoms()], dtype=np.int64),
            atom_attr=atom_features(mol),
            bond_index=bond_index(mol),
            bond_attr=bond_features(mol),
            pos=pos,
            conf_energy=e - e.min(),
            conf_weight=w,
            y=np.zeros(0) if y is None else np.asarray(y, dtype=np.float64),
            conf_y=None if conf_y is None else np.asarray(conf_y, dtype=np.float64),
            name=name or (mol.GetProp("_Name") if mol.HasProp("_Name") else ""),
            smiles=Chem.MolToSmiles(Chem.RemoveHs(mol)),
        )

    def to_dict(self) -> dict:
        """Plain dict of tensors and strings (loads with ``torch.load(weights_only=True)``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> EnsembleGraph:
        return cls(**d)


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
        kept_per_mol = torch.zeros(self.num_mols, dtype=torch.long, device=keep.device)
        kept_per_mol.index_add_(0, self.conf_to_mol, keep.long())
        if (kept_per_mol == 0).any():
            raise ValueError("select_conformers must keep at least one conformer per molecule")
        new_index = torch.cumsum(keep.long(), 0) - 1
        pkeep = keep[self.point_to_conf]
        conf_to_mol = self.conf_to_mol[keep]
        w = self.conf_weight[keep]
        wsum = torch.zeros(self.num_mols, dtype=w.dtype, device=w.device).index_add_(
            0, conf_to_mol, w
        )
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


def radius_graph_per_conformer(
    pos: Tensor,
    point_to_conf: Tensor,
    cutoff: float,
    max_neighbors: int | None = None,
    loop: bool = False,
    max_block_elements: int = 2**24,
) -> Tensor:
    """All pairs of points of the same conformer closer than ``cutoff`` (pure torch).

    Parameters
    ----------
    pos : Tensor, shape (P, 3)
        Positions (same length unit as ``cutoff``; nm for :class:`EnsembleBatch`).
    point_to_conf : Tensor, shape (P,), long
        Conformer of each point (need not be sorted).
    cutoff : float
        Pairs with ``|r_i - r_j| <= cutoff`` are connected.
    max_neighbors : int, optional
        Keep only the ``max_neighbors`` nearest sources of each target (ties broken by
        index).
    loop : bool
        Include self-loops ``(i, i)``.
    max_block_elements : int
        Conformers are processed in chunks so that each padded distance block has at most
        about this many entries (memory bound).

    Returns
    -------
    Tensor, shape (2, E), long
        ``edge_index[0]`` = source ``j``, ``edge_index[1]`` = target ``i``, sorted by
        conformer, then target, then source.
    """
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"pos must be (P, 3), got {tuple(pos.shape)}")
    point_to_conf = point_to_conf.reshape(-1).to(torch.long)
    if point_to_conf.numel() != pos.shape[0]:
        raise ValueError("point_to_conf needs one entry per point")
    if not cutoff > 0:
        raise ValueError(f"cutoff must be > 0, got {cutoff}")
    if max_neighbors is not None and max_neighbors < 1:
        raise ValueError(f"max_neighbors must be >= 1 or None, got {max_neighbors}")
    device = pos.device
    if pos.shape[0] == 0:
        return torch.zeros(2, 0, dtype=torch.long, device=device)
    order = torch.argsort(point_to_conf, stable=True)
    conf_sorted = point_to_conf[order]
    _, counts = torch.unique_consecutive(conf_sorted, return_counts=True)
    ptr = torch.zeros(counts.numel() + 1, dtype=torch.long, device=device)
    ptr[1:] = torch.cumsum(counts, 0)
    x = pos.detach()[order]
    out = []
    n_groups = counts.numel()
    counts_list = counts.tolist()
    start = 0
    while start < n_groups:
        stop, n_max = start, 0
        while stop < n_groups:
            cand = max(n_max, counts_list[stop])
            if stop > start and (stop - start + 1) * cand * cand > max_block_elements:
                break
            n_max = cand
            stop += 1
        out.append(_radius_block(x, ptr, counts, start, stop, n_max, cutoff, max_neighbors, loop))
        start = stop
    edges = torch.cat(out, dim=1)
    return order[edges]


def _radius_block(x, ptr, counts, start, stop, n_max, cutoff, max_neighbors, loop) -> Tensor:
    device = x.device
    cnt = counts[start:stop]
    base = ptr[start:stop]
    local = torch.arange(n_max, device=device)
    valid = local[None, :] < cnt[:, None]  # (g, n_max)
    idx = (base[:, None] + local[None, :]).clamp(max=x.shape[0] - 1)
    block = x[idx]  # (g, n_max, 3)
    d = torch.cdist(block, block, compute_mode="donot_use_mm_for_euclid_dist")  # (g, i, j)
    mask = valid[:, :, None] & valid[:, None, :] & (d <= cutoff)
    if not loop:
        mask &= ~torch.eye(n_max, dtype=torch.bool, device=device)[None]
    if max_neighbors is not None and max_neighbors < n_max:
        dm = torch.where(mask, d, torch.full_like(d, float("inf")))
        # stable sort so ties go to the lower source index
        srt = torch.sort(dm, dim=2, stable=True).indices[:, :, :max_neighbors]
        sel = torch.zeros_like(mask)
        sel.scatter_(2, srt, True)
        mask &= sel
    gi, i, j = mask.nonzero(as_tuple=True)
    return torch.stack([base[gi] + j, base[gi] + i])
