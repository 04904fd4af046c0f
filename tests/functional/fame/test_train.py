"""FAME on the training engine: exact resume, validation, saved model, `sci-moe train fame`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sci_moe.cli.main import main
from sci_moe.functional.fame import (
    FAMETrainConfig,
    FunctionOnFunctionRegressor,
    make_oscillator_data,
)

TINY = dict(
    num_experts=2, hidden=3, expert_hidden=4, attention_dim=3, decoder_hidden=3, num_quadrature=5
)
CLI_TINY = [
    *("--n-train", "6", "--n-val", "3", "--n-test", "3", "--batch-size", "3"),
    *("--hidden", "3", "--expert-hidden", "4", "--attention-dim", "3"),
    *("--decoder-hidden", "3", "--num-quadrature", "5", "--num-experts", "2", "--no-progress"),
]


@pytest.fixture(scope="module")
def data():
    d = make_oscillator_data(7, seed=3, grid_size=20, output_size=8)
    return d.inputs[:5], d.output_pairs()[:5], (d.inputs[5:], d.output_pairs()[5:])


def _reg(**kw):
    train = FAMETrainConfig(steps=8, batch_size=2, eval_every=3, progress=False, **kw)
    return FunctionOnFunctionRegressor(train=train, **TINY)


def test_exact_resume_equals_an_uninterrupted_run(tmp_path, data):
    X, Y, val = data
    full = _reg(restore_best=False).fit(X, Y, validation=val, out_dir=tmp_path / "a")
    part = _reg(restore_best=False).fit(X, Y, validation=val, out_dir=tmp_path / "b", stop_after=4)
    assert part.result.reason == "interrupted" and part.result.step == 4
    rest = _reg(restore_best=False).fit(X, Y, validation=val, out_dir=tmp_path / "b", resume=True)
    assert rest.result.resumed_from == 4 and rest.result.step == 8
    a, b = full.model.state_dict(), rest.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert rest.history == full.history and len(full.history) == 8
    assert rest.result.evals == full.result.evals  # validation at steps 3, 6 and 8


def test_best_validation_weights_saved_and_loaded(tmp_path, data):
    X, Y, val = data
    reg = _reg().fit(X, Y, validation=val)
    res = reg.result
    vals = [e["val_rel_l2"] for e in res.evals]
    assert [e["step"] for e in res.evals] == [3, 6, 8]
    assert res.best_metric == min(e["val_loss"] for e in res.evals)
    assert all(np.isfinite(vals))
    q = np.linspace(0, 10, 5)
    reg.save(tmp_path / "m.pt")
    back = FunctionOnFunctionRegressor.load(tmp_path / "m.pt")
    assert np.array_equal(back.predict(val[0], q), reg.predict(val[0], q))
    with pytest.raises(TypeError, match="not both"):
        FunctionOnFunctionRegressor(train=FAMETrainConfig(), steps=3)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        FunctionOnFunctionRegressor(steps=0)


def test_sci_moe_train_fame(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "fame", "--out", str(out), *CLI_TINY]
    assert main([*argv, "--steps", "2", "--eval-every", "1"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["finished"] and res["data"] == {"train": 6, "val": 3, "test": 3}
    assert np.isfinite(res["test_rel_l2"]) and res["test_rel_l2_mean_predictor"] > 0
    reg = FunctionOnFunctionRegressor.load(out / "model.pt")
    assert reg.model.config.num_experts == 2 and reg.model.config.num_functions == 1  # regime
    # a longer run continues from the checkpoint
    assert main([*argv, "--steps", "3", "--eval-every", "1", "--resume"]) == 2  # other steps
    assert "--resume with other settings" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("hiden = 3\n")
    assert main(["train", "fame", "--out", str(tmp_path / "x"), "--config", str(bad)]) == 2
    assert "unknown key 'hiden'" in capsys.readouterr().err
    assert main(["train", "fame", "--out", str(tmp_path / "x"), "--steps", "0"]) == 2
    assert main(["train", "fame", "--out", str(tmp_path / "x"), "--task", "sunspots"]) == 2
    assert "--task" in capsys.readouterr().err
    assert main(["train", "fame", "--out", str(tmp_path / "x"), "--observed", "0.5,2"]) == 2
    assert main(["train", "fame", "--out", str(tmp_path / "x"), "--hidden", "0"]) == 2
    assert "--hidden" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fit_validate_predict_on_cuda_and_load_on_the_cpu(tmp_path, data):
    X, Y, val = data
    reg = _reg(device="cuda").fit(X, Y, validation=val)
    assert next(reg.model.parameters()).device.type == "cuda"
    ref = _reg().fit(X, Y, validation=val)
    assert reg.history[0] == pytest.approx(ref.history[0], rel=1e-3)  # the same first batch
    assert all(np.isfinite(e["val_rel_l2"]) for e in reg.result.evals)
    q = np.linspace(0, 10, 5)
    pred = reg.predict(val[0], q)
    assert pred.shape == (2, 5) and np.isfinite(pred).all()
    pi = reg.mixture_weights(val[0])
    assert np.allclose(pi.sum(-1), 1.0, atol=1e-5)
    reg.save(tmp_path / "m.pt")  # CPU tensors: loads without a GPU
    back = FunctionOnFunctionRegressor.load(tmp_path / "m.pt")
    assert next(back.model.parameters()).device.type == "cpu"
    np.testing.assert_allclose(back.predict(val[0], q), pred, rtol=1e-4, atol=1e-5)
