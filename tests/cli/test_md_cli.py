"""``sci-moe md run|analyse``: outputs, resolved config, hard-kill resume, bad input -> exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sci_moe.cli.main import main

TOY = ["run", "--system", "double-well", "--no-progress", "--report-interval", "10"]


def _run(argv, capsys=None):
    code = main(["md", *argv])
    out = capsys.readouterr() if capsys is not None else None
    return code, out


def test_toy_run_writes_outputs_and_analyses(tmp_path, capsys):
    out = tmp_path / "run"
    code, cap = _run(
        [*TOY, "--walkers", "2", "--steps", "200", "--seed", "3", "--out", str(out)], capsys
    )
    assert code == 0, cap.err
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "checkpoint.pt",
        "config.yaml",
        "log.csv",
        "manifest.json",
        "topology.pdb",
        "trajectory_w000.dcd",
        "trajectory_w001.dcd",
    ]
    import yaml

    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["system"] == "double-well" and cfg["timestep_fs"] == 10.0 and cfg["kt"] == 1.0
    assert cfg["seed"] == 3 and cfg["walkers"] == 2 and cfg["extra"]["engine"] == "torch"
    assert len((out / "log.csv").read_text().splitlines()) == 21
    code, cap = _run(["analyse", str(out), "--bins", "20", "--burn-in-ps", "1.0"], capsys)
    assert code == 0, cap.err
    res = json.loads((out / "analysis.json").read_text())
    assert res["frames"] == 2 * (20 - 9) and 0 <= res["js_divergence"] <= np.log(2)
    assert "JS divergence" in cap.out
    assert (out / "density.png").stat().st_size > 0 and (out / "traces.png").stat().st_size > 0


def test_config_file_and_flag_override(tmp_path, capsys):
    conf = tmp_path / "md.toml"
    conf.write_text('system = "muller-brown"\nsteps = 30\nseed = 1\nreport-interval = 10\n')
    out = tmp_path / "run"
    code, cap = _run(
        ["run", "--config", str(conf), "--steps", "20", "--no-progress", "--out", str(out)], capsys
    )
    assert code == 0, cap.err
    import yaml

    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["system"] == "muller-brown" and cfg["steps"] == 20 and cfg["seed"] == 1


def _files(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


_KILL = textwrap.dedent(
    """
    import os, signal, sys
    from sci_moe.sampling.md import reporters
    from sci_moe.cli.main import main

    original = reporters.LogReporter.report

    def report(self, simulation, snapshot):
        original(self, simulation, snapshot)
        if snapshot.step == 170:  # after the checkpoint at 150, before the next one
            os.kill(os.getpid(), signal.SIGKILL)

    reporters.LogReporter.report = report
    sys.exit(main(sys.argv[1:]))
    """
)


def test_resume_after_hard_kill_equals_uninterrupted(tmp_path, capsys):
    args = [
        *TOY,
        "--walkers",
        "2",
        "--steps",
        "300",
        "--checkpoint-interval",
        "50",
        "--trajectory-format",
        "xtc",
        "--seed",
        "5",
    ]
    full, run = tmp_path / "full", tmp_path / "run"
    assert _run([*args, "--out", str(full)])[0] == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _KILL, "md", *args, "--out", str(run)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    rows = (run / "log.csv").read_text().splitlines()
    assert rows[-1].startswith("170,")  # frames beyond the last checkpoint (150) were written
    capsys.readouterr()
    code, cap = _run(["run", "--out", str(run), "--resume", "--no-progress"], capsys)
    assert code == 0, cap.err
    assert "resuming" in cap.out and "from step 150" in cap.out
    import mdtraj

    for w in ("w000", "w001"):
        a = mdtraj.load(str(full / f"trajectory_{w}.xtc"), top=str(full / "topology.pdb"))
        b = mdtraj.load(str(run / f"trajectory_{w}.xtc"), top=str(run / "topology.pdb"))
        assert a.n_frames == b.n_frames == 30
        np.testing.assert_array_equal(a.xyz, b.xyz)
        np.testing.assert_array_equal(a.time, b.time)
    strip = lambda p: [",".join(r.split(",")[:4]) for r in p.read_text().splitlines()]  # noqa: E731
    assert strip(run / "log.csv") == strip(full / "log.csv")


def test_refuses_non_empty_out_and_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, cap = _run([*TOY, "--steps", "20", "--out", str(out)], capsys)
    assert code == 2 and "not empty" in cap.err
    assert _files(out) == {"notes.txt": b"mine"}
    code, cap = _run([*TOY, "--steps", "20", "--out", str(out), "--overwrite"], capsys)
    assert code == 0 and (out / "notes.txt").read_text() == "mine"
    code, cap = _run([*TOY, "--steps", "20", "--out", str(out)], capsys)
    assert code == 2


def _bad_model_files(tmp_path):
    import torch
    from safetensors.torch import save_file

    wrong = tmp_path / "wrong.safetensors"
    save_file(
        {"w": torch.zeros(2)}, str(wrong), metadata={"sci_moe": json.dumps({"kind": "spice"})}
    )
    bare = tmp_path / "bare.safetensors"
    save_file({"w": torch.zeros(2)}, str(bare))
    pickle = tmp_path / "model.pt"
    torch.save({"w": torch.zeros(2)}, pickle)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file")
    return {
        "wrong": (wrong, "kind 'spice'"),
        "bare": (bare, "no 'sci_moe' metadata"),
        "pickle": (pickle, "never loaded"),
        "junk": (junk, "not a valid safetensors"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "negative-timestep",
        "both-lengths",
        "unknown-system",
        "malformed-pdb",
        "missing-templates",
        "missing-pdb",
        "model-wrong",
        "model-bare",
        "model-pickle",
        "model-junk",
        "resume-nothing",
        "bad-config-key",
        "toy-on-openmm",
        "bad-device",
    ],
)
def test_bad_input_exit_2_nothing_written(tmp_path, capsys, case):
    out = tmp_path / "out"
    argv = ["run", "--steps", "10", "--no-progress", "--out", str(out)]
    expect = {
        "negative-timestep": (["--timestep-fs", "-1"], "timestep_fs must be"),
        "both-lengths": (["--time-ns", "1"], "either steps or time_ns"),
        "unknown-system": (["--system", "argon-gas"], "unknown system 'argon-gas'"),
        "missing-pdb": (["--system", str(tmp_path / "nope.pdb")], "does not exist"),
        "resume-nothing": (["--resume"], "no checkpoint.pt"),
        "toy-on-openmm": (["--system", "muller-brown", "--engine", "openmm"], "analytic"),
        "bad-device": (["--device", "tpu"], "device must be"),
    }
    if case == "malformed-pdb":
        bad = tmp_path / "bad.pdb"
        bad.write_text("ATOM      1  N   ALA A   1      xx.xxx  11.000  12.000\nEND\n")
        expect[case] = (["--system", str(bad)], "cannot read PDB")
    if case == "missing-templates":
        pdb = tmp_path / "odd.pdb"
        pdb.write_text(
            "HETATM    1  C1  XYZ A   1       0.000   0.000   0.000  1.00  0.00           C\n"
            "HETATM    2  O1  XYZ A   1       1.200   0.000   0.000  1.00  0.00           O\n"
            "END\n"
        )
        expect[case] = (["--system", str(pdb)], "cannot parameterise")
    if case.startswith("model-"):
        path, msg = _bad_model_files(tmp_path)[case[6:]]
        expect[case] = (["--model", str(path)], msg)
    if case == "bad-config-key":
        conf = tmp_path / "c.yaml"
        conf.write_text("timestep: 2\n")
        expect[case] = (["--config", str(conf)], "unknown key 'timestep'")
    extra, msg = expect[case]
    code, cap = _run([*argv, *extra], capsys)
    assert code == 2, (cap.out, cap.err)
    assert msg in cap.err
    assert not out.exists()


def test_resume_refuses_physics_changes(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run([*TOY, "--steps", "20", "--out", str(out)], capsys)[0] == 0
    before = _files(out)
    code, cap = _run(["run", "--out", str(out), "--resume", "--kt", "2.0"], capsys)
    assert code == 2 and "cannot change kt" in cap.err
    assert _files(out) == before
    # Extending a finished run is allowed.
    code, cap = _run(
        ["run", "--out", str(out), "--resume", "--steps", "30", "--no-progress"], capsys
    )
    assert code == 0 and "from step 20" in cap.out
    assert len((out / "log.csv").read_text().splitlines()) == 4


def test_instability_exit_1_with_failure_report(tmp_path, capsys):
    out = tmp_path / "run"
    code, cap = _run(
        [
            *TOY,
            "--steps",
            "500",
            "--timestep-fs",
            "900",
            "--energy-jump-kj-mol",
            "50",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 1 and "MD stopped at step" in cap.err
    report = json.loads((out / "failure.json").read_text())
    assert report["step"] >= 1 and "jumped" in report["cause"]
    import torch

    state = torch.load(out / "failure_state.pt", weights_only=True)
    assert state["step"] == report["step"] and state["positions"].shape == (1, 1, 1)
    assert abs(float(state["potential_energy"][0])) > 50


def test_default_run_is_alanine_dipeptide(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, cap = _run(["run", "--steps", "20", "--report-interval", "10", "--no-progress"], capsys)
    assert code == 0, cap.err
    assert "no system given: simulating alanine dipeptide" in cap.out
    out = tmp_path / "md_out"
    assert (out / "trajectory.dcd").is_file() and (out / "topology.pdb").is_file()
    # Ramachandran analysis against the run's own trajectory as reference: JS = 0.
    code, cap = _run(
        ["analyse", str(out), "--reference", str(out / "trajectory.dcd"), "--json", "a.json"],
        capsys,
    )
    assert code == 0, cap.err
    res = json.loads((tmp_path / "a.json").read_text())
    assert res["js_divergence"] == pytest.approx(0.0, abs=1e-12) and res["frames"] == 2
    assert (out / "ramachandran.png").is_file()


def test_learned_model_run(tmp_path, capsys):
    diffusion = pytest.importorskip("sci_moe.sampling.diffusion")
    if not hasattr(diffusion, "save_energy_model"):
        pytest.skip("no save_energy_model")
    import torch

    from sci_moe.sampling.diffusion import VPSDE, MLPEnergy, save_energy_model

    torch.manual_seed(0)
    net = MLPEnergy((1, 2), hidden=(8,))
    path = save_energy_model(net, tmp_path / "mb.safetensors", sde=VPSDE(), kT=23.0, t_eval=0.0)
    out = tmp_path / "run"
    code, cap = _run(
        [
            "run",
            "--system",
            "muller-brown",
            "--model",
            str(path),
            "--steps",
            "20",
            "--report-interval",
            "10",
            "--walkers",
            "4",
            "--no-progress",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, cap.err
    assert "learned model mb.safetensors" in cap.out
    assert len(list(out.glob("trajectory_w*.dcd"))) == 4


def test_max_hours_then_resume(tmp_path, capsys):
    out = tmp_path / "run"
    code, cap = _run([*TOY, "--steps", "50", "--max-hours", "1e-12", "--out", str(out)], capsys)
    assert code == 0 and "stopped by --max-hours at step 1 " in cap.out
    # The limit is stored with the run and applies to every invocation: override it.
    code, cap = _run(
        ["run", "--out", str(out), "--resume", "--max-hours", "100", "--no-progress"], capsys
    )
    assert code == 0 and "from step 1 of 50" in cap.out
    rows = (out / "log.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == [10, 20, 30, 40, 50]


def test_coarse_grained_model_run_and_analysis(tmp_path, capsys):
    """A model of the 5 backbone atoms (like the shipped one): subset topology, phi/psi."""
    diffusion = pytest.importorskip("sci_moe.sampling.diffusion")
    if not hasattr(diffusion, "save_energy_model"):
        pytest.skip("no save_energy_model")
    import torch

    from sci_moe.sampling.diffusion import VPSDE, MLPEnergy, save_energy_model
    from sci_moe.sampling.md import BACKBONE_ATOMS

    torch.manual_seed(0)
    path = save_energy_model(
        MLPEnergy((5, 3), hidden=(8,)), tmp_path / "cg.safetensors", sde=VPSDE(), kT=2.494,
        masses=[12.0, 14.0, 12.0, 12.0, 14.0], atom_indices=BACKBONE_ATOMS,
    )  # fmt: skip
    out = tmp_path / "run"
    code, cap = _run(
        ["run", "--model", str(path), "--steps", "30", "--report-interval", "10",
         "--no-progress", "--out", str(out)],
        capsys,
    )  # fmt: skip
    assert code == 0, cap.err
    import mdtraj

    traj = mdtraj.load(str(out / "trajectory.dcd"), top=str(out / "topology.pdb"))
    assert traj.n_atoms == 5 and traj.n_frames == 3
    ref = tmp_path / "ref.npz"
    np.savez(ref, phi_psi=np.zeros((10, 2)))
    code, cap = _run(["analyse", str(out), "--reference", str(ref)], capsys)
    assert code == 0, cap.err
    res = json.loads((out / "analysis.json").read_text())
    assert res["frames"] == 3 and res["js_divergence"] > 0


def test_pdb_input_with_force_field(tmp_path, capsys):
    from sci_moe.sampling.md import alanine_dipeptide_pdb

    out = tmp_path / "run"
    argv = ["run", "--system", str(alanine_dipeptide_pdb()), "--forcefield", "amber14"]
    argv += ["--implicit-solvent", "obc2", "--steps", "20", "--report-interval", "10"]
    code, cap = _run([*argv, "--no-progress", "--out", str(out)], capsys)
    assert code == 0, cap.err
    assert "alanine-dipeptide.pdb, amber14 + obc2: openmm engine" in cap.out
    assert len((out / "log.csv").read_text().splitlines()) == 3


def test_sigterm_stops_cleanly_with_checkpoint(tmp_path, capsys, monkeypatch):
    from sci_moe.sampling.md import reporters

    original = reporters.LogReporter.report

    def report(self, simulation, snapshot):
        original(self, simulation, snapshot)
        if snapshot.step == 30:
            os.kill(os.getpid(), signal.SIGTERM)  # as a batch scheduler does at its limit

    monkeypatch.setattr(reporters.LogReporter, "report", report)
    out, full = tmp_path / "run", tmp_path / "full"
    args = [*TOY, "--steps", "60", "--checkpoint-interval", "1000", "--seed", "2"]
    before = signal.getsignal(signal.SIGTERM)
    code, cap = _run([*args, "--out", str(out)], capsys)
    assert code == 128 + signal.SIGTERM and "stopped by SIGTERM at step 30" in cap.out
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    monkeypatch.setattr(reporters.LogReporter, "report", original)
    code, cap = _run(["run", "--out", str(out), "--resume", "--no-progress"], capsys)
    assert code == 0 and "from step 30" in cap.out
    assert _run([*args, "--out", str(full)])[0] == 0
    import mdtraj

    a, b = (
        mdtraj.load(str(d / "trajectory.dcd"), top=str(d / "topology.pdb")) for d in (out, full)
    )
    assert a.n_frames == 6
    np.testing.assert_array_equal(a.xyz, b.xyz)


def test_default_run_uses_the_shipped_model_when_present(tmp_path, capsys, monkeypatch):
    diffusion = pytest.importorskip("sci_moe.sampling.diffusion")
    if not hasattr(diffusion, "save_energy_model"):
        pytest.skip("no save_energy_model")
    import torch

    from sci_moe.sampling.diffusion import VPSDE, MLPEnergy, save_energy_model
    from sci_moe.sampling.md import BACKBONE_ATOMS, systems

    torch.manual_seed(0)
    path = save_energy_model(
        MLPEnergy((5, 3), hidden=(8,)), tmp_path / "alanine_energy_model.safetensors",
        sde=VPSDE(), kT=2.494, masses=[12.0, 14.0, 12.0, 12.0, 14.0],
        atom_indices=BACKBONE_ATOMS,
    )  # fmt: skip
    import sci_moe.sampling.md as md

    monkeypatch.setattr(systems, "default_model_path", lambda: path)
    monkeypatch.setattr(md, "default_model_path", lambda: path)  # what the CLI calls
    out = tmp_path / "run"
    code, cap = _run(["run", "--steps", "10", "--no-progress", "--out", str(out)], capsys)
    assert code == 0, cap.err
    assert "with the shipped learned model alanine_energy_model.safetensors" in cap.out
    assert "torch engine" in cap.out
    import yaml

    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["model"] == str(path) and cfg["extra"]["atom_indices"] == list(BACKBONE_ATOMS)


def test_analyse_names_reference_and_warns_on_force_field_mismatch(tmp_path, capsys):
    # Issue 27: an amber14 run was compared with the amber99sbildn reference without a word.
    from sci_moe.sampling.md import alanine_dipeptide_pdb

    out = tmp_path / "run"
    argv = ["run", "--system", str(alanine_dipeptide_pdb()), "--forcefield", "amber14"]
    argv += ["--implicit-solvent", "obc2", "--steps", "20", "--report-interval", "10"]
    code, cap = _run([*argv, "--no-progress", "--out", str(out)], capsys)
    assert code == 0, cap.err
    code, cap = _run(["analyse", str(out), "--bins", "16"], capsys)
    assert code == 0, cap.err
    assert "reference: alanine_dipeptide_reference_amber99sbildn_obc_300K.npz" in cap.out
    assert "(default; simulated with amber99sbildn + obc, 300 K)" in cap.out
    assert "PMF error" in cap.out and "(kT)^2" in cap.out
    assert "sci-moe md analyse: warning:" in cap.err
    assert "amber14 + obc2, 300 K" in cap.err and "amber99sbildn + obc, 300 K" in cap.err
    res = json.loads((out / "analysis.json").read_text())
    assert len(res["warnings"]) == 2 and res["units"]["pmf_error"] == "(kT)^2"  # + few frames
    assert res["reference_conditions"]["forcefield"] == "amber99sbildn"
    assert "mean_potential_energy_kj_mol" in res


def test_analyse_no_warning_when_reference_matches(tmp_path, capsys):
    out = tmp_path / "md_out"
    code, cap = _run(
        ["run", "--steps", "100", "--report-interval", "1", "--no-progress", "--out", str(out)],
        capsys,
    )  # 100 frames: no warning about too few frames either
    assert code == 0, cap.err
    code, cap = _run(["analyse", str(out), "--bins", "16"], capsys)
    assert code == 0, cap.err
    assert "warning" not in cap.err and "amber99sbildn + obc, 300 K" in cap.out
    assert json.loads((out / "analysis.json").read_text())["warnings"] == []


def test_analyse_toy_is_not_labelled_kj_mol_or_kelvin(tmp_path, capsys):
    out = tmp_path / "run"
    code, cap = _run([*TOY, "--steps", "100", "--out", str(out)], capsys)
    assert code == 0, cap.err
    code, cap = _run(["analyse", str(out), "--bins", "20"], capsys)
    assert code == 0, cap.err
    assert "kJ/mol" not in cap.out + cap.err and " K" not in cap.out + cap.err
    assert "PMF error" in cap.out and "(kT)^2" in cap.out
    text = (out / "analysis.json").read_text()
    assert "kj_mol" not in text and "temperature_k" not in text and "kJ/mol" not in text
    res = json.loads(text)
    assert res["units"]["energy"] == "reduced" and "mean_potential_energy" in res
