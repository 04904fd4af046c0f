"""Simulated tempering of OpenMM systems through ``ExpandedEnsembleSampler``.

A particle in a 3-D harmonic well has exact answers: configurational
:math:`Z_T \\propto T^{3/2}` (so :math:`g_l = -\\tfrac32\\log T_l` flattens the levels) and
:math:`\\langle U\\rangle_T = \\tfrac32 k_BT` (the check of OpenMM's own
``TestExpandedEnsembleSampler``). Alanine dipeptide (md-engine's ``build_system``) runs
a few hundred steps end to end.
"""

from __future__ import annotations

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u
import pytest

from sci_moe._util import BOLTZMANN_KJ_PER_MOL_K
from sci_moe.sampling.tempering import OpenMMSimulatedTempering, OpenMMTemperingConfig

TEMPS = np.geomspace(600.0, 300.0, 4)  # hottest first
EXACT_G = -1.5 * np.log(TEMPS / TEMPS[-1])


def harmonic_system(k=100.0):
    system = openmm.System()
    system.addParticle(12.0)
    f = openmm.CustomExternalForce("0.5*k*(x*x+y*y+z*z)")
    f.addGlobalParameter("k", k)
    f.addParticle(0, [])
    system.addForce(f)
    top = app.Topology()
    res = top.addResidue("X", top.addChain())
    top.addAtom("C", app.element.carbon, res)
    return top, system, np.array([[0.1, 0.0, 0.0]])


def run_harmonic(n_iter=1500, **kw):
    top, system, pos = harmonic_system()
    kw = {"temperatures_k": TEMPS, "steps_per_iteration": 10, "seed": 1, **kw}
    cfg = OpenMMTemperingConfig(record_positions=0, **kw)
    st = OpenMMSimulatedTempering.from_system(
        top, system, pos, cfg, timestep_ps=0.01, friction_per_ps=6.0, platform="Reference"
    )
    return st, st.run(n_iter, progress=False)


def check_equilibrium(res, burn=300, tol_hist=0.06):
    lv, e = res.sampled_levels[burn:], res.energies[burn:]
    L = TEMPS.size
    s = res.summary(burn_in=burn)
    assert np.all(np.abs(s["level_histogram"] - 1 / L) < tol_hist), s["level_histogram"]
    assert s["round_trips"] >= 10
    for l, T in enumerate(TEMPS):
        ratio = e[lv == l].mean() / (1.5 * BOLTZMANN_KJ_PER_MOL_K * T)
        assert 0.7 < ratio < 1.3, (l, ratio)  # the tolerance of OpenMM's own test
    return s


@pytest.mark.parametrize(("move", "velocities"), [("gibbs", "rescale"), ("neighbour", "resample")])
def test_exact_weights_give_flat_levels_and_boltzmann_energies(move, velocities):
    kw = {"weights": "given", "log_weights": EXACT_G, "move": move, "velocities": velocities}
    _, res = run_harmonic(n_iter=3000, **kw)
    s = check_equilibrium(res)
    assert np.allclose(res.log_weights, res.log_weights[0])  # given weights never change
    assert np.allclose(s["log_z_estimate"], -EXACT_G)
    assert np.all((s["level_acceptance"] > 0.5) & (s["level_acceptance"] <= 1))
    assert res.levels.shape == res.energies.shape == (3000,)
    # each move starts where the previous one ended
    assert np.array_equal(res.sampled_levels[1:], res.levels[:-1])
    assert res.sampled_levels[0] == TEMPS.size - 1  # starts at the target temperature


@pytest.mark.parametrize("mode", ["sams", "openmm"])
def test_adapted_weights_learn_log_partition_differences(mode):
    _, res = run_harmonic(n_iter=2500, weights=mode)
    assert np.abs(res.log_z_estimate() - (-EXACT_G)).max() < 0.25, res.log_z_estimate()
    check_equilibrium(res, burn=1000, tol_hist=0.08)


def test_seeded_runs_are_reproducible_and_continue():
    a_st, a = run_harmonic(n_iter=200, weights="sams", seed=3)
    _, b = run_harmonic(n_iter=200, weights="sams", seed=3)
    _, c = run_harmonic(n_iter=200, weights="sams", seed=4)
    assert np.array_equal(a.levels, b.levels) and np.array_equal(a.energies, b.energies)
    assert not np.array_equal(a.energies, c.energies)
    g_end = a_st.log_weights
    assert np.allclose(g_end, a.log_weights[-1])
    more = a_st.run(50, progress=False)  # continues: weights, gain schedule and level
    assert more.sampled_levels[0] == a.levels[-1]
    step = np.abs(more.log_weights[0] - g_end).max()
    assert 0 < step <= TEMPS.size * 201**-0.8  # SAMS gain at iteration 201, not 1


