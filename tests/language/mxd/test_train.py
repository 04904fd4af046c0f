import pytest
import torch

from sci_moe.language.mxd import (
    DecompositionTrainConfig,
    MixtureOfDecoders,
    SkipTranscoder,
    Transcoder,
    evaluate_decomposition,
    resample_dead_units,
    train_decomposition,
)


def _teacher_data(n=600, d=6, seed=0):
    """Activations of a random GELU MLP (a known target)."""
    g = torch.Generator().manual_seed(seed)
    w1, w2 = torch.randn(d, 24, generator=g) / d**0.5, torch.randn(24, d, generator=g) / 24**0.5
    x = torch.randn(n, d, generator=g)
    return x, torch.nn.functional.gelu(x @ w1) @ w2


def _layers():
    torch.manual_seed(0)
    return {
        "mxd": MixtureOfDecoders(6, 6, num_experts=40, top_k=4, d_hidden=12),
        "transcoder": Transcoder(6, 6, d_latent=52, top_k=4),
        "skip": SkipTranscoder(6, 6, d_latent=46, top_k=4),
    }


@pytest.mark.parametrize("kind", ["mxd", "transcoder", "skip"])
def test_training_fits_a_known_mlp(kind):
    x, y = _teacher_data()
    layer = _layers()[kind]
    before = evaluate_decomposition(layer, x, y)
    cfg = DecompositionTrainConfig(
        steps=150, batch_size=64, lr=1e-2, log_every=50, progress=False, dead_window=640
    )
    res = train_decomposition(layer, x, y, cfg)
    after = evaluate_decomposition(layer, x, y)
    assert res.step == 150 and res.tokens_seen == 150 * 64 and len(res.history) == 3
    assert after["nmse"] < 0.5 * before["nmse"]
    assert after["fvu"] < 0.5
    assert 0.0 <= res.dead_fraction <= 1.0 and after["l0"] <= 4
    if kind == "mxd":  # unit-norm expert vectors are kept unit-norm
        torch.testing.assert_close(layer.C.norm(dim=1), torch.ones(40))


@pytest.mark.parametrize("kind", ["mxd", "transcoder"])
def test_resume_is_bit_identical(kind, tmp_path):
    x, y = _teacher_data()
    cfg = DecompositionTrainConfig(
        steps=12,
        batch_size=32,
        lr=5e-3,
        progress=False,
        log_every=4,
        dead_window=96,
        resample_every=5,
    )
    straight = _layers()[kind]
    r1 = train_decomposition(straight, x, y, cfg)
    assert r1.resampled > 0  # the resampling is part of what must resume exactly
    resumed = _layers()[kind]
    part = train_decomposition(resumed, x, y, cfg, tmp_path, stop_after=7)
    assert part.step == 7 and part.summary.reason == "interrupted"
    fresh = _layers()[kind]  # a new process: new layer object, state from the file
    r2 = train_decomposition(fresh, x, y, cfg, tmp_path, resume=True)
    assert r2.step == 12 and r2.history == r1.history and r2.resampled == r1.resampled
    assert r2.summary.resumed_from == 7 and r2.dead_fraction == r1.dead_fraction
    for (n, a), (_, b) in zip(
        straight.state_dict().items(), fresh.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), n


