"""The MD engine loads learned model files through a registered loader (issue 42).

``sci_moe.sampling.md`` does not import ``sci_moe.sampling.diffusion`` (the package that
writes the model files sits above the engine: no import cycle); diffusion registers its
loader when imported, and importing any part of ``sci_moe.sampling`` imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sci_moe.sampling.md import MDConfig, build_md_system, default_model_path, systems

_FRESH = """
import sys
from sci_moe.sampling.md import MDConfig, build_md_system
system, engine = build_md_system(MDConfig(model=sys.argv[1], walkers=2))
print(engine, len(system.masses), system.provider is not None)
"""


def _model():
    model = default_model_path()
    if model is None:  # pragma: no cover - the model ships with the package
        pytest.skip("no shipped model")
    return model


def test_importing_md_alone_can_load_a_learned_model():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH, str(_model())],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    engine, n, has_provider = proc.stdout.split()
    assert engine == "torch" and int(n) > 0 and has_provider == "True"


def test_without_a_loader_the_error_says_what_to_do(monkeypatch):
    model = _model()
    monkeypatch.setattr(systems, "_MODEL_LOADERS", {})
    with pytest.raises(ValueError, match="run with a force field instead"):
        build_md_system(MDConfig(model=str(model), walkers=2))


def test_registered_loader_is_used(monkeypatch):
    model = _model()
    calls = []

    def loader(path):
        calls.append(path)
        raise ValueError("planted loader")

    monkeypatch.setattr(systems, "_MODEL_LOADERS", {})
    systems.register_model_loader(systems.MODEL_KIND, loader)
    with pytest.raises(ValueError, match="planted loader"):
        build_md_system(MDConfig(model=str(model), walkers=2))
    assert calls == [str(model)]