def test_alanine_dipeptide_short_run():
    from sci_moe.sampling.md import build_system, phi_psi

    top, system, pos = build_system(constraints="hbonds")
    cfg = OpenMMTemperingConfig(
        min_temperature_k=300.0,
        max_temperature_k=500.0,
        n_temperatures=4,
        steps_per_iteration=20,
        weights="park-pande",
        n_pilot_steps=100,
        record_positions=2,
        seed=0,
    )
    st = OpenMMSimulatedTempering.from_system(top, system, pos, cfg, platform="Reference")
    res = st.run(20, progress=False)  # 400 MD steps after the pilot runs
    assert res.positions.shape == (10, 22, 3)
    assert np.array_equal(res.position_iterations, np.arange(0, 20, 2))
    angles = phi_psi(res.positions)
    assert angles.shape == (10, 2) and np.isfinite(angles).all()
    assert np.all(np.isfinite(res.energies)) and np.all(res.energies < 0)  # kJ/mol, folded
    # Park-Pande: d log Z / d beta = <log p>_beta = -<E>/kT0 > 0 for these negative energies
    assert np.all(np.diff(res.log_z_estimate()) > 0)
    assert set(np.unique(res.sampled_levels)) <= set(range(4))
    s = res.summary()
    assert s["level_histogram"].sum() == pytest.approx(1.0)
    mask = res.target_frames()
    if mask.any():
        m, _ = res.target_mean((angles[:, 0] < 0).astype(float))
        assert 0.0 <= m <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperatures_k": [300.0, 400.0]}, "decreasing"),
        ({"temperatures_k": [300.0]}, "at least 2"),
        ({"min_temperature_k": 400.0, "max_temperature_k": 300.0}, "min_temperature_k"),
        ({"weights": "given"}, "needs log_weights"),
        ({"weights": "openmm", "move": "neighbour"}, "gibbs"),
        ({"log_weights": [0.0, 1.0]}, "one per level"),
        ({"move": "jump"}, "move"),
        ({"velocities": "keep"}, "velocities"),
        ({"steps_per_iteration": 0}, "steps_per_iteration"),
        ({"n_temperatures": 1}, "n_temperatures"),
    ],
)
def test_bad_configs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OpenMMTemperingConfig(**kwargs)


def test_config_ladder_matches_openmm_geometric_spacing():
    cfg = OpenMMTemperingConfig(min_temperature_k=300, max_temperature_k=450, n_temperatures=5)
    # OpenMM's SimulatedTempering: T_k = T_min (T_max/T_min)^(k/(n-1)), coldest first
    ref = [300 * (450 / 300) ** (k / 4) for k in range(5)]
    assert np.allclose(cfg.temperatures[::-1], ref)
    assert cfg.betas[-1] == 1.0 and np.all(np.diff(cfg.betas) > 0)


def test_integrator_without_temperature_raises():
    top, system, pos = harmonic_system()
    sim = app.Simulation(top, system, openmm.VerletIntegrator(0.001 * u.picoseconds))
    sim.context.setPositions(pos * u.nanometer)
    with pytest.raises(ValueError, match="setTemperature"):
        OpenMMSimulatedTempering(sim, OpenMMTemperingConfig(temperatures_k=TEMPS, weights="sams"))


# ----------------------------------------------------------------- checkpoint / resume


def build_harmonic(**kw):
    top, system, pos = harmonic_system()
    kw = {
        "temperatures_k": TEMPS,
        "steps_per_iteration": 10,
        "seed": 5,
        "record_positions": 3,
        **kw,
    }
    return OpenMMSimulatedTempering.from_system(
        top,
        system,
        pos,
        OpenMMTemperingConfig(**kw),
        timestep_ps=0.01,
        friction_per_ps=6.0,
        platform="Reference",
    )


def final_positions(st):
    state = st.simulation.context.getState(positions=True, velocities=True)
    return (
        state.getPositions(asNumpy=True).value_in_unit(u.nanometer),
        state.getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond),
    )


def assert_same_trace(a, b):
    for name in ("levels", "sampled_levels", "energies", "log_weights", "positions"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.position_iterations, b.position_iterations)
    assert np.array_equal(a.level_acceptance, b.level_acceptance)


