"""NCI builder option ``electronic``: MARCEL Drugs-75K IP / EA / chi columns (Delta-SCF GFN2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sci_moe.data.molecule_set import MoleculeSetConfig, build_molecule_set
from sci_moe.data.molecule_set_store import ELECTRONIC_TARGETS, TARGETS, MoleculeSet
from sci_moe.molecules import ConformerConfig

MOLS = [("ethanol", "CCO"), ("propylamine", "CCCN")]


def _cfg(electronic: bool):
    return MoleculeSetConfig(
        n_molecules=2,
        conformers=ConformerConfig(num_attempts=4, max_confs=2, seed=3, prune_rms=0.1),
        sasa_density=0.5,
        electronic=electronic,
    )


def test_electronic_columns_leave_the_default_set_unchanged(tmp_path):
    cache = tmp_path / "cache"
    kw = dict(n_jobs=1, progress=False, plot=False, molecules=MOLS, cache_dir=cache)
    plain = build_molecule_set(tmp_path / "plain", _cfg(False), **kw)
    assert plain.target_names == list(TARGETS)
    assert not (cache / "electronic").exists()
    el = build_molecule_set(tmp_path / "el", _cfg(True), **kw)
    assert el.target_names == [*TARGETS, *ELECTRONIC_TARGETS]
    np.testing.assert_array_equal(el.targets[:, :4], plain.targets)  # same labels, same cache
    np.testing.assert_array_equal(el.conf_targets[:, :4], plain.conf_targets)
    ip, ea, chi = (el.conf_targets[:, 4 + k] for k in range(3))
    np.testing.assert_allclose(chi, 0.5 * (ip + ea))
    assert np.all(ip > 5) and np.all(ea < ip)
    for i in range(len(el)):  # Boltzmann averages with the GFN2 weights
        c = slice(el.conf_ptr[i], el.conf_ptr[i + 1])
        assert el.targets[i, 4] == pytest.approx(el.conformer_weights(i) @ el.conf_targets[c, 4])
    rep = json.loads((tmp_path / "el" / "report.json").read_text())
    assert rep["target_units"]["ip"] == "eV" and rep["statistics"]["chi"]["unit"] == "eV"
    assert MoleculeSet.load(tmp_path / "el").graphs(targets=["ip"])[0].y.shape == (1,)
    # a rebuild reads the IP/EA cache
    again = build_molecule_set(tmp_path / "el", _cfg(True), **kw)
    assert again.content_sha256() == el.content_sha256()
