"""``sci-moe train <method> --device`` end to end for graph-merging, mvcge, fame, more-brain
and cogamid: on a GPU every engine run trains there, the results are finite and the first
loss is the CPU run's (loosely); on the CPU ``--device cpu`` is the default, bit for bit.

Each case is the tiny run of the method's own CLI test (``tests/<field>/.../test_*``), with
every step's loss logged and the training noise a GPU would draw differently (dropout,
router noise) switched off, so that the first loss of a GPU run is that of a CPU run.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from sci_moe._util import atomic_save_npz, module_device
from sci_moe.cli.main import main
from sci_moe.data.minilm import text_hash
from sci_moe.data.newsgroups import newsgroup_sentences
from sci_moe.train import Trainer
from tests.graphs.merging.test_train_cli import MERGING
from tests.graphs.mvcge.test_train_cli import MVCGE
from tests.vision.cogamid.test_train_cli import TINY as COGAMID

FAME = [
    *("--n-train", "6", "--n-val", "3", "--n-test", "3", "--batch-size", "3"),
    *("--hidden", "3", "--expert-hidden", "4", "--attention-dim", "3"),
    *("--decoder-hidden", "3", "--num-quadrature", "5", "--num-experts", "2", "--no-progress"),
    *("--steps", "2", "--eval-every", "1"),
]  # tests/functional/fame/test_train.py's CLI_TINY and steps
MORE_BRAIN = [
    *("--max-sentences", "60", "--num-voxels", "32", "--n-val", "10", "--n-test", "10"),
    *("--d-model", "4", "--d-hidden", "8", "--experts", "2,4", "--batch-size", "8"),
    *("--steps", "3", "--eval-every", "2", "--no-progress", "--noise-std", "0"),
]  # tests/neuro/more_brain/test_train.py's, without router noise

#: method -> (argv, the folder of its first engine run's metrics.jsonl)
CASES = {
    "graph-merging": ([*MERGING], "pretrain"),
    "mvcge": ([*MVCGE, "--dropout", "0"], "."),
    "fame": (FAME, "."),
    "more-brain": (MORE_BRAIN, "."),
    "cogamid": (COGAMID, "task_0"),
}
METHODS = list(CASES)
NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture
def minilm_cache(tmp_path):
    """Stands in for MiniLM's embeddings of more-brain's 60 sentences (as its CLI test)."""
    texts, _, _ = newsgroup_sentences()
    keep = np.sort(np.random.default_rng(0).choice(len(texts), 60, False))
    emb = np.random.default_rng(1).standard_normal((60, 384)).astype(np.float32)
    cache = tmp_path / "emb.npz"
    key = text_hash([texts[i] for i in keep], "all-MiniLM-L6-v2")
    atomic_save_npz(cache, {"features": emb, "key": np.array(key)})
    return cache


@pytest.fixture
def fit_devices(monkeypatch):
    """The device of the model after every engine run (``Trainer.fit``) of the test."""
    seen: list[str] = []
    fit = Trainer.fit

    def recording_fit(self, *args, **kwargs):
        res = fit(self, *args, **kwargs)
        seen.append(module_device(self.model).type)
        return res

    monkeypatch.setattr(Trainer, "fit", recording_fit)
    return seen


def _train(method, out, extra, cache) -> dict:
    argv, _ = CASES[method]
    more = ["--cache", str(cache)] if method == "more-brain" else []
    assert main(["train", method, "--out", str(out), *argv, *more, "--log-every", "1", *extra]) == 0
    return json.loads((out / "results.json").read_text())


def _first_loss(method, out) -> float:
    lines = (out / CASES[method][1] / "metrics.jsonl").read_text().splitlines()
    return next(r["train_loss"] for r in map(json.loads, lines) if "train_loss" in r)


def _scores(method, res) -> list[float]:
    """The method's headline numbers (each must be finite)."""
    if method == "graph-merging":
        return [m["auc"] for key in ("zero_shot", "held_out_edges") for m in res[key].values()]
    if method == "mvcge":
        return [res["test_accuracy"], res["test_macro_f1"]]
    if method == "fame":
        return [res["test_rel_l2"], res["val_rel_l2_best"]]
    if method == "more-brain":
        return [v for s in res["test"].values() for v in (s["top1"], s["top5"])]
    return [s["miou_all"] for s in res["steps"]]


def _without_times(obj):
    """``obj`` without wall times and the device setting (the rest must be equal)."""
    if isinstance(obj, dict):
        return {k: _without_times(v) for k, v in obj.items() if "time" not in k and k != "device"}
    if isinstance(obj, list):
        return [_without_times(v) for v in obj]
    return obj


@pytest.mark.parametrize("method", METHODS)
def test_device_cpu_is_the_default_bit_for_bit(tmp_path, method, minilm_cache, fit_devices):
    default = _train(method, tmp_path / "default", [], minilm_cache)
    cpu = _train(method, tmp_path / "cpu", ["--device", "cpu"], minilm_cache)
    assert _without_times(cpu) == _without_times(default)
    assert _first_loss(method, tmp_path / "cpu") == _first_loss(method, tmp_path / "default")
    assert fit_devices and set(fit_devices) == {"cpu"}
    assert all(math.isfinite(v) for v in _scores(method, cpu))


@pytest.mark.gpu
@NEEDS_CUDA
@pytest.mark.parametrize("method", METHODS)
def test_train_on_cuda_end_to_end(tmp_path, method, minilm_cache, fit_devices):
    res = _train(method, tmp_path / "cuda", ["--device", "cuda"], minilm_cache)
    assert res["train"]["finished"]
    assert fit_devices and set(fit_devices) == {"cuda"}  # every engine run trained there
    assert all(math.isfinite(v) for v in _scores(method, res))
    saved = torch.load(tmp_path / "cuda" / "model.pt", weights_only=True)
    tensors = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            tensors.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)

    walk(saved)
    assert tensors and all(t.device.type == "cpu" for t in tensors)  # loads on any machine
    _train(method, tmp_path / "ref", ["--device", "cpu"], minilm_cache)
    first = _first_loss(method, tmp_path / "cuda")
    assert first == pytest.approx(_first_loss(method, tmp_path / "ref"), rel=1e-2)