def concat(r1, r2):
    return {
        "levels": np.concatenate([r1.levels, r2.levels]),
        "energies": np.concatenate([r1.energies, r2.energies]),
        "log_weights": np.concatenate([r1.log_weights, r2.log_weights]),
    }


# every seeded mode: online weights (SAMS; Wang-Landau kept in its halving stage 0 by a
# strict flatness, so its gain and histogram must be restored), OpenMM's own update (its random
# numbers come from our generator), Gibbs and neighbour moves, rescaled and seeded-redrawn
# velocities. (weights="openmm" with velocities="resample" redraws velocities with OpenMM's
# unseeded generator, so it is not reproducible and not tested here.)
SEEDED_MODES = [
    {"weights": "sams", "move": "gibbs", "velocities": "rescale"},
    {"weights": "wang-landau", "move": "neighbour", "velocities": "resample", "flatness": 0.03},
    {"weights": "openmm", "move": "gibbs", "velocities": "rescale"},
    {"weights": "park-pande", "n_pilot_steps": 20, "move": "neighbour", "velocities": "rescale"},
]


@pytest.mark.parametrize("kw", SEEDED_MODES, ids=lambda kw: kw["weights"])
def test_checkpoint_resume_is_bitwise_identical(tmp_path, kw):
    n = 60
    ref = build_harmonic(**kw)
    full = ref.run(2 * n, progress=False)
    ref_pos, ref_vel = final_positions(ref)

    path = tmp_path / "st.npz"
    first = build_harmonic(**kw)
    r1 = first.run(n, progress=False, checkpoint_path=path)  # written at the end
    del first
    resumed = build_harmonic(**kw)
    resumed.load_checkpoint(path)
    assert resumed.current_level == int(r1.levels[-1])
    assert np.array_equal(resumed.log_weights, r1.log_weights[-1])
    r2 = resumed.run(n, progress=False)
    both = concat(r1, r2)
    assert np.array_equal(both["levels"], full.levels)
    assert np.array_equal(both["energies"], full.energies)
    assert np.array_equal(both["log_weights"], full.log_weights)
    assert np.array_equal(r2.sampled_levels[0], r1.levels[-1])
    pos, vel = final_positions(resumed)
    assert np.array_equal(pos, ref_pos) and np.array_equal(vel, ref_vel)
    assert len(np.unique(full.levels)) > 1  # the chain moved between levels
    if kw["weights"] in ("sams", "wang-landau", "openmm"):
        assert not np.allclose(full.log_weights[0], full.log_weights[-1])  # weights adapted


def test_killed_run_resumes_from_last_interval(tmp_path):
    kw = SEEDED_MODES[0]
    ref = build_harmonic(**kw)
    full = ref.run(70, progress=False)
    ref_pos, _ = final_positions(ref)

    path = tmp_path / "st.npz"
    killed = build_harmonic(**kw)
    calls = {"n": 0}
    step = killed.simulation.step

    def dying_step(n_steps):
        calls["n"] += 1
        if calls["n"] == 4:  # killed during the 4th block of 20 iterations
            raise KeyboardInterrupt
        step(n_steps)

    killed.simulation.step = dying_step
    with pytest.raises(KeyboardInterrupt):
        killed.run(70, progress=False, checkpoint_path=path, checkpoint_interval=20)

    resumed = build_harmonic(**kw)
    resumed.load_checkpoint(path)  # 60 iterations done, 10 to go
    with pytest.raises(ValueError, match=r"call run\(70\)"):
        resumed.run(10, progress=False)
    res = resumed.run(70, progress=False, checkpoint_path=path, checkpoint_interval=20)
    assert_same_trace(res, full)  # the whole run's trace, as if never interrupted
    assert np.array_equal(final_positions(resumed)[0], ref_pos)
    # the end-of-run checkpoint is a finished run: the next run() starts a new trace
    again = build_harmonic(**kw)
    again.load_checkpoint(path)
    assert again.run(5, progress=False).levels.shape == (5,)