def test_resume_refuses_another_configuration(tmp_path):
    x, y = _teacher_data()
    cfg = DecompositionTrainConfig(steps=2, batch_size=8, progress=False)
    train_decomposition(_layers()["transcoder"], x, y, cfg, tmp_path)
    other = DecompositionTrainConfig(steps=4, batch_size=8, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        train_decomposition(_layers()["transcoder"], x, y, other, tmp_path, resume=True)
    with pytest.raises(ValueError, match="already holds"):  # a new run never overwrites
        train_decomposition(_layers()["transcoder"], x, y, cfg, tmp_path)


def test_validation_metrics_are_evaluated(tmp_path):
    x, y = _teacher_data()
    cfg = DecompositionTrainConfig(steps=6, batch_size=32, eval_every=3, progress=False)
    res = train_decomposition(_layers()["mxd"], x[:500], y[:500], cfg, x_val=x[500:], y_val=y[500:])
    assert [e["step"] for e in res.summary.evals] == [3, 6]
    assert set(res.summary.evals[-1]) >= {"val_nmse", "val_fvu", "val_dead_fraction", "val_l0"}
    with pytest.raises(ValueError, match="x_val and y_val"):
        train_decomposition(_layers()["mxd"], x, y, cfg, x_val=x)


def test_resampling_revives_dead_units():
    x, y = _teacher_data()
    layer = _layers()["transcoder"]
    with torch.no_grad():
        layer.b_enc[:10] = -100.0  # these latents can never fire
    opt = torch.optim.Adam(layer.parameters())
    dead = torch.zeros(52, dtype=torch.bool)
    dead[:10] = True
    got = resample_dead_units(layer, opt, dead, x[:64], y[:64], torch.Generator().manual_seed(0))
    assert got == 10 and bool((layer.b_enc[:10] == 0).all())
    torch.testing.assert_close(layer.W_dec[:10].norm(dim=1), torch.ones(10))
    # each revived latent points at an input it now responds to (it could never fire before)
    pre = x[:64] @ layer.W_enc + layer.b_enc
    assert bool((pre[:, :10].max(0).values > 0).all())


def test_dead_fraction_counts_units_that_never_fire():
    x, y = _teacher_data()
    layer = _layers()["transcoder"]
    with torch.no_grad():
        layer.b_enc[:13] = -100.0
    cfg = DecompositionTrainConfig(steps=5, batch_size=32, lr=1e-6, dead_window=64, progress=False)
    res = train_decomposition(layer, x, y, cfg)
    assert res.dead_fraction >= 13 / 52
    assert evaluate_decomposition(layer, x, y)["dead_fraction"] >= 13 / 52


def test_output_bias_starts_at_the_mean_target():
    x, y = _teacher_data()
    y = y + 3.0
    for kind, layer in _layers().items():
        cfg = DecompositionTrainConfig(steps=1, batch_size=8, lr=1e-9, progress=False)
        train_decomposition(layer, x, y, cfg)
        name = "bias" if kind == "mxd" else "b_dec"
        torch.testing.assert_close(getattr(layer, name).detach(), y.mean(0), atol=1e-6, rtol=0)


def test_bad_training_input():
    x, y = _teacher_data()
    with pytest.raises(ValueError, match="steps"):
        DecompositionTrainConfig(steps=0)
    with pytest.raises(ValueError, match="lr"):
        DecompositionTrainConfig(lr=float("nan"))
    with pytest.raises(ValueError, match="dead_window"):
        DecompositionTrainConfig(dead_window=0)
    with pytest.raises(ValueError, match="MLP's sizes"):
        train_decomposition(
            Transcoder(5, 6, 8, 2), x, y, DecompositionTrainConfig(steps=1, progress=False)
        )
    with pytest.raises(ValueError, match="not a sparse decomposition"):
        mod = torch.nn.Linear(6, 6)
        mod.d_in = mod.d_out = 6
        train_decomposition(mod, x, y)


def test_explicit_cpu_device_is_the_default_run():
    """``device="cpu"`` gives the default run bit for bit, resampling and validation
    included (both move their batches to the layer's device)."""
    x, y = _teacher_data()
    cfg = dict(steps=10, batch_size=32, lr=5e-3, progress=False, log_every=5, dead_window=96,
               resample_every=5, eval_every=5)  # fmt: skip
    layers, results = [], []
    for dev in ({}, {"device": "cpu"}):
        layer = _layers()["transcoder"]
        res = train_decomposition(
            layer, x, y, DecompositionTrainConfig(**cfg, **dev), x_val=x[:64], y_val=y[:64]
        )
        layers.append(layer.state_dict())
        results.append((res.history, res.resampled, res.summary.evals))
    assert results[0] == results[1] and results[0][1] > 0
    assert all(torch.equal(layers[0][k], layers[1][k]) for k in layers[0])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_resampling_and_evaluation_on_cuda_with_cpu_activations():
    """The layer on the GPU, the activations on the CPU: resampling and evaluation move
    them; the draws are the CPU generator's (the same picks as on the CPU)."""
    x, y = _teacher_data()
    got = {}
    for device in ("cpu", "cuda"):
        layer = _layers()["transcoder"].to(device)
        with torch.no_grad():
            layer.b_enc[:10] = -100.0
        opt = torch.optim.Adam(layer.parameters())
        dead = torch.zeros(52, dtype=torch.bool)
        dead[:10] = True
        n = resample_dead_units(layer, opt, dead, x[:64], y[:64], torch.Generator().manual_seed(0))
        got[device] = (n, layer.W_dec.detach().cpu(), evaluate_decomposition(layer, x, y))
    assert got["cuda"][0] == got["cpu"][0] == 10
    torch.testing.assert_close(got["cuda"][1], got["cpu"][1], rtol=1e-3, atol=1e-4)
    for k, v in got["cpu"][2].items():
        assert got["cuda"][2][k] == pytest.approx(v, rel=1e-2, abs=1e-4), k
