"""Content-hash cache of conformer-embedding results (one file per molecule).

The key (:func:`ensemble_cache_key`) hashes the input, the settings and the RDKit version,
so a rerun with the same inputs reads every result, failures included, and a change of
any of them recomputes. Entries are written atomically; a corrupt entry is recomputed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
from rdkit import Chem, rdBase

from .._util import atomic_save_npz, atomic_write_text
from .embedding import ConformerConfig

__all__ = ["ensemble_cache_key"]

_CACHE_VERSION = 3


def ensemble_cache_key(smiles_or_mol, config: ConformerConfig) -> str:
    """sha256 of the input (SMILES or mol block), the settings and the RDKit version."""
    if isinstance(smiles_or_mol, Chem.Mol):
        m = Chem.Mol(smiles_or_mol)
        m.RemoveAllConformers()
        ident = "molblock:" + Chem.MolToMolBlock(m, includeStereo=True, kekulize=False)
    else:
        ident = "smiles:" + str(smiles_or_mol)
    cfg = asdict(config)
    cfg.pop("temperature_k")  # only changes the weights, computed on load
    payload = json.dumps(
        {"input": ident, "config": cfg, "rdkit": rdBase.rdkitVersion, "v": _CACHE_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _cache_paths(cache_dir: Path, key: str) -> tuple[Path, Path]:
    d = cache_dir / key[:2]
    return d / f"{key}.npz", d / f"{key}.failed.json"


def _cache_load(cache_dir: Path, key: str):
    ok, bad = _cache_paths(cache_dir, key)
    if ok.exists():
        try:
            with np.load(ok, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except Exception:  # corrupt entry: recompute
            return None
    if bad.exists():
        try:
            return json.loads(bad.read_text())
        except Exception:
            return None
    return None


def _cache_store(cache_dir: Path, key: str, result) -> None:
    ok, bad = _cache_paths(cache_dir, key)
    if isinstance(result, dict) and "mol_binary" in result:
        atomic_save_npz(ok, result, fsync=False)
    else:
        atomic_write_text(bad, json.dumps(result), fsync=False)
