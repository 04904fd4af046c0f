"""One molecule as a 2-D graph plus the 3-D positions of its conformers.

Positions in **nm**, conformer energies in **kJ/mol** relative to the lowest conformer,
temperatures in K. Batches of these: :mod:`~sci_moe.molecules.ensemble_batch`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from torch import Tensor

from .boltzmann import boltzmann_weights
from .features import atom_features, bond_features, bond_index

__all__ = ["ANGSTROM_TO_NM", "EnsembleGraph"]

#: Multiply RDKit coordinates (Angstrom) by this to get nm.
ANGSTROM_TO_NM = 0.1


def _unique_conformers(pos: np.ndarray, atol: float = 1e-6) -> tuple[list[int], np.ndarray]:
    """Indices of the first of each group of identical conformers, and each one's keeper.

    ``pos``: shape (C, N, 3), Angstrom; identical means every coordinate within ``atol``.
    """
    keep: list[int] = []
    dup_of = np.arange(pos.shape[0])
    for i in range(pos.shape[0]):
        for k in keep:
            if np.abs(pos[i] - pos[k]).max() <= atol:
                dup_of[i] = k
                break
        else:
            keep.append(i)
    return keep, dup_of


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
    pos : Tensor, shape (C, N, 3), float64
        Conformer positions in nm, atom order as ``z``; always float64 (the precision of
        the source coordinates), the models cast them to their own dtype.
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
        # float64 whatever the default dtype: a float64 model must see the positions at
        # full precision (rounded to float32 they keep rotation invariance only to 1e-7)
        self.pos = _as_tensor(self.pos, torch.float64)
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
        bad = ~torch.isfinite(self.pos).reshape(c, -1).all(1)
        if bool(bad.any()):
            raise ValueError(
                f"{where}: positions contain NaN/Inf in conformers "
                f"{torch.nonzero(bad).flatten()[:10].tolist()}; fix or drop them"
            )
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

        Notes
        -----
        Duplicate conformers (identical coordinates to 1e-6 Angstrom, e.g. a ``conf_ids``
        listing one twice, or unpruned optimisations that reached the same minimum) would
        count twice in every readout; they are dropped with a ``UserWarning`` (explicit
        ``weights`` of a dropped copy are added to the kept one).
        """
        from rdkit import Chem

        if mol is None or mol.GetNumConformers() == 0:
            raise ValueError(f"{name or 'molecule'}: needs at least one 3-D conformer")
        if conf_ids is None:
            conf_ids = [c.GetId() for c in mol.GetConformers()]
        conf_ids = list(conf_ids)
        if heavy_only:
            mol = Chem.RemoveHs(mol)
        pos_a = np.stack([mol.GetConformer(int(c)).GetPositions() for c in conf_ids])
        if energies_kj is None:
            energies_kj = np.zeros(len(conf_ids))
        e = np.asarray(energies_kj, dtype=np.float64)
        if e.shape != (len(conf_ids),):
            raise ValueError(
                f"{name}: need one energy per conformer ({len(conf_ids)}), got {e.shape}"
            )
        w = None
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != e.shape or (w < 0).any() or w.sum() <= 0:
                raise ValueError(f"{name}: weights must be >= 0, one per conformer, not all zero")
        keep, dup_of = _unique_conformers(pos_a)
        if len(keep) < len(conf_ids):
            dropped = [i for i in range(len(conf_ids)) if dup_of[i] != i]
            warnings.warn(
                f"{name or 'molecule'}: conformers {dropped} (positions in conf_ids) duplicate "
                f"earlier ones and were dropped, so they do not count twice",
                UserWarning,
                stacklevel=2,
            )
            if w is not None:
                w = np.bincount(dup_of, weights=w, minlength=len(conf_ids))[keep]
            e = e[keep]
            conf_y = None if conf_y is None else np.asarray(conf_y)[keep]
            pos_a = pos_a[keep]
        pos = pos_a * ANGSTROM_TO_NM
        w = boltzmann_weights(e, temperature_k) if w is None else w / w.sum()
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
