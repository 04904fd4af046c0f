"""GFN2-xTB single points (tblite) and ensemble labels on water / ethanol."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from sci_moe.data.xtb import (
    KJ_PER_HARTREE,
    XTBConfig,
    xtb_ensemble_labels,
    xtb_singlepoint,
)
from sci_moe.molecules.conformers import ConformerConfig, embed_ensemble, parallel_map
from sci_moe.testing import assert_equivariant

pytest.importorskip("tblite")

# water, nm (O-H 0.0957 nm, HOH 104.5 deg), in the yz plane with C2 axis along z
WATER_Z = np.array([8, 1, 1])
WATER = np.array([[0.0, 0.0, 0.01173], [0.0, 0.07572, -0.04692], [0.0, -0.07572, -0.04692]])


def test_water_singlepoint_physics():
    r = xtb_singlepoint(WATER_Z, WATER)
    # GFN2-xTB water: about -5.07 Eh; dipole along the C2 axis, physics convention
    # (sum q_i r_i: from the negative O towards the positive H atoms, i.e. -z here)
    assert r.energy_kj / KJ_PER_HARTREE == pytest.approx(-5.07, abs=0.01)
    assert abs(r.dipole_debye[0]) < 1e-6 and abs(r.dipole_debye[1]) < 1e-6
    assert r.dipole_debye[2] < 0
    mu_charges = (r.charges[:, None] * WATER).sum(0)  # e nm, same direction
    assert mu_charges[2] < 0
    assert 1.5 < r.dipole_norm_debye < 2.8  # experiment 1.85 D
    assert r.homo_ev < r.lumo_ev and r.gap_ev == pytest.approx(r.lumo_ev - r.homo_ev)
    assert 10 < r.gap_ev < 20
    assert r.charges.sum() == pytest.approx(0.0, abs=1e-6)
    assert r.charges[0] < 0 < r.charges[1]


def test_singlepoint_invariance_and_dipole_equivariance():
    def properties(pos):
        r = xtb_singlepoint(WATER_Z, pos.numpy())
        return (
            torch.tensor([r.energy_kj], dtype=torch.float64),
            torch.tensor([r.gap_ev], dtype=torch.float64),
            torch.as_tensor(r.dipole_debye),
        )

    # energy and gap invariant, dipole (neutral: origin-independent) rotates with the atoms
    assert_equivariant(
        properties,
        torch.as_tensor(WATER),
        "cartesian_points",
        [None, None, "cartesian_vectors"],
        translation=True,
        n_trials=2,
        atol=1e-5,
        rtol=0.0,
    )


def test_charge_and_unpaired_electrons():
    # hydroxide (charge -1) and the OH radical (one unpaired electron)
    z, pos = np.array([8, 1]), np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.097]])
    anion = xtb_singlepoint(z, pos, charge=-1)
    radical = xtb_singlepoint(z, pos, charge=0, uhf=1)
    assert anion.charges.sum() == pytest.approx(-1.0, abs=1e-6)
    assert radical.charges.sum() == pytest.approx(0.0, abs=1e-6)
    assert anion.energy_kj != radical.energy_kj


def test_solvent_changes_energy():
    gas = xtb_singlepoint(WATER_Z, WATER)
    wet = xtb_singlepoint(WATER_Z, WATER, config=XTBConfig(solvent="water"))
    dg = (wet.energy_kj - gas.energy_kj) / 4.184
    assert -12 < dg < -2  # hydration free energy of water ~ -6.3 kcal/mol


def test_bad_input():
    with pytest.raises(ValueError, match="positions"):
        xtb_singlepoint(WATER_Z, WATER[:2])
    with pytest.raises(ValueError, match="atomic numbers"):
        xtb_singlepoint([0, 1, 1], WATER)
    with pytest.raises(ValueError, match="NaN"):
        xtb_singlepoint(WATER_Z, WATER * np.nan)
    with pytest.raises(ValueError, match="method"):
        XTBConfig(method="GFN3")


def test_ensemble_labels_ethanol():
    cfg = ConformerConfig(num_attempts=3, max_confs=3, seed=2, prune_rms=0.0, energy_window_kj=None)
    ens = embed_ensemble("CCO", cfg)
    assert ens.num_confs >= 2
    bad = (WATER_Z, np.full((1, 3, 3), 0.0), 0, 0)  # all atoms on top of each other
    res = xtb_ensemble_labels([(ens.atomic_numbers, ens.positions_nm, 0, 0), bad])
    r = res[0]
    assert r["energy_kj"].shape == (ens.num_confs,) and r["dipole_debye"].shape == (
        ens.num_confs,
        3,
    )
    for k in range(ens.num_confs):
        one = xtb_singlepoint(ens.atomic_numbers, ens.positions_nm[k])
        assert r["energy_kj"][k] == pytest.approx(one.energy_kj)
        assert r["gap_ev"][k] == pytest.approx(one.gap_ev)
    # GFN2 and MMFF agree that the conformers are within a few kJ/mol
    assert np.ptp(r["energy_kj"]) < 30
    assert res[1].get("failed") and "conformer 0" in res[1]["reason"]


def _maybe_crash(x):
    if x == 3:
        os._exit(1)
    return {"x": x}


def _raise(x):
    raise RuntimeError(f"boom {x}")


def test_parallel_map_keeps_finished_results():
    out = parallel_map(_raise, [(1,), (2,)], n_jobs=1)
    assert all(o["failed"] and "boom" in o["reason"] for o in out)
    seen = []
    out = parallel_map(
        _maybe_crash,
        [(1,), (2,), (3,)],
        n_jobs=2,
        mp_context="fork",
        on_result=lambda i, r: seen.append(i),
    )
    assert sorted(seen) == [0, 1, 2]
    assert out[2]["failed"] and "worker" in out[2]["reason"]
    assert all(o == {"x": i + 1} or o.get("failed") for i, o in enumerate(out))


def _omp_env(x):
    return {"omp": os.environ.get("OMP_NUM_THREADS"), "x": x}


@pytest.mark.slow
def test_default_forkserver_pool(monkeypatch):
    """The real path: forkserver workers, one OpenMP thread, same numbers as in-process."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    out = parallel_map(_omp_env, [(1,), (2,)], n_jobs=2)
    assert [o["omp"] for o in out] == ["1", "1"] and [o["x"] for o in out] == [1, 2]
    assert "OMP_NUM_THREADS" not in os.environ  # restored afterwards
    mols = [(WATER_Z, WATER[None], 0, 0), (WATER_Z, (WATER + 0.01)[None] * 1.02, 0, 0)]
    par = xtb_ensemble_labels(mols, n_jobs=2)
    ser = xtb_ensemble_labels(mols, n_jobs=1)
    for a, b in zip(par, ser, strict=True):
        np.testing.assert_allclose(a["energy_kj"], b["energy_kj"], rtol=0, atol=1e-8)
        np.testing.assert_allclose(a["dipole_debye"], b["dipole_debye"], atol=1e-8)
