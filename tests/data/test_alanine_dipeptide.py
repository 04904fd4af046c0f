"""Alanine dipeptide: shipped PDB, systems for each force field, dihedrals."""

import mdtraj
import numpy as np
import openmm.app as app
import pytest

from sci_moe.data.alanine_pdb import build_pdb
from sci_moe.data.alanine_reference import (
    generate_reference,
    load_reference,
    make_reference_histogram,
    phi_psi_histogram,
)
from sci_moe.sampling.md import (
    HEAVY_ATOMS,
    PHI_ATOMS,
    PSI_ATOMS,
    alanine_dipeptide_pdb,
    build_system,
    dihedrals,
    js_divergence,
    phi_psi,
    reference_histogram,
)


def test_pdb_matches_amber_templates():
    pdb = app.PDBFile(str(alanine_dipeptide_pdb()))
    top = pdb.topology
    assert [r.name for r in top.residues()] == ["ACE", "ALA", "NME"]
    assert top.getNumAtoms() == 22 and top.getNumBonds() == 21
    els = [a.element.symbol for a in top.atoms()]
    assert [i for i, e in enumerate(els) if e != "H"] == list(HEAVY_ATOMS)
    names = [a.name for a in top.atoms()]
    for idx, name in zip(PHI_ATOMS, ["C", "N", "CA", "C"], strict=True):
        assert names[idx] == name
    assert names[PSI_ATOMS[-1]] == "N"


@pytest.mark.parametrize(
    "ff,solvent",
    [
        ("amber99sbildn", None),
        ("amber99sbildn", "obc"),
        ("amber99sbildn", "gbn2"),
        ("amber14", "obc"),
        ("amber99sb", "obc2"),
    ],
)
def test_build_system(ff, solvent):
    _, system, pos = build_system(ff, solvent)
    assert system.getNumParticles() == 22 and pos.shape == (22, 3)
    names = {f.__class__.__name__ for f in system.getForces()}
    assert ("NonbondedForce" in names) and ((solvent is None) == (len(names) == 5))


def test_build_system_bad_input():
    with pytest.raises(ValueError, match="forcefield"):
        build_system("gromos")
    with pytest.raises(ValueError, match="implicit_solvent"):
        build_system(implicit_solvent="water")
    with pytest.raises(ValueError, match="constraints"):
        build_system(constraints="everything")
    _, s, _ = build_system(constraints="hbonds")
    assert s.getNumConstraints() == 12


def test_phi_psi_matches_mdtraj():
    traj = mdtraj.load(str(alanine_dipeptide_pdb()))
    rng = np.random.default_rng(1)
    xyz = traj.xyz[0][None] + 0.03 * rng.standard_normal((20, 22, 3)).astype(np.float32)
    t = mdtraj.Trajectory(xyz, traj.topology)
    ref = np.stack([mdtraj.compute_phi(t)[1][:, 0], mdtraj.compute_psi(t)[1][:, 0]], 1)
    out = phi_psi(xyz)
    assert out.shape == (20, 2)
    diff = np.angle(np.exp(1j * (out - ref)))
    assert np.abs(diff).max() < 1e-4
    assert phi_psi(xyz[0]).shape == (2,)
    with pytest.raises(ValueError):
        phi_psi(np.zeros((3, 21, 3)))
    with pytest.raises(ValueError):
        phi_psi(np.full((1, 22, 3), np.nan))


def test_build_pdb_reproduces_shipped_file(tmp_path):
    pos = build_pdb(tmp_path / "ala.pdb")
    ref = app.PDBFile(str(alanine_dipeptide_pdb())).getPositions(asNumpy=True)._value
    assert np.abs(pos - ref).max() < 2e-3  # PDB rounds to 1e-4 nm
    phi, psi = np.degrees(phi_psi(pos))
    assert -180 < phi < -60 and (psi > 100 or psi < -150)  # extended (beta/C5) basin


def test_generate_reference_resume_equals_uninterrupted(tmp_path):
    kw = {"equilibration_steps": 10, "checkpoint_every": 2, "progress": False, "seed": 3}
    full = generate_reference(tmp_path / "full.npz", 6, 5, **kw)
    part = tmp_path / "part.npz"
    assert generate_reference(part, 6, 5, stop_after_frames=3, **kw) is None
    assert not part.exists() and (tmp_path / "part.npz.ckpt.pt").exists()
    assert generate_reference(part, 6, 5, **kw) == part
    assert not (tmp_path / "part.npz.ckpt.pt").exists()
    a, b = np.load(full), np.load(part)
    assert a["positions"].shape == (6, 22, 3) and a["forces"].shape == (6, 22, 3)
    for key in ("positions", "forces", "energies", "masses", "atom_names", "time_ps"):
        np.testing.assert_array_equal(a[key], b[key])
    assert np.isfinite(a["energies"]).all() and float(a["temperature_k"]) == 300.0
    # a finished file is returned as is; other settings are refused
    assert generate_reference(part, 6, 5, **kw) == part
    with pytest.raises(ValueError, match="other settings"):
        generate_reference(part, 7, 5, **kw)
    other = {**kw, "seed": 4}
    generate_reference(tmp_path / "c.npz", 6, 5, stop_after_frames=2, **kw)
    with pytest.raises(ValueError, match="other settings"):
        generate_reference(tmp_path / "c.npz", 6, 5, **other)


