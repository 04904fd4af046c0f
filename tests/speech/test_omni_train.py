"""Omni-Expert on the engine: exact resume of a stage; ``sci-moe train omni-expert``, tiny."""

import json

import pytest
import torch

from sci_moe._util import load_verified
from sci_moe.cli.main import main
from sci_moe.speech.omni import (
    FrameTensors,
    MaskNetConfig,
    PhonemeIndependentMask,
    PhonemeMoEMask,
    TrainConfig,
    converged,
    fit_model,
    train_pi,
)
from sci_moe.train import seed_everything

NET = MaskNetConfig(n_bins=65, context=3, hidden=8, classifier_hidden=8)


def _data(T=96, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lab = torch.randint(0, 5, (T,), generator=gen)
    x = torch.randn(T, 3, 65, generator=gen) + lab[:, None, None].float()
    return FrameTensors(x, torch.rand(T, 65, generator=gen), torch.rand(T, 65, generator=gen), lab)


def test_stage_resumes_exactly_with_fused_adam(tmp_path):
    data = _data()
    cfg = TrainConfig(epochs=3, batch_size=32, seed=2)  # 9 steps, 3 per epoch
    pi = train_pi(data, NET, TrainConfig(epochs=1, batch_size=32))
    ref = PhonemeMoEMask.from_pi(pi)
    res = fit_model(ref, data, cfg, out_dir=tmp_path / "a")
    assert res.step == 9 and res.finished
    assert load_verified(tmp_path / "a" / "checkpoint.pt")["optimizer"]["param_groups"][0]["fused"]
    part = PhonemeMoEMask.from_pi(pi)
    assert fit_model(part, data, cfg, out_dir=tmp_path / "b", stop_after=4).reason == "interrupted"
    again = PhonemeMoEMask.from_pi(pi)  # rebuilt as a new process would
    res = fit_model(again, data, cfg, out_dir=tmp_path / "b", resume=True)
    assert res.resumed_from == 4 and res.step == 9
    a, b = ref.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="another model or data"):
        fit_model(
            PhonemeMoEMask.from_pi(pi), _data(seed=1), cfg, out_dir=tmp_path / "b", resume=True
        )


def test_until_flat_stops_on_a_flat_validation_curve_and_resumes(tmp_path):
    data, val = _data(T=128), _data(T=64, seed=3)
    cfg = TrainConfig(epochs=200, batch_size=32, seed=0, eval_every=4, until_flat=True)
    pi, res = train_pi(data, NET, cfg, validation=val, return_result=True)
    assert res.reason == "early_stop" and res.finished and converged(res, cfg)
    assert (
        20 <= res.step < 800 and len(res.evals) == res.step // 4
    )  # stopped well before the cap of 200 epochs x 4 steps
    assert res.best_metric == min(e["val_loss"] for e in res.evals)
    # the same run in pieces, each resumed from the last checkpoint: identical weights
    out = tmp_path / "pi"
    _, part = train_pi(data, NET, cfg, validation=val, out_dir=out, return_result=True)
    assert part.step == res.step
    again, back = train_pi(
        data, NET, cfg, validation=val, out_dir=out, resume=True, return_result=True
    )
    assert back.step == res.step and back.reason == "early_stop"
    a, b = pi.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="validation"):
        train_pi(data, NET, cfg)
    with pytest.raises(ValueError, match="eval_every"):
        TrainConfig(until_flat=True)
    # a capped run that is still improving is not converged
    short = TrainConfig(epochs=1, batch_size=32, eval_every=1, until_flat=True)
    _, r = train_pi(data, NET, short, validation=val, return_result=True)
    assert r.reason == "completed" and r.step == 4 and not converged(r, short)