def test_checkpoint_of_other_config_or_system_is_refused(tmp_path):
    path = tmp_path / "st.npz"
    st = build_harmonic(weights="sams")
    st.run(5, progress=False, checkpoint_path=path)
    with pytest.raises(ValueError, match=r"different config.*seed"):
        build_harmonic(weights="sams", seed=6).load_checkpoint(path)
    with pytest.raises(ValueError, match=r"different config.*weights"):
        build_harmonic(weights="wang-landau").load_checkpoint(path)
    with pytest.raises(ValueError, match=r"different config.*temperatures_k"):
        build_harmonic(weights="sams", temperatures_k=TEMPS * 1.01).load_checkpoint(path)
    top, system, pos = harmonic_system(k=50.0)
    cfg = OpenMMTemperingConfig(
        temperatures_k=TEMPS, steps_per_iteration=10, seed=5, record_positions=3, weights="sams"
    )
    other = OpenMMSimulatedTempering.from_system(
        top, system, pos, cfg, timestep_ps=0.01, friction_per_ps=6.0, platform="Reference"
    )
    with pytest.raises(ValueError, match="different system"):
        other.load_checkpoint(path)
    with pytest.raises(ValueError, match="freshly built"):
        st.load_checkpoint(path)  # has already run
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not readable"):
        build_harmonic(weights="sams").load_checkpoint(junk)
    with pytest.raises(ValueError, match="checkpoint_path"):
        build_harmonic(weights="sams").run(5, progress=False, checkpoint_interval=2)


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    import os

    path = tmp_path / "st.npz"
    st = build_harmonic(weights="sams")
    st.run(10, progress=False, checkpoint_path=path)
    before = path.read_bytes()

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        st.run(10, progress=False, checkpoint_path=path)
    monkeypatch.undo()
    assert path.read_bytes() == before  # untouched, and no temporary file left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["st.npz"]
    fresh = build_harmonic(weights="sams")
    fresh.load_checkpoint(path)
    assert fresh.current_level == st._trace["sampled"][0]  # level at the end of run 1


def test_portable_restore_continues_from_same_state(tmp_path):
    path = tmp_path / "st.npz"
    st = build_harmonic(weights="sams")
    st.run(10, progress=False, checkpoint_path=path)
    pos, vel = final_positions(st)
    fresh = build_harmonic(weights="sams")
    fresh.load_checkpoint(path, exact=False)
    pos2, vel2 = final_positions(fresh)
    assert np.array_equal(pos, pos2) and np.array_equal(vel, vel2)
    assert fresh.simulation.currentStep == st.simulation.currentStep
    assert np.array_equal(fresh.log_weights, st.log_weights)
    assert fresh.run(5, progress=False).sampled_levels[0] == st.current_level


def test_alanine_cpu_resume_with_constraints_is_bitwise(tmp_path):
    from sci_moe.sampling.md import build_system

    top, system, pos = build_system(constraints="hbonds")

    def make():
        cfg = OpenMMTemperingConfig(
            min_temperature_k=300.0,
            max_temperature_k=500.0,
            n_temperatures=4,
            steps_per_iteration=20,
            weights="sams",
            record_positions=2,
            seed=0,
        )
        return OpenMMSimulatedTempering.from_system(top, system, pos, cfg, platform="CPU")

    full = make().run(16, progress=False)
    path = tmp_path / "ala.npz"
    r1 = make().run(8, progress=False, checkpoint_path=path)
    resumed = make()
    resumed.load_checkpoint(path)
    r2 = resumed.run(8, progress=False)
    assert np.array_equal(np.concatenate([r1.energies, r2.energies]), full.energies)
    assert np.array_equal(np.concatenate([r1.positions, r2.positions]), full.positions)


def test_checkpoint_of_the_first_npz_format_is_still_read(tmp_path):
    import json

    from sci_moe.sampling.tempering.openmm_checkpoint import (
        LEGACY_CHECKPOINT_FORMAT,
        read_checkpoint,
    )

    path = tmp_path / "st.ckpt"
    st = build_harmonic(weights="sams")
    st.run(10, progress=False, checkpoint_path=path)
    meta, arrays = read_checkpoint(path)
    legacy = tmp_path / "legacy.npz"
    meta["format"] = LEGACY_CHECKPOINT_FORMAT
    np.savez(legacy, meta=np.array(json.dumps(meta)), **arrays)
    a, b = build_harmonic(weights="sams"), build_harmonic(weights="sams")
    a.load_checkpoint(path)
    b.load_checkpoint(legacy)
    assert a.current_level == b.current_level == st.current_level
    assert np.array_equal(a.log_weights, b.log_weights)
    assert a._online.gamma == b._online.gamma and np.array_equal(a._online.hist, b._online.hist)
    assert a._rng.bit_generator.state == b._rng.bit_generator.state
    for x, y in zip(final_positions(a), final_positions(b), strict=True):
        assert np.array_equal(x, y)
