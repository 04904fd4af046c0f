"""MDConfig validation, TOML/YAML files, override precedence, resolved-config round trip."""

from __future__ import annotations

import pytest

from sci_moe.sampling.md.config import (
    MDConfig,
    load_config_file,
    resolve_config,
    write_config,
)


def test_defaults_are_valid_and_resolved():
    cfg = MDConfig()
    assert cfg.timestep_fs == 1.0 and cfg.n_steps == 10_000 and cfg.kt is None
    toy = MDConfig(system="muller-brown")
    assert toy.timestep_fs == 5.0 and toy.kt == 23.0 and toy.is_toy
    assert MDConfig(time_ns=0.002, timestep_fs=2.0).n_steps == 1000


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"timestep_fs": -1.0}, "timestep_fs"),
        ({"temperature_k": 0.0}, "temperature_k"),
        ({"friction_per_ps": -2.0}, "friction"),
        ({"steps": 10, "time_ns": 1.0}, "either"),
        ({"steps": 1.5}, "steps"),
        ({"walkers": 0}, "walkers"),
        ({"report_interval": -5}, "report_interval"),
        ({"seed": -1}, "seed"),
        ({"engine": "gromacs"}, "engine"),
        ({"trajectory_format": "pdb"}, "trajectory_format"),
        ({"integrator": "overdamped", "engine": "openmm"}, "overdamped"),
        ({"max_hours": 0.0}, "max_hours"),
    ],
)
def test_bad_values_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MDConfig(**kwargs)


def test_none_strings_mean_none():
    cfg = MDConfig(implicit_solvent="none", constraints="None", model="")
    assert cfg.implicit_solvent is None and cfg.constraints is None and cfg.model is None


def test_toml_yaml_and_override_precedence(tmp_path):
    toml = tmp_path / "md.toml"
    toml.write_text('[md]\nsystem = "double-well"\ntimestep-fs = 2.0\nsteps = 50\nseed = 4\n')
    yaml_file = tmp_path / "md.yaml"
    yaml_file.write_text("system: double-well\ntimestep_fs: 2.0\nsteps: 50\nseed: 4\n")
    assert load_config_file(toml) == load_config_file(yaml_file)
    cfg = resolve_config(toml, {"seed": 9, "time_ns": None, "walkers": 3})
    assert (cfg.system, cfg.timestep_fs, cfg.seed, cfg.walkers, cfg.steps) == (
        "double-well",
        2.0,
        9,
        3,
        50,
    )
    # A later time_ns replaces the file's steps instead of conflicting with it.
    cfg = resolve_config(toml, {"time_ns": 1e-3})
    assert cfg.steps is None and cfg.n_steps == 500


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_config_file(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = [1,\n")
    with pytest.raises(ValueError, match="cannot parse"):
        load_config_file(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("temperatur_k: 300\n")
    with pytest.raises(ValueError, match="unknown key 'temperatur_k'"):
        load_config_file(typo)
    other = tmp_path / "md.json"
    other.write_text("{}")
    with pytest.raises(ValueError, match="toml"):
        load_config_file(other)


def test_write_config_round_trip(tmp_path):
    cfg = MDConfig(system="muller-brown", walkers=4, steps=100, implicit_solvent=None)
    path = write_config(cfg, tmp_path / "config.yaml", {"engine": "torch"})
    data = load_config_file(path)
    assert data["extra"] == {"engine": "torch"}
    data.pop("extra")
    again = MDConfig(**data)
    assert again.to_dict() | {"extra": {}} == cfg.to_dict()
    assert not list(tmp_path.glob(".*tmp"))
