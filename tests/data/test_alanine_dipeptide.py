"""Alanine dipeptide: shipped PDB, systems for each force field, dihedrals."""

import mdtraj
import numpy as np
import openmm.app as app
import pytest

from sci_moe.data import alanine_dipeptide as ad


def test_pdb_matches_amber_templates():
    pdb = app.PDBFile(str(ad.alanine_dipeptide_pdb()))
    top = pdb.topology
    assert [r.name for r in top.residues()] == ["ACE", "ALA", "NME"]
    assert top.getNumAtoms() == 22 and top.getNumBonds() == 21
    els = [a.element.symbol for a in top.atoms()]
    assert [i for i, e in enumerate(els) if e != "H"] == list(ad.HEAVY_ATOMS)
    names = [a.name for a in top.atoms()]
    for idx, name in zip(ad.PHI_ATOMS, ["C", "N", "CA", "C"], strict=True):
        assert names[idx] == name
    assert names[ad.PSI_ATOMS[-1]] == "N"


@pytest.mark.parametrize("ff", ["amber99sbildn", "amber14", "amber99sb"])
@pytest.mark.parametrize("solvent", [None, "obc", "gbn2"])
def test_build_system(ff, solvent):
    _, system, pos = ad.build_system(ff, solvent)
    assert system.getNumParticles() == 22 and pos.shape == (22, 3)
    names = {f.__class__.__name__ for f in system.getForces()}
    assert ("NonbondedForce" in names) and ((solvent is None) == (len(names) == 5))


def test_build_system_bad_input():
    with pytest.raises(ValueError, match="forcefield"):
        ad.build_system("gromos")
    with pytest.raises(ValueError, match="implicit_solvent"):
        ad.build_system(implicit_solvent="water")
    with pytest.raises(ValueError, match="constraints"):
        ad.build_system(constraints="everything")
    _, s, _ = ad.build_system(constraints="hbonds")
    assert s.getNumConstraints() == 12


def test_phi_psi_matches_mdtraj():
    traj = mdtraj.load(str(ad.alanine_dipeptide_pdb()))
    rng = np.random.default_rng(1)
    xyz = traj.xyz[0][None] + 0.03 * rng.standard_normal((20, 22, 3)).astype(np.float32)
    t = mdtraj.Trajectory(xyz, traj.topology)
    ref = np.stack([mdtraj.compute_phi(t)[1][:, 0], mdtraj.compute_psi(t)[1][:, 0]], 1)
    out = ad.phi_psi(xyz)
    assert out.shape == (20, 2)
    diff = np.angle(np.exp(1j * (out - ref)))
    assert np.abs(diff).max() < 1e-4
    assert ad.phi_psi(xyz[0]).shape == (2,)
    with pytest.raises(ValueError):
        ad.phi_psi(np.zeros((3, 21, 3)))
    with pytest.raises(ValueError):
        ad.phi_psi(np.full((1, 22, 3), np.nan))


def test_build_pdb_reproduces_shipped_file(tmp_path):
    pos = ad.build_pdb(tmp_path / "ala.pdb")
    ref = app.PDBFile(str(ad.alanine_dipeptide_pdb())).getPositions(asNumpy=True)._value
    assert np.abs(pos - ref).max() < 2e-3  # PDB rounds to 1e-4 nm
    phi, psi = np.degrees(ad.phi_psi(pos))
    assert -180 < phi < -60 and (psi > 100 or psi < -150)  # extended (beta/C5) basin


def test_generate_reference_resume_equals_uninterrupted(tmp_path):
    kw = {"equilibration_steps": 10, "checkpoint_every": 2, "progress": False, "seed": 3}
    full = ad.generate_reference(tmp_path / "full.npz", 6, 5, **kw)
    part = tmp_path / "part.npz"
    assert ad.generate_reference(part, 6, 5, stop_after_frames=3, **kw) is None
    assert not part.exists() and (tmp_path / "part.npz.ckpt.npz").exists()
    assert ad.generate_reference(part, 6, 5, **kw) == part
    assert not (tmp_path / "part.npz.ckpt.npz").exists()
    a, b = np.load(full), np.load(part)
    assert a["positions"].shape == (6, 22, 3) and a["forces"].shape == (6, 22, 3)
    for key in ("positions", "forces", "energies", "masses", "atom_names", "time_ps"):
        np.testing.assert_array_equal(a[key], b[key])
    assert np.isfinite(a["energies"]).all() and float(a["temperature_k"]) == 300.0
    # a finished file is returned as is; other settings are refused
    assert ad.generate_reference(part, 6, 5, **kw) == part
    with pytest.raises(ValueError, match="other settings"):
        ad.generate_reference(part, 7, 5, **kw)
    other = {**kw, "seed": 4}
    ad.generate_reference(tmp_path / "c.npz", 6, 5, stop_after_frames=2, **kw)
    with pytest.raises(ValueError, match="other settings"):
        ad.generate_reference(tmp_path / "c.npz", 6, 5, **other)


def test_generate_reference_bad_input(tmp_path):
    with pytest.raises(ValueError, match="timestep_fs"):
        ad.generate_reference(tmp_path / "x.npz", 2, 2, timestep_fs=-1.0)
    with pytest.raises(ValueError, match="n_frames"):
        ad.generate_reference(tmp_path / "x.npz", 0, 2)
    with pytest.raises(ValueError, match="seed"):
        ad.generate_reference(tmp_path / "x.npz", 2, 2, seed=-1)


def test_generate_reference_extend_and_shorten(tmp_path):
    """n_frames may change between calls: frames are those of one long run."""
    kw = {"equilibration_steps": 10, "checkpoint_every": 2, "progress": False}
    full = np.load(ad.generate_reference(tmp_path / "full.npz", 5, 4, **kw))
    ad.generate_reference(tmp_path / "p.npz", 9, 4, stop_after_frames=4, **kw)
    short = np.load(ad.generate_reference(tmp_path / "p.npz", 3, 4, **kw))
    np.testing.assert_array_equal(short["positions"], full["positions"][:3])
    ad.generate_reference(tmp_path / "q.npz", 3, 4, stop_after_frames=2, **kw)
    longer = np.load(ad.generate_reference(tmp_path / "q.npz", 5, 4, **kw))
    np.testing.assert_array_equal(longer["positions"], full["positions"])
