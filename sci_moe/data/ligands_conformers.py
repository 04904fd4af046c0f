"""Ligand conformer ensembles: MMFF94 via :func:`generate_ensembles`, UFF where MMFF lacks P.

MMFF94 has parameters for trivalent phosphorus in phosphines, phosphites and
aminophosphines, so the MMFF path (:func:`sci_moe.molecules.generate_ensembles`: ETKDGv3,
MMFF94, 10 kcal/mol window, RMSD pruning) serves almost every ligand. A ligand that
fails there at the ``forcefield`` stage gets :func:`uff_ensemble` instead: the same
recipe (seeded ETKDGv3, energy window, greedy heavy-atom RMSD pruning, lowest first)
with UFF optimisation and energies. The builder counts those in its report
(``n_uff_fallback``); GFN2-xTB single points then give the Boltzmann weights either way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .._util import KJ_PER_KCAL, atomic_save_npz
from ..molecules import ConformerConfig, ConformerEnsemble, ensemble_from_arrays

__all__ = ["uff_ensemble"]


def _rms_prune(mol, order, rms: float, max_keep: int) -> list[int]:
    from rdkit import Chem
    from rdkit.Chem import rdMolAlign

    heavy = Chem.RemoveHs(mol)
    kept: list[int] = []
    for cid in order:
        if len(kept) >= max_keep:
            break
        if all(
            rdMolAlign.GetBestRMS(Chem.Mol(heavy), heavy, cid, ref, maxMatches=1000) >= rms
            for ref in kept
        ):
            kept.append(cid)
    return kept


def _uff_data(smiles: str, cfg: ConformerConfig) -> dict:
    from rdkit import Chem
    from rdkit.Chem import AllChem, rdDistGeom

    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"invalid SMILES {smiles!r}")
    mol = Chem.AddHs(mol)
    if not AllChem.UFFHasAllMoleculeParams(mol):
        raise ValueError("no UFF parameters either")
    p = rdDistGeom.ETKDGv3()
    p.randomSeed = int(cfg.seed)
    p.numThreads = 1
    cids = list(rdDistGeom.EmbedMultipleConfs(mol, numConfs=cfg.num_attempts, params=p))
    if not cids:
        raise ValueError(f"ETKDGv3 embedded 0 of {cfg.num_attempts} attempts")
    res = AllChem.UFFOptimizeMoleculeConfs(mol, numThreads=1, maxIters=cfg.max_iters)
    e = np.array([en for _, en in res], dtype=np.float64) * KJ_PER_KCAL
    ids = [c.GetId() for c in mol.GetConformers()]
    order = [int(i) for i in np.argsort(e, kind="stable") if np.isfinite(e[i])]
    if cfg.energy_window_kj is not None and order:
        order = [i for i in order if e[i] - e[order[0]] <= cfg.energy_window_kj]
    kept = _rms_prune(mol, [ids[i] for i in order], max(cfg.prune_rms, 1e-6), cfg.max_confs)
    pos = {c.GetId(): c.GetPositions() for c in mol.GetConformers()}
    idx = {c: i for i, c in enumerate(ids)}
    out = Chem.Mol(mol)
    out.RemoveAllConformers()
    return {
        "mol_binary": np.frombuffer(out.ToBinary(), dtype=np.uint8).copy(),
        "positions": np.stack([pos[c] for c in kept]),
        "energies_kj": e[[idx[c] for c in kept]],
    }


def uff_ensemble(
    name: str, smiles: str, config: ConformerConfig, cache_dir: str | Path | None = None
) -> ConformerEnsemble:
    """ETKDGv3 + UFF conformer ensemble of one molecule (cached by content hash).

    Parameters
    ----------
    name, smiles : str
    config : ConformerConfig
        ``num_attempts``, ``max_confs``, ``prune_rms``, ``energy_window_kj``, ``seed``,
        ``max_iters`` are used (``force_field`` is ignored: UFF).
    cache_dir : path, optional
        Directory of ``<sha256>.npz`` results.

    Raises
    ------
    ValueError
        Invalid SMILES, no UFF parameters, or no embedding.
    """
    from rdkit import rdBase

    key = hashlib.sha256(
        json.dumps(
            {"smiles": smiles, "cfg": repr(config), "rdkit": rdBase.rdkitVersion, "ff": "uff"},
            sort_keys=True,
        ).encode()
    ).hexdigest()
    f = Path(cache_dir) / f"{key}.npz" if cache_dir is not None else None
    data = None
    if f is not None and f.exists():
        with np.load(f, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    if data is None:
        data = _uff_data(smiles, config)
        if f is not None:
            atomic_save_npz(f, data, fsync=False)
    return ensemble_from_arrays(name, smiles, data, config.temperature_k)