def test_generate_reference_bad_input(tmp_path):
    with pytest.raises(ValueError, match="timestep_fs"):
        generate_reference(tmp_path / "x.npz", 2, 2, timestep_fs=-1.0)
    with pytest.raises(ValueError, match="n_frames"):
        generate_reference(tmp_path / "x.npz", 0, 2)
    with pytest.raises(ValueError, match="seed"):
        generate_reference(tmp_path / "x.npz", 2, 2, seed=-1)


def test_generate_reference_extend_and_shorten(tmp_path):
    """n_frames may change between calls: frames are those of one long run."""
    kw = {"equilibration_steps": 10, "checkpoint_every": 2, "progress": False}
    full = np.load(generate_reference(tmp_path / "full.npz", 5, 4, **kw))
    generate_reference(tmp_path / "p.npz", 9, 4, stop_after_frames=4, **kw)
    short = np.load(generate_reference(tmp_path / "p.npz", 3, 4, **kw))
    np.testing.assert_array_equal(short["positions"], full["positions"][:3])
    generate_reference(tmp_path / "q.npz", 3, 4, stop_after_frames=2, **kw)
    longer = np.load(generate_reference(tmp_path / "q.npz", 5, 4, **kw))
    np.testing.assert_array_equal(longer["positions"], full["positions"])


@pytest.fixture(scope="module")
def tiny_reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "ref.npz"
    return generate_reference(path, 8, 10, equilibration_steps=10, progress=False)


@pytest.mark.parametrize("atoms,n", [("all", 22), ("heavy", 10), ("backbone", 5)])
def test_load_reference_coarse_grained(tiny_reference, atoms, n):
    ref = load_reference(tiny_reference, atoms)
    assert ref["positions"].shape == (8, n, 3) and ref["forces"].shape == (8, n, 3)
    assert ref["masses"].shape == (n,) and ref["energies"].shape == (8,)
    assert ref["phi_psi"].shape == (8, 2) and ref["config"]["n_frames"] == 8
    if atoms == "backbone":
        np.testing.assert_allclose(
            ref["phi_psi"], dihedrals(ref["positions"], [[0, 1, 2, 3], [1, 2, 3, 4]])
        )
        assert [str(a) for a in ref["atom_names"]] == ["ACE:C", "ALA:N", "ALA:CA", "ALA:C", "NME:N"]
    with pytest.raises(ValueError, match="atoms"):
        load_reference(tiny_reference, "side-chain")


def test_js_divergence_counts_matches_scipy():
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(0)
    p, q = rng.integers(0, 20, (8, 8)), rng.integers(0, 20, (8, 8))
    p[0, 0] = 0
    assert np.isclose(js_divergence(p, q), jensenshannon(p.ravel(), q.ravel()) ** 2)
    assert js_divergence(p, 3 * p) == pytest.approx(0.0, abs=1e-15)
    assert np.isclose(js_divergence([1, 0], [0, 1]), np.log(2))
    with pytest.raises(ValueError):
        js_divergence([1, 2], [1, 2, 3])


def test_histogram_and_shipping(tiny_reference, tmp_path):
    ang = load_reference(tiny_reference)["phi_psi"]
    h = phi_psi_histogram(ang, bins=16)
    assert h.shape == (16, 16) and h.sum() == 8
    i, j = (np.floor((ang[0] + np.pi) / (2 * np.pi / 16))).astype(int)
    assert h[i, j] >= 1
    meta = make_reference_histogram(tiny_reference, tmp_path / "h.npz", bins=16)
    with np.load(tmp_path / "h.npz") as f:
        assert f["counts"].sum() == 8 and f["edges"].shape == (17,)
        assert (f["counts_first_half"] + f["counts_second_half"] == f["counts"]).all()
    assert meta["n_frames"] == 8 and 0 <= meta["js_first_vs_second_half"] <= np.log(2)
    with pytest.raises(ValueError):
        phi_psi_histogram(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="available"):
        reference_histogram("no-such-reference")


def test_shipped_reference_histogram():
    ref = reference_histogram()
    meta = ref["metadata"]
    assert ref["counts"].shape == (64, 64) and ref["edges"].shape == (65,)
    assert int(ref["counts"].sum()) == meta["n_frames"] > 10_000
    assert (ref["counts_first_half"] + ref["counts_second_half"] == ref["counts"]).all()
    assert meta["config"]["forcefield"] == "amber99sbildn"
    assert meta["config"]["implicit_solvent"] == "obc"
    assert meta["config"]["temperature_k"] == 300.0
    # phi < 0 basins dominate (beta/PII and alpha_R), as for alanine dipeptide at 300 K
    assert ref["counts"][:32].sum() > 0.95 * ref["counts"].sum()
    assert np.isclose(
        meta["js_first_vs_second_half"],
        js_divergence(ref["counts_first_half"], ref["counts_second_half"]),
    )
