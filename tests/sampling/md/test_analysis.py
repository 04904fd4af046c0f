"""Histograms, JS/KL divergences, free energies and the run analysis on analytic cases."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import norm

from sci_moe.sampling.md.analysis import (
    angle_histogram,
    boltzmann_histogram,
    free_energy,
    histogram,
    js_divergence,
    kl_divergence,
    pmf_error,
    read_log,
    reference_histogram,
)


def test_js_divergence_analytic_cases():
    p = np.array([0.5, 0.5, 0.0, 0.0])
    q = np.array([0.0, 0.0, 0.2, 0.8])
    assert js_divergence(p, p) == pytest.approx(0.0, abs=1e-15)
    assert js_divergence(p, q) == pytest.approx(math.log(2))  # disjoint supports
    # Bernoulli(a) vs Bernoulli(b) in closed form.
    a, b = 0.2, 0.7
    m = 0.5 * (a + b)

    def kl(x, y):
        return x * math.log(x / y) + (1 - x) * math.log((1 - x) / (1 - y))

    assert js_divergence([a, 1 - a], [b, 1 - b]) == pytest.approx(0.5 * kl(a, m) + 0.5 * kl(b, m))
    assert kl_divergence([a, 1 - a], [b, 1 - b]) == pytest.approx(kl(a, b))
    assert kl_divergence(p, q) == math.inf


def test_js_matches_scipy_and_is_symmetric():
    rng = np.random.default_rng(0)
    p, q = rng.random((8, 8)), rng.random((8, 8)) * (rng.random((8, 8)) > 0.3)
    ref = jensenshannon(p.ravel() / p.sum(), q.ravel() / q.sum()) ** 2
    assert js_divergence(p, q) == pytest.approx(ref, rel=1e-10)
    assert js_divergence(q, p) == pytest.approx(js_divergence(p, q), rel=1e-12)
    with pytest.raises(ValueError, match="shape"):
        js_divergence(p, q[:4])
    with pytest.raises(ValueError, match="positive mass"):
        js_divergence(np.zeros(3), np.ones(3))


def test_angle_histogram_wraps_and_normalises():
    angles = np.array([[np.pi, -np.pi], [0.0, 0.0], [3 * np.pi, 0.0]])
    p, edges = angle_histogram(angles, bins=4)
    assert p.sum() == pytest.approx(1.0)
    assert p[0, 0] == pytest.approx(1 / 3)  # +pi wraps onto -pi, not dropped
    assert p[0, 2] == pytest.approx(1 / 3)  # 3 pi == -pi
    assert edges[0][0] == pytest.approx(-np.pi) and edges[0][-1] == pytest.approx(np.pi)
    with pytest.raises(ValueError, match=r"\(F, 2\)"):
        angle_histogram(np.zeros((3, 3)))


def test_free_energy_and_pmf_error():
    p = np.array([0.5, 0.25, 0.25, 0.0])
    f = free_energy(p, kT=2.0)
    assert f[0] == 0.0 and f[1] == pytest.approx(2.0 * math.log(2)) and np.isinf(f[3])
    assert pmf_error(p, p) == 0.0
    q = np.array([0.25, 0.25, 0.5, 0.0])
    expect = 0.375 * math.log(2) ** 2 + 0.375 * math.log(2) ** 2
    assert pmf_error(p, q) == pytest.approx(expect)


def test_boltzmann_histogram_harmonic_is_gaussian():
    kT, k = 1.5, 3.0
    _, edges = histogram(np.zeros((1, 1)), 20, [(-2.0, 2.0)])
    p = boltzmann_histogram(lambda x: 0.5 * k * x[:, 0] ** 2, kT, edges, subdivisions=32)
    sd = math.sqrt(kT / k)
    cdf = norm.cdf(edges[0], scale=sd)
    exact = np.diff(cdf) / (cdf[-1] - cdf[0])
    np.testing.assert_allclose(p, exact, atol=2e-5)
    # 2-D separable case: the product of the marginals.
    _, e2 = histogram(np.zeros((1, 2)), [6, 5], [(-2, 2), (-1, 1)])
    p2 = boltzmann_histogram(lambda x: 0.5 * k * (x**2).sum(1), kT, e2, subdivisions=32)
    px = boltzmann_histogram(lambda x: 0.5 * k * x[:, 0] ** 2, kT, e2[:1], subdivisions=32)
    py = boltzmann_histogram(lambda x: 0.5 * k * x[:, 0] ** 2, kT, e2[1:], subdivisions=32)
    np.testing.assert_allclose(p2, np.outer(px, py), atol=1e-12)


def test_samples_converge_to_reference():
    rng = np.random.default_rng(1)
    _, edges = histogram(np.zeros((1, 1)), 16, [(-3.0, 3.0)])
    exact = boltzmann_histogram(lambda x: 0.5 * x[:, 0] ** 2, 1.0, edges, subdivisions=32)
    small = histogram(rng.normal(size=(500, 1)), 16, [(-3.0, 3.0)])[0]
    large = histogram(rng.normal(size=(50_000, 1)), 16, [(-3.0, 3.0)])[0]
    assert js_divergence(exact, large) < js_divergence(exact, small) < 0.05


def test_read_log_and_reference_npz(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text(
        "step,time_ps,potential_energy_kj_mol,temperature_k\n10,0.01,-5.0,\n20,0.02,-4,300\n"
    )
    cols = read_log(log)
    assert cols["step"].tolist() == [10, 20] and np.isnan(cols["temperature_k"][0])
    hist = np.ones((4, 4))
    np.savez(tmp_path / "h.npz", histogram=hist)
    ref = reference_histogram(tmp_path / "h.npz", bins=4)
    p = ref["p"]
    assert set(ref) >= {"p", "counts", "edges", "description", "metadata"}
    assert p.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="cannot be merged"):
        reference_histogram(tmp_path / "h.npz", bins=3)
    counts = np.arange(16.0).reshape(4, 4)
    np.savez(tmp_path / "c.npz", counts=counts, metadata=np.array('{"a": 1}'))
    ref = reference_histogram(tmp_path / "c.npz", bins=2)  # 4 x 4 merged into 2 x 2
    p, desc = ref["p"], ref["description"]
    np.testing.assert_allclose(p, np.array([[10, 18], [42, 50]]) / 120)
    np.testing.assert_array_equal(ref["counts"], [[10, 18], [42, 50]])
    assert "counts" in desc and ref["metadata"] == {"a": 1} and ref["edges"].shape == (3,)
    np.savez(tmp_path / "a.npz", phi_psi=np.zeros((5, 2)))
    ref = reference_histogram(tmp_path / "a.npz", bins=4)
    p, desc = ref["p"], ref["description"]
    assert ref["counts"][2, 2] == 5
    assert p[2, 2] == 1.0 and "5 frames" in desc
    np.savez(tmp_path / "x.npz", other=np.zeros(3))
    with pytest.raises(ValueError, match="none of"):
        reference_histogram(tmp_path / "x.npz", bins=4)
    json.dumps({"ok": float(p.sum())})


def test_langevin_walkers_match_exact_boltzmann_histogram():
    """End to end: Simulation + reporter samples vs the exact density (and the test can fail:
    the density at the wrong temperature is much further away)."""
    import torch

    from sci_moe.sampling.md import DoubleWell, LangevinBAOAB, PotentialForces
    from sci_moe.sampling.md.reporters import Reporter
    from sci_moe.sampling.md.simulation import Simulation

    class Keep(Reporter):
        include = frozenset({"positions"})

        def __init__(self, interval):
            super().__init__(interval)
            self.frames = []

        def report(self, simulation, snapshot):
            self.frames.append(snapshot.positions[:, 0, 0].copy())

    pot = DoubleWell(dim=1, barrier=1.0)
    keep = Keep(10)
    x0 = torch.linspace(-1.5, 1.5, 128, dtype=torch.float64).view(128, 1, 1)
    sim = Simulation(
        PotentialForces(pot), LangevinBAOAB(0.02, kT=1.0, friction_per_ps=2.0), x0, [keep], seed=0
    )
    sim.run(1500)
    x = np.concatenate(keep.frames[20:])[:, None]
    p, edges = histogram(x, 24, [(-2.4, 2.4)])

    def energy(g, kT=1.0):
        return pot(torch.as_tensor(g)[:, None, :]).numpy()

    exact = boltzmann_histogram(energy, 1.0, edges)
    wrong = boltzmann_histogram(energy, 2.0, edges)
    js = js_divergence(exact, p)
    assert js < 0.004
    assert js_divergence(wrong, p) > 5 * js


def test_alanine_phi_psi_of_a_coarse_grained_subset():
    from sci_moe.sampling.md import (
        BACKBONE_ATOMS,
        alanine_dipeptide_pdb,
        phi_psi,
    )
    from sci_moe.sampling.md.analysis import alanine_phi_psi
    from sci_moe.sampling.md.systems import load_pdb

    _, pos = load_pdb(alanine_dipeptide_pdb())
    rng = np.random.default_rng(0)
    frames = pos[None] + 0.01 * rng.normal(size=(4, 22, 3))
    full = phi_psi(frames)
    np.testing.assert_allclose(alanine_phi_psi(frames), full)
    np.testing.assert_allclose(
        alanine_phi_psi(frames[:, list(BACKBONE_ATOMS)], BACKBONE_ATOMS), full
    )
    with pytest.raises(ValueError, match="backbone"):
        alanine_phi_psi(frames[:, :5], [0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="22 atoms"):
        alanine_phi_psi(frames[:, :5])


def test_shipped_reference_prefers_the_matching_force_field(tmp_path, monkeypatch):
    from sci_moe.sampling.md import analysis, reference

    monkeypatch.setattr(reference, "shipped_files_dir", lambda: tmp_path)
    monkeypatch.setattr(reference, "shipped_files", lambda pattern: sorted(tmp_path.glob(pattern)))
    assert analysis.shipped_reference() is None
    for name in ("amber14_obc2_300K", "amber99sbildn_obc_300K"):
        np.savez(tmp_path / f"alanine_dipeptide_reference_{name}.npz", counts=np.ones((4, 4)))
    assert analysis.shipped_reference().name.endswith("amber99sbildn_obc_300K.npz")
    assert analysis.shipped_reference("amber14", "obc2", 300.0).name.endswith("obc2_300K.npz")
    # No exact match: any shipped reference rather than none.
    assert analysis.shipped_reference("charmm36", None, 350) is not None


def test_shipped_files_found_by_importlib_resources():
    """The files the field needs at run time are package data of sci_moe.sampling."""
    from importlib import resources

    from sci_moe.sampling.diffusion import ALANINE_MODEL
    from sci_moe.sampling.md import alanine_dipeptide_pdb, shipped_file, shipped_reference

    folder = resources.files("sci_moe.sampling").joinpath("files")
    for name in (
        "alanine-dipeptide.pdb",
        "alanine_dipeptide_reference_amber99sbildn_obc_300K.npz",
        "alanine_energy_model.safetensors",
    ):
        assert folder.joinpath(name).is_file()
        assert shipped_file(name).samefile(str(folder.joinpath(name)))
    assert alanine_dipeptide_pdb().name == "alanine-dipeptide.pdb"
    assert shipped_reference().parent == ALANINE_MODEL.parent == alanine_dipeptide_pdb().parent
    with pytest.raises(FileNotFoundError, match="reinstall"):
        shipped_file("no-such-file.npz")