def test_until_flat_interrupted_resume_is_exact(tmp_path):
    data, val = _data(T=128), _data(T=64, seed=3)
    cfg = TrainConfig(epochs=200, batch_size=32, seed=1, eval_every=4, until_flat=True)
    ref, res = train_pi(data, NET, cfg, validation=val, return_result=True)
    seed_everything(1)
    part = PhonemeIndependentMask(NET)
    r1 = fit_model(part, data, cfg, validation=val, out_dir=tmp_path / "b", stop_after=10)
    assert r1.reason == "interrupted" and r1.step == 10
    seed_everything(1)
    again = PhonemeIndependentMask(NET)
    r2 = fit_model(again, data, cfg, validation=val, out_dir=tmp_path / "b", resume=True)
    assert r2.step == res.step and r2.reason == "early_stop"
    a, b = ref.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


TINY = [
    "--n-train", "2", "--n-test", "1", "--n-rirs", "1", "--rt60", "0.3", "--context", "3",
    "--hidden", "8", "--classifier-hidden", "8", "--epochs", "1", "--ft-epochs", "1",
    "--batch-size", "512", "--no-progress",
]  # fmt: skip


def test_train_omni_expert_tiny(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "omni-expert", "--out", str(out), *TINY]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "omni-expert" and res["train"]["finished"]
    assert set(res["stages"]) == {"pi", "moe", "oe", "classifier"}
    systems = {"reverberant", "PI", "MoE^p", "MoE^k", "OE^p", "OE^k", "IRM"}
    assert set(res["test"]["stoi_vocoded"]) == set(res["test"]["lsd_db"]) == systems
    assert res["test"]["lsd_db"]["IRM"] < res["test"]["lsd_db"]["reverberant"]
    saved = torch.load(out / "models.pt", weights_only=True)
    assert {"pi", "moe", "oe", "classifier", "normalizer"} <= set(saved)
    for stage in ("pi", "moe", "oe", "classifier"):
        assert (out / stage / "checkpoint.pt").is_file()
    # a finished run resumes to the same models and results (every stage loads its weights)
    assert main(["train", "omni-expert", "--out", str(out), *TINY, "--resume"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["test"] == res["test"]
    assert again["stages"]["oe"]["resumed_from"] == res["stages"]["oe"]["step"] >= 1
    assert main(["train", "omni-expert", "--out", str(out), *TINY]) == 2  # holds a run


def test_train_omni_expert_until_flat_tiny(tmp_path):
    out = tmp_path / "flat"
    flat = ["--until-flat", "--n-val", "1", "--eval-every", "1", "--epochs", "8"]
    assert main(["train", "omni-expert", "--out", str(out), *TINY, *flat]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["finished"] and set(res["stages"]) == {"pi", "moe", "oe", "classifier"}
    for stage in res["stages"].values():
        assert isinstance(stage["converged"], bool) and stage["evals"]
        assert "val_loss" in stage["evals"][0]
    assert main(["train", "omni-expert", "--out", str(out), *TINY, *flat, "--resume"]) == 0
    assert json.loads((out / "results.json").read_text())["test"] == res["test"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--until-flat", "--eval-every", "2"], "n_val"),
        (["--ft-epochs", "0"], "--ft-epochs"),
        (["--rt60", "-1"], "--rt60"),
        (["--hidden", "0"], "hidden"),
    ],
)
def test_train_omni_expert_bad_values_exit_2(tmp_path, capsys, extra, message):
    assert main(["train", "omni-expert", "--out", str(tmp_path / "r"), *TINY, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_explicit_cpu_device_is_the_default_run(tmp_path):
    """``device="cpu"`` (the frames used where they are) trains the default run bit for bit,
    validation and the until-flat stretches included."""
    data, val = _data(T=128), _data(T=64, seed=3)
    models = []
    for dev in ({}, {"device": "cpu"}):
        cfg = TrainConfig(epochs=3, batch_size=32, seed=0, eval_every=4, until_flat=True, **dev)
        pi, res = train_pi(data, NET, cfg, validation=val, return_result=True)
        models.append((pi.state_dict(), res.evals))
    (a, ea), (b, eb) = models
    assert ea == eb and all(torch.equal(a[k], b[k]) for k in a)
